package servingcert

import (
	"crypto/x509"
	"time"
)

// settleTime is how long every webhook's caBundle must have held a CA, as a replica saw it, before
// the replica switches from a certificate the bundle trusts to one of that CA. The API server sees a
// changed caBundle a moment after the write (each API server through its own watch), and a replica
// that switched the moment its own watch showed the change could present a certificate the API
// server does not trust yet: cert-manager's cainjector merges a renewed CA into the bundle at the
// moment the certificate it signed is written, and the self-signed mode's new CA signs at once when
// its CA Secret is lost. A replica observes a bundle at a sync, never before the write, so the API
// server has had at least settleTime.
const settleTime = 2 * time.Second

// roots records since when every webhook's caBundle has held each certificate, as this replica saw
// it. Pure: plain inputs and times.
type roots struct {
	seen     map[string]seenRoot
	observed bool
}

type seenRoot struct {
	cert *x509.Certificate
	// since is zero for a certificate of the first observation: held from before it.
	since time.Time
}

// observe records the bundles seen at now: a certificate every bundle holds keeps the time it was
// first seen in all of them, one that any bundle lacks is forgotten (so it settles again when it
// returns), and a time after now (the clock went back) becomes now. No bundle forgets everything.
// The certificates of the first observation count as held from before: a replica serves its first
// certificate without waiting, so it need not wait for the next one of the same CAs.
func (r *roots) observe(now time.Time, bundles [][]*x509.Certificate) {
	first := !r.observed
	r.observed = true
	count := map[string]int{}
	certs := map[string]*x509.Certificate{}
	for _, b := range bundles {
		inBundle := map[string]bool{}
		for _, c := range b {
			if k := string(c.Raw); !inBundle[k] {
				inBundle[k] = true
				count[k]++
				certs[k] = c
			}
		}
	}
	next := map[string]seenRoot{}
	for k, n := range count {
		if n != len(bundles) {
			continue
		}
		s, ok := r.seen[k]
		switch {
		case first:
			s = seenRoot{cert: certs[k]}
		case !ok || s.since.After(now):
			s = seenRoot{cert: certs[k], since: now}
		}
		next[k] = s
	}
	r.seen = next
}

// settledAt is when leaf chains, at now, to a certificate every bundle has held for settle: the
// earliest such time among the certificates that verify it (at or before now: already; for one held
// from before the first observation, settle after the zero time). Zero when none verifies it.
func (r *roots) settledAt(now time.Time, leaf *x509.Certificate, settle time.Duration) time.Time {
	var best time.Time
	for _, s := range r.seen {
		pool := x509.NewCertPool()
		pool.AddCert(s.cert)
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
			continue
		}
		if at := s.since.Add(settle); best.IsZero() || at.Before(best) {
			best = at
		}
	}
	return best
}
