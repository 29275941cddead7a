package servingcert

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/cos-externalizer/cos-externalizer/certs"
)

func TestOptionsValidate(t *testing.T) {
	selfSigned := func(ca, cert time.Duration) Options {
		return Options{Source: certs.SourceSelfSigned, SecretName: certs.DefaultCASecret, WebhookConfiguration: DefaultWebhookConfiguration,
			Hosts: []string{"svc.ns.svc"}, CALifetime: ca, CertLifetime: cert}
	}
	tests := map[string]struct {
		o       Options
		wantErr string
	}{
		"defaults":                                   {o: selfSigned(DefaultCALifetime, DefaultCertLifetime)},
		"the end-to-end test's":                      {o: selfSigned(24*time.Second, 6*time.Second)},
		"a CA of exactly 3 x":                        {o: selfSigned(21*24*time.Hour, 7*24*time.Hour)},
		"a CA of 72h":                                {o: selfSigned(72*time.Hour, DefaultCertLifetime), wantErr: "--self-signed-ca-lifetime (72h0m0s) must be at least 3 x --self-signed-cert-lifetime (168h0m0s)"},
		"a CA just short of 3 x":                     {o: selfSigned(21*24*time.Hour-time.Second, 7*24*time.Hour), wantErr: "--self-signed-ca-lifetime (503h59m59s) must be at least 3 x"},
		"a CA shorter than its certs":                {o: selfSigned(time.Hour, 2*time.Hour), wantErr: "--self-signed-ca-lifetime (1h0m0s)"},
		"certificates of 4s":                         {o: selfSigned(time.Hour, 4*time.Second), wantErr: "--self-signed-cert-lifetime (4s) must be at least 5s"},
		"certificates of 0s":                         {o: selfSigned(time.Hour, 0), wantErr: "--self-signed-cert-lifetime (0s)"},
		"a CA of 0s":                                 {o: selfSigned(0, DefaultCertLifetime), wantErr: "--self-signed-ca-lifetime (0s)"},
		"lifetimes do not matter to a Secret source": {o: Options{Source: certs.SourceSecret, SecretName: certs.DefaultCertSecret, CALifetime: time.Second}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.o.Validate()
			if tc.wantErr == "" && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// apiServer is the API server of a simulation: the webhook configurations and the CA Secret in a
// fake client, whose writes can fail or have no effect.
type apiServer struct {
	client.WithWatch
	// writes counts the writes that succeeded: each wakes every loop, as their watches would.
	writes int
	// failWrites fails every create and patch.
	failWrites bool
	// freezeBundles makes a patch of a webhook configuration succeed without effect, as if another
	// writer restored it at once: the injected bundle never changes.
	freezeBundles bool
}

func newAPIServer() *apiServer {
	webhook := admissionregistrationv1.WebhookClientConfig{}
	a := &apiServer{}
	base := fake.NewClientBuilder().WithObjects(
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: DefaultWebhookConfiguration},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "externalize.example", ClientConfig: webhook}}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: DefaultWebhookConfiguration},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "validate.example", ClientConfig: webhook}, {Name: "guard.example", ClientConfig: webhook}}},
	).Build()
	refused := errors.New("the API server refused the write")
	a.WithWatch = interceptor.NewClient(base, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if a.failWrites {
				return refused
			}
			if err := c.Create(ctx, obj, opts...); err != nil {
				return err
			}
			a.writes++
			return nil
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if a.failWrites {
				return refused
			}
			if _, secret := obj.(*corev1.Secret); a.freezeBundles && !secret {
				return nil
			}
			if err := c.Patch(ctx, obj, patch, opts...); err != nil {
				return err
			}
			a.writes++
			return nil
		},
	})
	return a
}

// simLoop is one of the simulated loops: paced by the loops' schedule, woken by every write.
type simLoop struct {
	sync       func(context.Context) (time.Time, error)
	sched      schedule
	due, early time.Time
	poked      bool
	perHour    map[int]int
}

// TestSelfSignedWithoutLeader: when the Lease is held by a replica that runs no authority (a rolling
// update from cert-manager to self-signed keeps the old replicas, and the Lease, until the new ones
// are ready), the new replicas still get a CA: one creates it, both serve a certificate the webhook
// configurations trust, and no more than one CA is made.
func TestSelfSignedWithoutLeader(t *testing.T) {
	m := newSimulationLed(t, 9*time.Hour, 3*time.Hour, false)
	m.run(time.Minute)
	for i := range m.replicas {
		if err := m.replicas[i].ReadyCheck(nil); err != nil {
			t.Errorf("replica %d: %v", i, err)
		}
	}
	sec := &corev1.Secret{}
	if err := m.api.Get(context.Background(), client.ObjectKey{Namespace: "olmv1-system", Name: certs.DefaultCASecret}, sec); err != nil {
		t.Fatal(err)
	}
	if m.leaf(0) == "" || m.leaf(1) == "" {
		t.Errorf("a replica serves nothing")
	}
}

// simulation runs the leader's authority loop and the replica loops of two replicas, one sync at a
// time, on a fake clock, as loop paces them. Time moves from one sync to the next, and jumps of
// the clock move the loops' waits along (timers count monotonic time).
type simulation struct {
	t        *testing.T
	clock    *testingclock.FakeClock
	api      *apiServer
	replicas []*Server
	loops    []*simLoop
	// elapsed is simulated time, counting no jump; hours index it.
	elapsed time.Duration
	// issued counts the serving certificates each replica issued, by hour.
	issued []map[int]int
}

func newSimulation(t *testing.T, caLife, certLife time.Duration) *simulation {
	return newSimulationLed(t, caLife, certLife, true)
}

// newSimulationLed is newSimulation where replica 0 leads (runs the authority) or, led false, none
// does: the leader is a replica of another mode.
func newSimulationLed(t *testing.T, caLife, certLife time.Duration, led bool) *simulation {
	m := &simulation{t: t, clock: testingclock.NewFakeClock(t0), api: newAPIServer()}
	o := Options{Source: certs.SourceSelfSigned, Namespace: "olmv1-system", SecretName: certs.DefaultCASecret, WebhookConfiguration: DefaultWebhookConfiguration,
		Hosts: []string{"cos-externalizer-webhook.olmv1-system.svc"}, CALifetime: caLife, CertLifetime: certLife, Clock: m.clock}
	add := func(sync func(context.Context) (time.Time, error)) {
		m.loops = append(m.loops, &simLoop{sync: sync, due: t0, early: t0, perHour: map[int]int{}})
	}
	for i := range 2 {
		s := New(o, NewMetrics())
		*s.env = env{log: logr.Discard(), cached: m.api, api: m.api, cl: m.api, rec: &events.FakeRecorder{}}
		m.replicas = append(m.replicas, s)
		m.issued = append(m.issued, map[int]int{})
		src := s.src.(*SelfSignedSource)
		if i == 0 && led {
			add(src.auth.sync)
		}
		add(src.sync)
	}
	return m
}

// leaf is what replica i serves or waits to serve.
func (m *simulation) leaf(i int) string {
	s := m.replicas[i].src.(*SelfSignedSource)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.pending != nil:
		return string(s.pending.Leaf.Raw)
	case s.current != nil:
		return string(s.current.Leaf.Raw)
	}
	return ""
}

// run runs the loops for d of simulated time.
func (m *simulation) run(d time.Duration) {
	ctx := context.Background()
	until := m.clock.Now().Add(d)
	for {
		now := m.clock.Now()
		var pick *simLoop
		var at time.Time
		for _, l := range m.loops {
			when := l.due
			if l.poked && l.early.Before(when) {
				when = l.early
				if when.Before(now) {
					when = now
				}
			}
			if pick == nil || when.Before(at) {
				pick, at = l, when
			}
		}
		if !at.Before(until) {
			m.elapsed += until.Sub(now)
			m.clock.SetTime(until)
			return
		}
		if at.After(now) {
			m.elapsed += at.Sub(now)
			m.clock.SetTime(at)
		}
		hour := int(m.elapsed / time.Hour)
		writes := m.api.writes
		before := make([]string, len(m.replicas))
		for i := range m.replicas {
			before[i] = m.leaf(i)
		}
		pick.poked = false
		start := m.clock.Now()
		next, err := pick.sync(ctx)
		pick.due, pick.early = pick.sched.after(start, next, err)
		pick.perHour[hour]++
		if m.api.writes != writes {
			for _, l := range m.loops {
				l.poked = true
			}
		}
		for i := range m.replicas {
			if m.leaf(i) != before[i] {
				m.issued[i][hour]++
			}
		}
	}
}

// jump moves the clock by d without time passing: the loops' waits end when they would have.
func (m *simulation) jump(d time.Duration) {
	m.clock.SetTime(m.clock.Now().Add(d))
	for _, l := range m.loops {
		l.due, l.early = l.due.Add(d), l.early.Add(d)
	}
}

// most is the largest count of an hour.
func most(perHour map[int]int) int {
	n := 0
	for _, c := range perHour {
		n = max(n, c)
	}
	return n
}

func total(perHour map[int]int) int {
	n := 0
	for _, c := range perHour {
		n += c
	}
	return n
}

// TestSelfSignedLoopsBounded runs the leader's and the replicas' loops of the self-signed mode on a
// fake clock through the cases that used to spin or could: a CA shorter than the certificates
// (which Validate now refuses), a successor CA that never becomes trusted, every write failing, and
// jumps of the clock. A loop syncs about once a minute, a replica issues a certificate only for a
// renewal or a new signing CA, and a failing loop backs off.
func TestSelfSignedLoopsBounded(t *testing.T) {
	tests := map[string]struct {
		caLife, certLife time.Duration
		// script runs the simulation.
		script func(m *simulation)
		// maxSyncs per loop and maxIssued per replica in any simulated hour; maxIssuedTotal per replica.
		maxSyncs, maxIssued, maxIssuedTotal int
		// trusted: every replica serves a trusted certificate at the end.
		trusted bool
	}{
		"a CA of 72h and certificates of 168h": {
			caLife: 72 * time.Hour, certLife: 7 * 24 * time.Hour,
			// The first CA's certificate expires with it: with 56h left it used to be renewed at once,
			// again and again; now the successor, signing from 48h, replaces it.
			script:   func(m *simulation) { m.run(50 * time.Hour) },
			maxSyncs: 70, maxIssued: 1, maxIssuedTotal: 2,
			trusted: true,
		},
		"a successor CA that never becomes trusted": {
			caLife: 9 * time.Hour, certLife: 3 * time.Hour,
			script: func(m *simulation) {
				m.run(time.Minute) // the first CA is created and injected
				m.api.freezeBundles = true
				m.run(20 * time.Hour)
			},
			// every 2h, plus a new signing CA when the old one expires unreplaced
			maxSyncs: 70, maxIssued: 2, maxIssuedTotal: 20/2 + 3,
		},
		"every write fails": {
			caLife: 9 * time.Hour, certLife: 3 * time.Hour,
			script: func(m *simulation) {
				m.api.failWrites = true
				m.run(3 * time.Hour)
			},
			maxSyncs: int(time.Hour/maxRetryDelay) + 7, maxIssued: 0, maxIssuedTotal: 0,
		},
		"every write fails once the CA exists": {
			caLife: 9 * time.Hour, certLife: 3 * time.Hour,
			script: func(m *simulation) {
				m.run(time.Hour)
				m.api.failWrites = true
				m.run(12 * time.Hour) // the CA expires at 9h and cannot be replaced
			},
			maxSyncs: int(time.Hour/maxRetryDelay) + 7, maxIssued: 2, maxIssuedTotal: 9/2 + 2,
		},
		"the clock jumps": {
			caLife: 9 * time.Hour, certLife: 3 * time.Hour,
			script: func(m *simulation) {
				m.run(2 * time.Hour)
				m.jump(40 * 24 * time.Hour) // past every certificate and CA
				m.run(5 * time.Hour)
				m.jump(-30 * time.Minute)
				m.run(5 * time.Hour)
				m.jump(-3 * time.Hour) // before the certificates' validity
				m.run(5 * time.Hour)
			},
			maxSyncs: 70, maxIssued: 2, maxIssuedTotal: 17/2 + 4,
			trusted: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := newSimulation(t, tc.caLife, tc.certLife)
			tc.script(m)
			names := []string{"the authority", "replica 0", "replica 1"}
			for i, l := range m.loops {
				if n := most(l.perHour); n > tc.maxSyncs {
					t.Errorf("%s synced %d times in a simulated hour, want at most %d", names[i], n, tc.maxSyncs)
				}
				t.Logf("%s: %d syncs in %s, at most %d in an hour", names[i], total(l.perHour), m.elapsed, most(l.perHour))
			}
			for i, issued := range m.issued {
				t.Logf("replica %d: %d certificates issued, at most %d in an hour", i, total(issued), most(issued))
				if n := most(issued); n > tc.maxIssued {
					t.Errorf("replica %d issued %d certificates in a simulated hour, want at most %d", i, n, tc.maxIssued)
				}
				if n := total(issued); n > tc.maxIssuedTotal {
					t.Errorf("replica %d issued %d certificates in %s, want at most %d", i, n, m.elapsed, tc.maxIssuedTotal)
				}
				if tc.trusted {
					if err := m.replicas[i].ReadyCheck(nil); err != nil {
						t.Errorf("replica %d at the end: %v", i, err)
					}
				}
			}
		})
	}
}
