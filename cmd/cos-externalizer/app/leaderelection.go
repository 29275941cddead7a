package app

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"k8s.io/client-go/tools/leaderelection"
	ctrl "sigs.k8s.io/controller-runtime"
)

// The Lease's timings when no flag sets them: kube-controller-manager's and controller-runtime's.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// leaderElectionOptions are the timings of the leader election's Lease, under the names
// kube-controller-manager and kube-scheduler give them. A leader that stops gives the Lease up at
// once (LeaderElectionReleaseOnCancel); these matter when it dies or loses the API server: the
// other replica takes over at most a lease duration after the last renewal, and a leader that cannot
// renew within the renew deadline exits (its Pod restarts) rather than reconcile beside a new one.
type leaderElectionOptions struct {
	leaseDuration, renewDeadline, retryPeriod time.Duration
}

func (o *leaderElectionOptions) bind(fs *flag.FlagSet) {
	fs.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", DefaultLeaseDuration, "How long a replica waits after the leader's last renewal of the Lease before it takes the Lease over (a killed leader's work resumes this late).")
	fs.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", DefaultRenewDeadline, "How long the leader keeps trying to renew the Lease before it gives up leading and exits; less than --leader-elect-lease-duration.")
	fs.DurationVar(&o.retryPeriod, "leader-elect-retry-period", DefaultRetryPeriod, "How often replicas try to take or renew the Lease; the renew deadline must exceed 1.2 times it.")
}

// validate checks the timings at start, with the flags' names: each at least a second (ours: a
// shorter one would have every replica write the Lease many times a second), then client-go's rules
// (leaderelection.NewLeaderElector), which the manager would otherwise meet only once it runs: a
// candidate retries within RetryPeriod times JitterFactor, so the renew deadline must leave room for
// one retry.
func (o *leaderElectionOptions) validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"--leader-elect-lease-duration", o.leaseDuration}, {"--leader-elect-renew-deadline", o.renewDeadline}, {"--leader-elect-retry-period", o.retryPeriod}} {
		if f.v < time.Second {
			errs = append(errs, fmt.Errorf("%s: must be at least 1s, got %s", f.name, f.v))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if o.leaseDuration <= o.renewDeadline {
		errs = append(errs, fmt.Errorf("--leader-elect-lease-duration (%s) must be greater than --leader-elect-renew-deadline (%s)", o.leaseDuration, o.renewDeadline))
	}
	if o.renewDeadline <= time.Duration(leaderelection.JitterFactor*float64(o.retryPeriod)) {
		errs = append(errs, fmt.Errorf("--leader-elect-renew-deadline (%s) must be greater than %g x --leader-elect-retry-period (%s)", o.renewDeadline, leaderelection.JitterFactor, o.retryPeriod))
	}
	return errors.Join(errs...)
}

// apply sets the timings on the manager's options.
func (o *leaderElectionOptions) apply(opts *ctrl.Options) {
	opts.LeaseDuration = &o.leaseDuration
	opts.RenewDeadline = &o.renewDeadline
	opts.RetryPeriod = &o.retryPeriod
}
