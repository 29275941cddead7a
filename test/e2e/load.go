package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cos-externalizer/cos-externalizer/internal/kube/scheme"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
)

// Load is clients sending admission requests through the webhooks without pause: server-side dry
// runs of creating a ClusterObjectSet whose inline ConfigMap is externalized (the mutating and the
// validating webhook both answer; nothing is stored).
type Load struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	latencies []time.Duration
	errs      []error
}

// StartLoad starts n clients.
func StartLoad(cfg *rest.Config, n int) (*Load, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0 // no client-side throttling
	// Each dry run gets the webhook's externalization warning; thousands of them would bury the
	// suite's own output (klog prints every warning a client gets).
	cfg.WarningHandler = rest.NoWarnings{}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Load{cancel: cancel}
	for g := range n {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				cos := builders.COS(fmt.Sprintf("e2e-load-%d-%d", g, i),
					builders.WithAnnotations(map[string]string{admission.Annotation: string(admission.ModeAlways)}),
					builders.WithPhase("config", builders.Inline(builders.ConfigMap("e2e-load", fmt.Sprintf("cm-%d-%d", g, i), map[string]string{"k": "v"}))))
				start := time.Now()
				err := c.Create(ctx, cos, client.DryRunAll)
				took := time.Since(start)
				if ctx.Err() != nil {
					return // stopped mid-request: neither a success nor a failure
				}
				l.mu.Lock()
				if err != nil {
					l.errs = append(l.errs, err)
				} else {
					l.latencies = append(l.latencies, took)
				}
				l.mu.Unlock()
			}
		}()
	}
	return l, nil
}

// Done is the number of requests answered so far, successfully or not.
func (l *Load) Done() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.latencies) + len(l.errs)
}

// WaitFor returns once n more requests than now have been answered.
func (l *Load) WaitFor(ctx context.Context, n int) error {
	target := l.Done() + n
	return wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 5*time.Minute, true, func(context.Context) (bool, error) {
		return l.Done() >= target, nil
	})
}

// Result is what a load saw.
type Result struct {
	OK       int
	Failed   []error
	P50, P99 time.Duration
}

func (r Result) String() string {
	return fmt.Sprintf("%d requests, %d failed, p50 %s, p99 %s", r.OK+len(r.Failed), len(r.Failed), r.P50.Round(100*time.Microsecond), r.P99.Round(100*time.Microsecond))
}

// Stop stops the clients and returns what they saw.
func (l *Load) Stop() Result {
	l.cancel()
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	r := Result{OK: len(l.latencies), Failed: l.errs}
	r.P50, r.P99 = Percentile(l.latencies, 0.50), Percentile(l.latencies, 0.99)
	return r
}

// Percentile is the p-quantile of ds (nearest rank).
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}
