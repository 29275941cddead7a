package servingcert

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cos-externalizer/cos-externalizer/certs"
)

func newTestCA(t *testing.T, name string) *certs.CA {
	t.Helper()
	ca, err := certs.NewCA(name, 24*time.Hour, t0)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// issue signs a serving certificate valid from an hour before t0 for a day.
func issue(t *testing.T, ca *certs.CA) (certPEM, keyPEM []byte, pair *tls.Certificate) {
	t.Helper()
	certPEM, keyPEM, err := ca.Issue(certs.Leaf{CommonName: "webhook", Usage: x509.ExtKeyUsageServerAuth, Hosts: []string{"webhook.svc"}, ValidFor: 24 * time.Hour, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if pair, err = certs.KeyPair(certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	return certPEM, keyPEM, pair
}

// before stands for the zero since of a certificate held from before the first observation; never
// for a zero settledAt.
const before, never = time.Duration(-1), time.Duration(-2)

func TestRootsObserve(t *testing.T) {
	ca1, ca2 := newTestCA(t, "ca1").Cert, newTestCA(t, "ca2").Cert
	names := map[string]string{string(ca1.Raw): "ca1", string(ca2.Raw): "ca2"}
	type step struct {
		at      time.Duration
		bundles [][]*x509.Certificate
	}
	tests := map[string]struct {
		steps []step
		// want: since when each certificate is recorded, after the steps (before: from before the
		// first observation).
		want map[string]time.Duration
	}{
		"held by every bundle from the first observation": {
			steps: []step{{0, [][]*x509.Certificate{{ca1}, {ca1}}}, {5 * time.Second, [][]*x509.Certificate{{ca1}, {ca1}}}},
			want:  map[string]time.Duration{"ca1": before},
		},
		"a CA joins one bundle, then the other": {
			steps: []step{
				{0, [][]*x509.Certificate{{ca1}, {ca1}}},
				{time.Second, [][]*x509.Certificate{{ca1, ca2}, {ca1}}},
				{3 * time.Second, [][]*x509.Certificate{{ca1, ca2}, {ca2, ca1}}},
			},
			want: map[string]time.Duration{"ca1": before, "ca2": 3 * time.Second},
		},
		"forgotten when a bundle drops it, new when it returns": {
			steps: []step{
				{0, [][]*x509.Certificate{{ca1, ca2}, {ca1, ca2}}},
				{time.Second, [][]*x509.Certificate{{ca1}, {ca1, ca2}}},
				{2 * time.Second, [][]*x509.Certificate{{ca1, ca2}, {ca1, ca2}}},
			},
			want: map[string]time.Duration{"ca1": before, "ca2": 2 * time.Second},
		},
		"twice in a bundle counts once": {
			steps: []step{{0, [][]*x509.Certificate{{ca1, ca1}, {ca2}}}, {time.Second, [][]*x509.Certificate{{ca1, ca1}, {ca1}}}},
			want:  map[string]time.Duration{"ca1": time.Second},
		},
		"the clock goes back": {
			steps: []step{
				{0, [][]*x509.Certificate{{ca1}}},
				{time.Hour, [][]*x509.Certificate{{ca1, ca2}}},
				{time.Minute, [][]*x509.Certificate{{ca1, ca2}}},
			},
			want: map[string]time.Duration{"ca1": before, "ca2": time.Minute},
		},
		"no bundle": {
			steps: []step{{0, [][]*x509.Certificate{{ca1}}}, {time.Second, nil}},
			want:  map[string]time.Duration{},
		},
		"a bundle that holds nothing": {
			steps: []step{{0, [][]*x509.Certificate{{ca1}, nil}}},
			want:  map[string]time.Duration{},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var r roots
			for _, s := range tc.steps {
				r.observe(t0.Add(s.at), s.bundles)
			}
			got := map[string]time.Duration{}
			for k, s := range r.seen {
				got[names[k]] = s.since.Sub(t0)
				if s.since.IsZero() {
					got[names[k]] = before
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("recorded since (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRootsSettledAt(t *testing.T) {
	ca1, ca2 := newTestCA(t, "ca1"), newTestCA(t, "ca2")
	// ca1again: ca1's key and subject in another certificate, as a CA re-issued with its key kept;
	// it verifies ca1's certificates too.
	tmpl := *ca1.Cert
	tmpl.SerialNumber = tmpl.SerialNumber.Add(tmpl.SerialNumber, tmpl.SerialNumber)
	der, err := x509.CreateCertificate(bytes.NewReader(make([]byte, 1024)), &tmpl, &tmpl, ca1.Key.Public(), ca1.Key)
	if err != nil {
		t.Fatal(err)
	}
	ca1again, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	_, _, leaf1 := issue(t, ca1)
	_, _, leaf2 := issue(t, ca2)
	const settle = 2 * time.Second
	tests := map[string]struct {
		seen map[*x509.Certificate]time.Duration
		leaf *tls.Certificate
		now  time.Duration
		// want is the time since t0, never for zero, before for settle after the zero time.
		want time.Duration
	}{
		"its CA seen at 3s":                     {seen: map[*x509.Certificate]time.Duration{ca1.Cert: 3 * time.Second}, leaf: leaf1, now: 4 * time.Second, want: 5 * time.Second},
		"its CA seen long ago":                  {seen: map[*x509.Certificate]time.Duration{ca1.Cert: 0, ca2.Cert: 10 * time.Second}, leaf: leaf1, now: time.Minute, want: settle},
		"its CA not seen":                       {seen: map[*x509.Certificate]time.Duration{ca1.Cert: 0}, leaf: leaf2, now: time.Minute, want: never},
		"two CAs verify it: the one seen first": {seen: map[*x509.Certificate]time.Duration{ca1.Cert: 5 * time.Second, ca1again: time.Second}, leaf: leaf1, now: 6 * time.Second, want: 3 * time.Second},
		"expired":                               {seen: map[*x509.Certificate]time.Duration{ca1.Cert: 0}, leaf: leaf1, now: 25 * time.Hour, want: never},
		"its CA held from before":               {seen: map[*x509.Certificate]time.Duration{ca1.Cert: before}, leaf: leaf1, now: 0, want: before},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := roots{seen: map[string]seenRoot{}}
			for c, at := range tc.seen {
				since := t0.Add(at)
				if at == before {
					since = time.Time{}
				}
				r.seen[string(c.Raw)] = seenRoot{cert: c, since: since}
			}
			got := r.settledAt(t0.Add(tc.now), tc.leaf.Leaf, settle)
			want := time.Time{}
			switch {
			case tc.want == before:
				want = want.Add(settle)
			case tc.want != never:
				want = t0.Add(tc.want)
			}
			if !got.Equal(want) {
				t.Errorf("settledAt %v, want %v", got, want)
			}
		})
	}
}

// TestNewCANeverServedUntrusted runs two replicas of the Secret mode (cert-manager's) through a
// renewal of the CA and of the serving certificate signed by it, written at the same instant as the
// caBundle that trusts the new CA (cert-manager's cainjector merges it in when the Secret changes),
// while the API server sees every caBundle `lag` after it was written and the replicas see it at
// once. Every 100 ms it checks that each replica serves a certificate the API server's caBundle
// trusts then. Then the serving certificate is renewed from the same CA.
func TestNewCANeverServedUntrusted(t *testing.T) {
	tests := map[string]struct {
		lag, settle time.Duration
		// replace: the cainjector replaces the caBundle with the new CA (cert-manager before v1.19,
		// or CAInjectorMerging off) instead of merging it in.
		replace bool
		// sameCA: the CA is not renewed; the bundle never changes.
		sameCA bool
		// wantUntrusted: a replica serves a certificate the API server does not trust, at times.
		wantUntrusted bool
	}{
		"the API server in step":                              {settle: settleTime},
		"the API server 1.5s behind":                          {lag: 1500 * time.Millisecond, settle: settleTime},
		"the API server 1.5s behind, no settling (before)":    {lag: 1500 * time.Millisecond, wantUntrusted: true},
		"a cainjector that replaces the bundle, 0.5s behind":  {lag: 500 * time.Millisecond, settle: settleTime, replace: true, wantUntrusted: true},
		"the API server 1.9s behind, a merging cainjector":    {lag: 1900 * time.Millisecond, settle: settleTime},
		"the API server 3s behind, longer than the settling":  {lag: 3 * time.Second, settle: settleTime, wantUntrusted: true},
		"the API server 0.5s behind, a bundle never changing": {lag: 500 * time.Millisecond, settle: settleTime, sameCA: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			clk := testingclock.NewFakeClock(t0)
			api := newAPIServer()
			ca1, ca2 := newTestCA(t, "ca1"), newTestCA(t, "ca2")
			secretKey := types.NamespacedName{Namespace: "olmv1-system", Name: certs.DefaultCertSecret}
			type written struct {
				at     time.Time
				bundle []byte
			}
			// history: the caBundles as written; the first was written long before.
			var history []written
			setBundle := func(bundle []byte) {
				for _, wc := range configurations() {
					if err := api.Get(ctx, types.NamespacedName{Name: DefaultWebhookConfiguration}, wc.obj); err != nil {
						t.Fatal(err)
					}
					orig := wc.obj.DeepCopyObject().(client.Object)
					for _, h := range wc.webhooks() {
						h.config.CABundle = bundle
					}
					if err := api.Patch(ctx, wc.obj, client.MergeFrom(orig)); err != nil {
						t.Fatal(err)
					}
				}
				at := clk.Now()
				if len(history) == 0 {
					at = time.Time{}
				}
				history = append(history, written{at, bundle})
			}
			setSecret := func(ca *certs.CA) *tls.Certificate {
				certPEM, keyPEM, pair := issue(t, ca)
				data := map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM, "ca.crt": ca.PEM}
				sec := &corev1.Secret{}
				if err := api.Get(ctx, secretKey, sec); err != nil {
					sec = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: secretKey.Namespace, Name: secretKey.Name}, Data: data}
					if err := api.Create(ctx, sec); err != nil {
						t.Fatal(err)
					}
					return pair
				}
				orig := sec.DeepCopy()
				sec.Data = data
				if err := api.Patch(ctx, sec, client.MergeFrom(orig)); err != nil {
					t.Fatal(err)
				}
				return pair
			}
			// apiView is the caBundle the API server holds at now.
			apiView := func(now time.Time) []byte {
				var b []byte
				for _, w := range history {
					if !w.at.After(now.Add(-tc.lag)) {
						b = w.bundle
					}
				}
				return b
			}
			o := Options{Source: certs.SourceSecret, Namespace: secretKey.Namespace, SecretName: secretKey.Name, WebhookConfiguration: DefaultWebhookConfiguration, Clock: clk}
			var replicas []*SecretSource
			var loops []*simLoop
			for range 2 {
				srv := New(o, NewMetrics())
				*srv.env = env{log: logr.Discard(), cached: api, api: api, cl: api, rec: &events.FakeRecorder{}}
				s := srv.src.(*SecretSource)
				s.settle = tc.settle
				replicas = append(replicas, s)
				loops = append(loops, &simLoop{sync: s.sync, due: t0, early: t0})
			}
			// Installed long ago: the first CA's bundle and certificate.
			setBundle(ca1.PEM)
			setSecret(ca1)
			next := ca2
			if tc.sameCA {
				next = ca1
			}
			var renewed, again *tls.Certificate
			script := map[time.Duration]func(){
				// cert-manager renews the CA, then the serving certificate (it does not re-issue one
				// on a new CA by itself); the cainjector writes the bundle at the same instant.
				10 * time.Second: func() {
					renewed = setSecret(next)
					switch {
					case tc.sameCA:
					case tc.replace:
						setBundle(ca2.PEM)
					default:
						setBundle(append(bytes.Clone(ca1.PEM), ca2.PEM...))
					}
				},
				// The next renewal of the serving certificate, from the same CA.
				30 * time.Second: func() { again = setSecret(next) },
			}
			const step = 100 * time.Millisecond
			untrusted := 0
			served := map[string]time.Duration{}
			for elapsed := time.Duration(0); elapsed <= 50*time.Second; elapsed += step {
				now := clk.Now()
				writes := api.writes
				if f := script[elapsed]; f != nil {
					f()
				}
				for _, l := range loops {
					if l.poked && !now.Before(l.early) || !now.Before(l.due) {
						l.poked = false
						next, err := l.sync(ctx)
						l.due, l.early = l.sched.after(now, next, err)
					}
				}
				if api.writes != writes {
					for _, l := range loops {
						l.poked = true
					}
				}
				for i, s := range replicas {
					s.mu.Lock()
					cur := s.current
					s.mu.Unlock()
					if cur == nil {
						t.Fatalf("replica %d serves nothing at %s", i, elapsed)
					}
					if _, ok := served[fmt.Sprint(i, cur.Leaf.SerialNumber)]; !ok {
						served[fmt.Sprint(i, cur.Leaf.SerialNumber)] = elapsed
					}
					if err := certs.VerifyBundle(cur.Leaf, apiView(now), now); err != nil {
						untrusted++
						if !tc.wantUntrusted {
							t.Errorf("at %s replica %d serves serial %s, which the API server's caBundle does not trust", elapsed, i, cur.Leaf.SerialNumber.Text(16))
						}
					}
				}
				clk.Step(step)
			}
			if tc.wantUntrusted && untrusted == 0 {
				t.Errorf("every certificate served was trusted; want some not (the case shows what the settling prevents)")
			}
			for i := range replicas {
				for _, w := range []struct {
					what string
					c    *tls.Certificate
				}{{"the renewed certificate", renewed}, {"the next renewal", again}} {
					what := w.what
					at, ok := served[fmt.Sprint(i, w.c.Leaf.SerialNumber)]
					if !ok {
						t.Errorf("replica %d never served %s", i, what)
						continue
					}
					t.Logf("replica %d served %s at %s", i, what, at)
				}
			}
			if !tc.wantUntrusted && untrusted > 0 {
				t.Logf("%d checks of 100 ms found an untrusted certificate", untrusted)
			}
		})
	}
}
