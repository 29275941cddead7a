package app

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/go-logr/logr"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/cos-externalizer/cos-externalizer/webhook/server"
)

// TestDrainFirst: the manager's context outlives the signal by the drain period, during which the
// webhooks drain; with no period it ends with the signal.
func TestDrainFirst(t *testing.T) {
	tests := map[string]struct {
		period time.Duration
	}{
		"no drain":         {},
		"a drain of 3s":    {period: 3 * time.Second},
		"a drain of 100ms": {period: 100 * time.Millisecond},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			clk := testingclock.NewFakeClock(time.Unix(0, 0))
			d := &server.Drain{}
			signal, stop := context.WithCancel(context.Background())
			defer stop()
			mgr := drainFirst(signal, logr.Discard(), clk, d, tc.period)
			if mgr.Err() != nil || d.Draining() {
				t.Fatalf("before the signal: manager context %v, draining %t", mgr.Err(), d.Draining())
			}
			stop()
			if tc.period == 0 {
				<-mgr.Done()
				if d.Draining() {
					t.Error("drained with no period")
				}
				return
			}
			// The drain has begun once its timer waits.
			for !clk.HasWaiters() {
				runtime.Gosched()
			}
			if mgr.Err() != nil || !d.Draining() {
				t.Fatalf("after the signal: manager context %v, draining %t; want running and draining", mgr.Err(), d.Draining())
			}
			clk.Step(tc.period - time.Nanosecond)
			if mgr.Err() != nil {
				t.Fatal("the manager's context ended before the drain period")
			}
			clk.Step(time.Nanosecond)
			<-mgr.Done()
		})
	}
}
