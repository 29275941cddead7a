package servingcert

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
)

// The loops' pacing. A loop syncs when the time its last sync asked for comes, when a watched object
// changes, and every resyncInterval, but never sooner than minSyncInterval after its last sync began:
// no decision, event or error can make it spin. After an error it waits minSyncInterval, doubled on
// every further error up to maxRetryDelay, plus up to retryJitter of that, and changes do not cut
// the wait short. minSyncInterval is one second, not more, because the end-to-end test runs
// certificates of 6 s (renewed in their last 2 s); MinCertLifetime keeps the renewal window above it.
const (
	minSyncInterval = time.Second
	resyncInterval  = time.Minute
	maxRetryDelay   = 30 * time.Second
	retryJitter     = 0.1
)

// schedule paces one loop.
type schedule struct {
	failures int
}

// after says when to sync again after a sync that began at start and returned next (zero: no time
// of its own) and err: due when nothing changes, early at the soonest on a change (early <= due).
func (p *schedule) after(start, next time.Time, err error) (due, early time.Time) {
	if err != nil {
		d := wait.Jitter(min(minSyncInterval<<min(p.failures, 6), maxRetryDelay), retryJitter)
		p.failures++
		return start.Add(d), start.Add(d)
	}
	p.failures = 0
	early, due = start.Add(minSyncInterval), start.Add(resyncInterval)
	if !next.IsZero() && next.Before(due) {
		due = next
	}
	if due.Before(early) {
		due = early
	}
	return due, early
}

// loop runs sync until ctx ends, paced by a schedule; a value on ch is a change.
func loop(ctx context.Context, log logr.Logger, clk clock.Clock, ch <-chan struct{}, sync func(context.Context) (time.Time, error)) error {
	var sched schedule
	for {
		select {
		case <-ch: // this sync sees it
		default:
		}
		start := clk.Now()
		next, err := sync(ctx)
		due, early := sched.after(start, next, err)
		if err != nil {
			log.Error(err, "serving certificate sync failed; retrying", "retryIn", due.Sub(start))
		}
		if !sleepUntil(ctx, clk, due, ch) || !sleepUntil(ctx, clk, early, nil) {
			return nil
		}
	}
}

// sleepUntil returns at t, on a value of ch (nil: never), or with false when ctx ends.
func sleepUntil(ctx context.Context, clk clock.Clock, t time.Time, ch <-chan struct{}) bool {
	d := t.Sub(clk.Now())
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := clk.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-ch:
	case <-timer.C():
	}
	return true
}
