package certs

import (
	"crypto/x509"
	"fmt"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)

func mustCA(t *testing.T, now time.Time, lifetime time.Duration) *CA {
	t.Helper()
	ca, err := NewCA("test-ca", lifetime, now)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func TestCAPolicyPlan(t *testing.T) {
	const life = 90 * time.Minute
	p := CAPolicy{CommonName: "test-ca", Lifetime: life}
	old := mustCA(t, t0.Add(-life/2-time.Minute), life) // 44 minutes left
	cur := mustCA(t, t0, life)                          // 90 minutes left
	staged := mustCA(t, t0, life)
	expired := mustCA(t, t0.Add(-2*life), life)
	always := func(*x509.Certificate) bool { return true }
	never := func(*x509.Certificate) bool { return false }
	tests := map[string]struct {
		now        time.Time
		cur        *Authority
		trusted    func(*x509.Certificate) bool
		wantReason string // "" means no change
		check      func(t *testing.T, got *Authority)
	}{
		"no authority: a CA is created and trusted": {
			now: t0, cur: nil, trusted: never, wantReason: "created a CA",
			check: func(t *testing.T, got *Authority) {
				if got.Next != nil || len(got.Trusted) != 1 || !got.Trusted[0].Equal(got.Signing.Cert) {
					t.Errorf("got signing %v, next %v, %d trusted", got.Signing != nil, got.Next != nil, len(got.Trusted))
				}
			},
		},
		"fresh CA: nothing to do": {
			now: t0, cur: &Authority{Signing: cur, Trusted: []*x509.Certificate{cur.Cert}}, trusted: always,
		},
		"half of the lifetime left: the successor is staged and trusted, the old CA still signs": {
			now: t0, cur: &Authority{Signing: old, Trusted: []*x509.Certificate{old.Cert}}, trusted: never, wantReason: "staged the next CA",
			check: func(t *testing.T, got *Authority) {
				if got.Signing != old || got.Next == nil || len(got.Trusted) != 2 || !got.Trusted[1].Equal(got.Next.Cert) {
					t.Errorf("want old signing, staged next, both trusted; got %d trusted", len(got.Trusted))
				}
			},
		},
		"a third left but the successor not yet trusted everywhere: no promotion": {
			now: t0.Add(15 * time.Minute), cur: &Authority{Signing: old, Next: staged, Trusted: []*x509.Certificate{old.Cert, staged.Cert}}, trusted: never,
		},
		"a third left and the successor trusted: it signs, the old CA stays trusted": {
			now: t0.Add(15 * time.Minute), cur: &Authority{Signing: old, Next: staged, Trusted: []*x509.Certificate{old.Cert, staged.Cert}}, trusted: always,
			wantReason: "the staged CA signs from now on",
			check: func(t *testing.T, got *Authority) {
				if got.Signing != staged || got.Next != nil || len(got.Trusted) != 2 {
					t.Errorf("want staged signing and both trusted, got %d trusted", len(got.Trusted))
				}
			},
		},
		"the signing CA expired with a successor staged: it signs even if not seen trusted": {
			now: t0.Add(45 * time.Minute), cur: &Authority{Signing: old, Next: staged, Trusted: []*x509.Certificate{old.Cert, staged.Cert}}, trusted: never,
			wantReason: "the staged CA signs from now on",
			check: func(t *testing.T, got *Authority) {
				if got.Signing != staged || len(got.Trusted) != 1 || !got.Trusted[0].Equal(staged.Cert) {
					t.Errorf("want staged signing and only it trusted, got %d trusted", len(got.Trusted))
				}
			},
		},
		"the signing CA expired, nothing staged: a new CA": {
			now: t0, cur: &Authority{Signing: expired, Trusted: []*x509.Certificate{expired.Cert}}, trusted: never,
			wantReason: "replaced the expired signing CA",
			check: func(t *testing.T, got *Authority) {
				if got.Signing == expired || len(got.Trusted) != 1 || !got.Trusted[0].Equal(got.Signing.Cert) {
					t.Errorf("want a new signing CA alone in the bundle")
				}
			},
		},
		"an expired predecessor leaves the bundle": {
			now: t0, cur: &Authority{Signing: cur, Trusted: []*x509.Certificate{expired.Cert, cur.Cert}}, trusted: always,
			wantReason: "updated the CA bundle",
			check: func(t *testing.T, got *Authority) {
				if len(got.Trusted) != 1 || !got.Trusted[0].Equal(cur.Cert) {
					t.Errorf("want only the current CA trusted, got %d", len(got.Trusted))
				}
			},
		},
		"a signing CA missing from the bundle is added": {
			now: t0, cur: &Authority{Signing: cur}, trusted: always, wantReason: "updated the CA bundle",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, reason, err := p.Plan(tc.now, tc.cur, tc.trusted)
			if err != nil {
				t.Fatal(err)
			}
			if reason != tc.wantReason {
				t.Fatalf("reason = %q, want %q", reason, tc.wantReason)
			}
			if (got == nil) != (tc.wantReason == "") {
				t.Fatalf("got authority %v for reason %q", got != nil, reason)
			}
			if tc.check != nil {
				tc.check(t, got)
			}
		})
	}
}

// TestRotationNeverServesUntrusted runs the CA and serving-certificate policies over three CA lifetimes
// with second-long steps, as the self-signed mode runs them: the leader plans the CA Secret and injects
// its bundle, which the API server sees only after a lag; replicas issue their own serving
// certificates from the signing CA they read. At every step, every served certificate must verify
// against the bundle the API server holds.
func TestRotationNeverServesUntrusted(t *testing.T) {
	const (
		caLife   = 60 * time.Second
		leafLife = 20 * time.Second
		apiLag   = 2 * time.Second // from a caBundle write until the API server uses it
	)
	cp := CAPolicy{CommonName: "test-ca", Lifetime: caLife}
	lp := LeafPolicy{Hosts: []string{"127.0.0.1"}, Lifetime: leafLife}
	type injection struct {
		at     time.Time
		bundle []byte
	}
	var (
		auth       *Authority
		injections []injection
		leaves     = make([]*x509.Certificate, 2) // two replicas
		caRotated  int
	)
	apiBundle := func(now time.Time) []byte { // what the API server trusts at now
		var b []byte
		for _, in := range injections {
			if !in.at.Add(apiLag).After(now) {
				b = in.bundle
			}
		}
		return b
	}
	injected := func() []byte { // what the webhook configurations hold
		if len(injections) == 0 {
			return nil
		}
		return injections[len(injections)-1].bundle
	}
	for now := t0; now.Before(t0.Add(3 * caLife)); now = now.Add(time.Second) {
		// The leader: plan, store, inject.
		trusted := func(c *x509.Certificate) bool {
			roots, _ := ParseCerts(injected())
			for _, r := range roots {
				if r.Equal(c) {
					return true
				}
			}
			return false
		}
		next, reason, err := cp.Plan(now, auth, trusted)
		if err != nil {
			t.Fatal(err)
		}
		if next != nil {
			if auth != nil && next.Signing != auth.Signing {
				caRotated++
			}
			auth = next
			t.Logf("%s: %s", now.Sub(t0), reason)
		}
		if string(injected()) != string(auth.Bundle()) {
			injections = append(injections, injection{at: now, bundle: auth.Bundle()})
		}
		// Replicas: a new serving certificate when the policy says so.
		for i := range leaves {
			if renew, _ := lp.NeedsRenewal(now, leaves[i], auth.Signing); renew {
				pair, err := lp.Issue(now, auth.Signing)
				if err != nil {
					t.Fatal(err)
				}
				leaves[i] = pair.Leaf
			}
		}
		// Every served certificate is trusted, once the API server has a bundle at all.
		if b := apiBundle(now); b != nil {
			for i, leaf := range leaves {
				if err := VerifyBundle(leaf, b, now); err != nil {
					t.Fatalf("%s: replica %d serves a certificate the API server does not trust: %v", now.Sub(t0), i, err)
				}
			}
		}
	}
	if caRotated < 2 {
		t.Errorf("the CA rotated %d times in three lifetimes, want at least 2", caRotated)
	}
}

func TestLeafPolicy(t *testing.T) {
	ca := mustCA(t, t0, time.Hour)
	other := mustCA(t, t0, time.Hour)
	p := LeafPolicy{Hosts: []string{"svc.ns.svc", "127.0.0.1"}, Lifetime: 30 * time.Minute}
	pair, err := p.Issue(t0, ca)
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		now     time.Time
		policy  LeafPolicy
		signing *CA
		want    string
	}{
		"fresh":                             {now: t0, policy: p, signing: ca},
		"two thirds used":                   {now: t0.Add(21 * time.Minute), policy: p, signing: ca, want: "the serving certificate is near its expiry"},
		"signed by another CA":              {now: t0, policy: p, signing: other, want: "the signing CA changed"},
		"other hosts requested":             {now: t0, policy: LeafPolicy{Hosts: []string{"127.0.0.1"}, Lifetime: p.Lifetime}, signing: ca, want: "the host names changed"},
		"the same hosts, written otherwise": {now: t0, policy: LeafPolicy{Hosts: []string{"127.0.0.1", "svc.ns.svc", "::ffff:127.0.0.1"}, Lifetime: p.Lifetime}, signing: ca},
		"the clock went back":               {now: t0.Add(-2 * time.Hour), policy: p, signing: ca, want: "the serving certificate is not valid yet"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			renew, why := tc.policy.NeedsRenewal(tc.now, pair.Leaf, tc.signing)
			if renew != (tc.want != "") || why != tc.want {
				t.Errorf("NeedsRenewal = %v, %q; want %q", renew, why, tc.want)
			}
		})
	}
	// Never valid past the CA.
	short := mustCA(t, t0, 10*time.Minute)
	pair, err = p.Issue(t0, short)
	if err != nil {
		t.Fatal(err)
	}
	if pair.Leaf.NotAfter.After(short.Cert.NotAfter) {
		t.Errorf("leaf valid until %s, past its CA's %s", pair.Leaf.NotAfter, short.Cert.NotAfter)
	}
	// Cut to its CA: time alone never renews it, its CA's successor does.
	if at := p.RenewAt(pair.Leaf, short); !at.IsZero() {
		t.Errorf("a certificate that expires with its CA is due for renewal at %s", at)
	}
	if renew, why := p.NeedsRenewal(short.Cert.NotAfter.Add(-time.Second), pair.Leaf, short); renew {
		t.Errorf("a certificate that expires with its CA needs renewal a second before: %s", why)
	}
	if err := VerifyBundle(pair.Leaf, short.PEM, t0); err != nil {
		t.Errorf("VerifyBundle: %v", err)
	}
	if err := VerifyBundle(pair.Leaf, other.PEM, t0); err == nil {
		t.Error("VerifyBundle trusted a certificate of another CA")
	}
}

func TestAuthorityRoundTrip(t *testing.T) {
	a, _, err := CAPolicy{CommonName: "x", Lifetime: time.Hour}.Plan(t0, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	a.Next = mustCA(t, t0, time.Hour)
	a.Trusted = append(a.Trusted, a.Next.Cert)
	data, err := a.Data()
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseAuthority(data)
	if err != nil {
		t.Fatal(err)
	}
	if !b.Signing.Cert.Equal(a.Signing.Cert) || !b.Next.Cert.Equal(a.Next.Cert) || !sameCerts(a.Trusted, b.Trusted) {
		t.Error("the authority changed through its Secret data")
	}
	bad := map[string]map[string][]byte{
		"empty":            {},
		"key of another":   {CASecretCertKey: data[CASecretCertKey], CASecretKeyKey: data[CASecretNextKeyKey]},
		"garbage bundle":   {CASecretCertKey: data[CASecretCertKey], CASecretKeyKey: data[CASecretKeyKey], CASecretBundleKey: []byte("nope")},
		"half a successor": {CASecretCertKey: data[CASecretCertKey], CASecretKeyKey: data[CASecretKeyKey], CASecretNextCert: data[CASecretNextCert]},
	}
	for name, d := range bad {
		t.Run(name, func(t *testing.T) {
			_, err := ParseAuthority(d)
			if err == nil {
				t.Fatal("accepted")
			}
			if strings.Contains(err.Error(), "BEGIN") {
				t.Errorf("the error echoes Secret content: %v", err)
			}
		})
	}
}

func FuzzParseAuthority(f *testing.F) {
	a, _, _ := CAPolicy{CommonName: "x", Lifetime: time.Hour}.Plan(t0, nil, nil)
	data, _ := a.Data()
	f.Add(data[CASecretCertKey], data[CASecretKeyKey], data[CASecretBundleKey])
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n"), []byte{}, []byte("x"))
	f.Fuzz(func(t *testing.T, cert, key, bundle []byte) {
		got, err := ParseAuthority(map[string][]byte{CASecretCertKey: cert, CASecretKeyKey: key, CASecretBundleKey: bundle})
		if err != nil {
			return
		}
		if !got.Signing.Cert.IsCA {
			t.Fatal("accepted a signing certificate that is not a CA")
		}
		if _, err := got.Data(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestAdopt(t *testing.T) {
	old := mustCA(t, t0, time.Hour)
	other := mustCA(t, t0, time.Hour)
	expired := mustCA(t, t0.Add(-2*time.Hour), time.Hour)
	leaf := func() []byte {
		pair, err := LeafPolicy{Hosts: []string{"127.0.0.1"}, Lifetime: time.Hour}.Issue(t0, old)
		if err != nil {
			t.Fatal(err)
		}
		return EncodeCert(pair.Leaf.Raw)
	}()
	cat := func(bs ...[]byte) []byte {
		var out []byte
		for _, b := range bs {
			out = append(out, b...)
		}
		return out
	}
	tests := map[string]struct {
		injected [][]byte
		want     []*x509.Certificate // adopted, before the new CA
	}{
		"nothing injected":                      {},
		"the CA every webhook trusts":           {injected: [][]byte{old.PEM, cat(other.PEM, old.PEM)}, want: []*x509.Certificate{old.Cert}},
		"a CA only one webhook trusts is left":  {injected: [][]byte{old.PEM, other.PEM}},
		"expired CAs and non-CA certificates":   {injected: [][]byte{cat(expired.PEM, leaf, old.PEM)}, want: []*x509.Certificate{old.Cert}},
		"an unreadable bundle: nothing adopted": {injected: [][]byte{old.PEM, []byte("junk")}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a, _, err := CAPolicy{CommonName: "x", Lifetime: time.Hour}.Plan(t0, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			a.Adopt(t0, tc.injected)
			want := append(tc.want, a.Signing.Cert)
			if !sameCerts(a.Trusted, want) {
				t.Errorf("trusted %d certificates, want %d", len(a.Trusted), len(want))
			}
		})
	}
}

// TestJustIssuedNeedsNoRenewal: whatever the lifetimes, the CA's time left and the fraction of a
// second of now, a certificate Issue returns does not need renewal at now, and time alone renews it
// only later (or never, when it expires with its CA).
func TestJustIssuedNeedsNoRenewal(t *testing.T) {
	hosts := []string{"svc.ns.svc", "::FFFF:10.0.0.1", "2001:DB8::1"}
	for _, life := range []time.Duration{7 * 24 * time.Hour, 6 * time.Second, 1500 * time.Millisecond, 1} {
		for _, caLeft := range []time.Duration{365 * 24 * time.Hour, 72 * time.Hour, life, life/3 + time.Second, 1500 * time.Millisecond} {
			for _, frac := range []time.Duration{0, 300 * time.Millisecond, time.Second - 1} {
				now := t0.Add(frac)
				caNotAfter := now.Add(caLeft).Truncate(time.Second) // as a certificate stores it
				if !caNotAfter.After(now) {
					continue
				}
				ca := mustCA(t, caNotAfter.Add(-365*24*time.Hour), 365*24*time.Hour)
				p := LeafPolicy{Hosts: hosts, Lifetime: life}
				name := fmt.Sprintf("lifetime %s, CA left %s, now +%s", life, caLeft, frac)
				pair, err := p.Issue(now, ca)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if renew, why := p.NeedsRenewal(now, pair.Leaf, ca); renew {
					t.Errorf("%s: a certificate just issued needs renewal: %s", name, why)
				}
				if at := p.RenewAt(pair.Leaf, ca); !at.IsZero() && !at.After(now) {
					t.Errorf("%s: renewal due at %s, not after now %s", name, at, now)
				}
				if pair.Leaf.NotAfter.After(ca.Cert.NotAfter) {
					t.Errorf("%s: valid until %s, past its CA's %s", name, pair.Leaf.NotAfter, ca.Cert.NotAfter)
				}
			}
		}
	}
}

func FuzzJustIssuedNeedsNoRenewal(f *testing.F) {
	ca := func(t *testing.T, notAfter time.Time) *CA {
		t.Helper()
		return mustCA(t, notAfter.Add(-time.Hour), time.Hour)
	}
	f.Add(int64(7*24*time.Hour), int64(72*time.Hour), int64(999_999_999))
	f.Add(int64(time.Second), int64(time.Second), int64(1))
	f.Fuzz(func(t *testing.T, life, caLeft, frac int64) {
		if life <= 0 || caLeft <= time.Second.Nanoseconds() || life > int64(100*365*24*time.Hour) || caLeft > int64(100*365*24*time.Hour) {
			return
		}
		now := t0.Add(time.Duration(frac % int64(time.Second)))
		signing := ca(t, now.Add(time.Duration(caLeft)).Truncate(time.Second))
		p := LeafPolicy{Hosts: []string{"127.0.0.1"}, Lifetime: time.Duration(life)}
		pair, err := p.Issue(now, signing)
		if err != nil {
			t.Fatal(err)
		}
		if renew, why := p.NeedsRenewal(now, pair.Leaf, signing); renew {
			t.Fatalf("a certificate just issued needs renewal: %s", why)
		}
	})
}

// TestRenewalsBounded runs the CA and serving-certificate policies as TestRotationNeverServesUntrusted
// does, in ten-minute steps, where they used to renew at every step: a CA shorter than the
// certificates (every certificate expires with its CA), and a successor CA that never becomes
// trusted (the signing CA runs out). A replica issues once per signing CA, plus its regular renewals.
func TestRenewalsBounded(t *testing.T) {
	tests := map[string]struct {
		caLife, leafLife time.Duration
		trustSuccessor   bool
		run              time.Duration
		maxIssued        int
	}{
		"CA of 72h, certificates of 168h": {caLife: 72 * time.Hour, leafLife: 168 * time.Hour, trustSuccessor: true, run: 10 * 24 * time.Hour,
			maxIssued: 10*24/36 + 1}, // a CA signs for L/2 = 36h
		"a successor that is never trusted": {caLife: 30 * 24 * time.Hour, leafLife: 7 * 24 * time.Hour, run: 45 * 24 * time.Hour,
			maxIssued: 45*3/14 + 3}, // every 2/3 x 7 days, and once for each new signing CA
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cp := CAPolicy{CommonName: "test-ca", Lifetime: tc.caLife}
			lp := LeafPolicy{Hosts: []string{"127.0.0.1"}, Lifetime: tc.leafLife}
			var auth *Authority
			var leaf *x509.Certificate
			issued := 0
			for now := t0; now.Before(t0.Add(tc.run)); now = now.Add(10 * time.Minute) {
				trusted := func(c *x509.Certificate) bool { return tc.trustSuccessor }
				next, _, err := cp.Plan(now, auth, trusted)
				if err != nil {
					t.Fatal(err)
				}
				if next != nil {
					auth = next
				}
				if renew, _ := lp.NeedsRenewal(now, leaf, auth.Signing); renew {
					pair, err := lp.Issue(now, auth.Signing)
					if err != nil {
						t.Fatal(err)
					}
					leaf = pair.Leaf
					issued++
				}
			}
			t.Logf("%d serving certificates in %s", issued, tc.run)
			if issued > tc.maxIssued {
				t.Errorf("issued %d serving certificates in %s, want at most %d", issued, tc.run, tc.maxIssued)
			}
		})
	}
}
