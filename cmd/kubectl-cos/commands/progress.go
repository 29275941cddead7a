package commands

import (
	"io"
	"os"
	"strings"
	"sync"

	"golang.org/x/term"

	"github.com/cos-externalizer/cos-externalizer/internal/content"
)

// progress is a one-line progress bar of the Secrets being written, by bytes, on a terminal.
type progress struct {
	mu               sync.Mutex
	w                io.Writer
	on               bool
	what             string
	sizes            []int
	total, doneBytes int
	count, of        int
}

// newProgress returns the bar for plan's Secrets: on when mode is "always", or "auto" and w is a
// terminal; otherwise every call does nothing.
func newProgress(w io.Writer, mode string, plan *content.Plan, what string) *progress {
	p := &progress{w: w, what: what, of: len(plan.Secrets)}
	switch mode {
	case "always":
		p.on = true
	case "auto":
		f, ok := w.(*os.File)
		p.on = ok && term.IsTerminal(int(f.Fd()))
	}
	for _, s := range plan.Secrets {
		n := 0
		for k, v := range s.Data {
			n += len(k) + len(v)
		}
		p.sizes = append(p.sizes, n)
		p.total += n
	}
	p.draw()
	return p
}

// written records Secret i as written (objectdata.Writer.Written).
func (p *progress) written(i int, _ bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.count++
	p.doneBytes += p.sizes[i]
	p.draw()
}

const barWidth = 30

func (p *progress) draw() {
	if !p.on || p.of == 0 {
		return
	}
	filled := barWidth
	if p.total > 0 {
		filled = barWidth * p.doneBytes / p.total
	}
	notef(p.w, "\r%s [%s%s] %d/%d, %.1f of %.1f MB", p.what, strings.Repeat("=", filled), strings.Repeat(" ", barWidth-filled),
		p.count, p.of, float64(p.doneBytes)/1e6, float64(p.total)/1e6)
}

// done clears the bar.
func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.on && p.of > 0 {
		notef(p.w, "\r\033[K")
	}
}
