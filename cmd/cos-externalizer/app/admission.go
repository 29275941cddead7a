package app

import (
	"flag"
	"fmt"
	"runtime"
	"time"

	"k8s.io/utils/clock"

	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission/deadline"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission/inflight"
)

// admissionOptions are the flags that bound the admission requests served at once
// (inflight.Control): their memory, and their work by the deadlines of the API server's calls.
// Admission draws from a pool of its own, never the reconciler's (--max-concurrent-resolved-bytes),
// so a loaded webhook never holds up a rollout or a teardown.
type admissionOptions struct {
	maxBytes       int64
	wait           time.Duration
	deadlineMargin time.Duration
}

func (o *admissionOptions) bind(fs *flag.FlagSet) {
	fs.Int64Var(&o.maxBytes, "max-concurrent-admission-bytes", inflight.DefaultMaxBytes, "Largest total of memory the admission requests served at once may hold: each is charged, before it is decoded, its bytes and the estimated memory of its decoded objects (and of the stored refs an update resolves); one without room waits up to --admission-wait, then is refused with 429 TooManyRequests, which clients retry. At least --max-resolved-bytes.")
	fs.DurationVar(&o.deadlineMargin, "admission-deadline-margin", inflight.DefaultMargin, "Time kept free before the API server's deadline for each webhook call (its timeout parameter): a ClusterObjectSet request is admitted only when it, and every request admitted before it, are estimated to finish before their deadline less this margin (their work, as --max-concurrent-admission-bytes charges it, shared among the cores at a rate measured on the requests served), and its Secrets are written only when they are estimated to be written by then (at a rate measured on the writes); else it is refused at once with 429 TooManyRequests, which clients retry, instead of timing out. 0 turns this bound off. Below "+inflight.MaxWait.String()+", the validating webhook's timeout.")
	fs.DurationVar(&o.wait, "admission-wait", inflight.DefaultWait, "How long an admission request waits for room under --max-concurrent-admission-bytes before it is refused (retryable); below "+inflight.MaxWait.String()+", the validating webhook's timeout.")
}

func (o *admissionOptions) validate(maxResolvedBytes int64) error {
	if o.maxBytes < maxResolvedBytes {
		return fmt.Errorf("--max-concurrent-admission-bytes: must be at least --max-resolved-bytes (%d), got %d", maxResolvedBytes, o.maxBytes)
	}
	if o.wait < 0 || o.wait >= inflight.MaxWait {
		return fmt.Errorf("--admission-wait: must be at least 0 and below %s, got %s", inflight.MaxWait, o.wait)
	}
	if o.deadlineMargin < 0 || o.deadlineMargin >= inflight.MaxWait {
		return fmt.Errorf("--admission-deadline-margin: must be at least 0 and below %s, got %s", inflight.MaxWait, o.deadlineMargin)
	}
	return nil
}

// inFlight are the webhooks' bounds on the requests in flight from the flags: a new pool, a new
// queue of work (or work's, a test's, and then no bound on the writes) on as many cores as Go runs
// goroutines on at once and one of the Secrets written, for this manager's webhooks alone.
func (o *admissionOptions) inFlight(work *deadline.Queue) inflight.Control {
	l := inflight.Control{Pool: content.NewPool(o.maxBytes), Wait: o.wait, Clock: clock.RealClock{}}
	switch {
	case work != nil:
		l.Work, l.Clock = work, work.Clock()
	case o.deadlineMargin > 0:
		l.Work = deadline.New(l.Clock, deadline.Options{Cores: runtime.GOMAXPROCS(0), Margin: o.deadlineMargin, MinSample: inflight.WorkMinSample})
		// The Secrets written share the API server: one stream.
		l.Writes = deadline.New(l.Clock, deadline.Options{Cores: 1, Rate: inflight.DefaultWriteRate, Margin: o.deadlineMargin})
	}
	return l
}
