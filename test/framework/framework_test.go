package framework_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/cos-externalizer/cos-externalizer/test/framework"
)

// recorder is a testing.TB whose Fatalf records the failure and ends the goroutine, as t.Fatalf does.
type recorder struct {
	testing.TB
	failure string
}

func (*recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failure = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// eventually runs framework.Eventually on a recorder and returns its failure, if any.
func eventually(ctx context.Context, cond framework.Condition) string {
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		framework.Eventually(ctx, r, "the thing", cond)
	}()
	<-done
	return r.failure
}

func TestEventually(t *testing.T) {
	for name, tc := range map[string]struct {
		holdsAt int // the call at which cond holds; 0: never, the context ends at call 3
		want    string
	}{
		"holds at once": {holdsAt: 1},
		"holds later":   {holdsAt: 3},
		"context ends":  {want: "waiting for the thing: context canceled; last seen: call 2"},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			calls := 0
			got := eventually(ctx, func(context.Context) (bool, string) {
				calls++
				if tc.holdsAt == 0 && calls == 3 {
					cancel() // what this call saw is cut short: not reported
				}
				return calls == tc.holdsAt, fmt.Sprintf("call %d", calls)
			})
			if !strings.Contains(got, tc.want) || (tc.want == "") != (got == "") {
				t.Errorf("failure %q, want %q", got, tc.want)
			}
		})
	}
}
