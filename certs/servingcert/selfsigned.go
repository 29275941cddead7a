package servingcert

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/cos-externalizer/cos-externalizer/certs"
)

// caCommonName is the self-signed CA's subject.
const caCommonName = "cos-externalizer-webhook-ca"

// SelfSignedSource serves a certificate this replica issues, in memory, from the CA in a Secret,
// renewed by leaf's policy. The CA is the elected leader's: Authority keeps it current and injects
// it into the webhook configurations. Only its first creation is any replica's (bootstrap): the
// leader may be a replica of another mode that never makes one.
type SelfSignedSource struct {
	*served
	ca   types.NamespacedName
	leaf certs.LeafPolicy
	auth *authority
}

var _ CertificateSource = &SelfSignedSource{}

// newSelfSignedSource returns the source of certificates issued from the CA in the Secret ca, kept
// by policy and injected into webhookConfiguration.
func newSelfSignedSource(e *env, m *Metrics, clk clock.Clock, ca types.NamespacedName, webhookConfiguration string, policy certs.CAPolicy, leaf certs.LeafPolicy) *SelfSignedSource {
	return &SelfSignedSource{
		served: newServed(certs.SourceSelfSigned, e, m, clk, webhookConfiguration),
		ca:     ca, leaf: leaf,
		auth: &authority{env: e, clock: clk, secret: ca, policy: policy, webhookConfiguration: webhookConfiguration, poke: make(chan struct{}, 1)},
	}
}

// Start keeps this replica's certificate current until ctx ends.
func (s *SelfSignedSource) Start(ctx context.Context) error {
	return s.run(ctx, s.sync)
}

// Authority keeps the CA Secret and the injected CA bundle current; only the leader runs it.
func (s *SelfSignedSource) Authority() manager.Runnable {
	return &runnable{run: s.auth.start, leader: true}
}

// sync issues a certificate when the one served or pending needs renewal, and offers it.
func (s *SelfSignedSource) sync(ctx context.Context) (time.Time, error) {
	s.refresh(ctx)
	sec, err := s.env.cachedSecret(ctx, s.ca)
	if err != nil {
		return time.Time{}, err
	}
	if sec == nil {
		// No CA yet. The leader makes it, unless the leader is a replica of another mode, as while a
		// rolling update switches an install from cert-manager to self-signed: its replicas keep the
		// Lease until the new ones are ready, which they never are without a CA. So any replica
		// creates the first CA (the API server lets one create win; the others read it).
		if err := s.auth.bootstrap(ctx); err != nil {
			return time.Time{}, err
		}
		return time.Time{}, nil // the CA Secret's event wakes this loop
	}
	auth, err := certs.ParseAuthority(sec.Data)
	if err != nil {
		s.env.log.Info("waiting for the leader to repair the CA Secret", "secret", s.ca.String(), "reason", err.Error())
		return time.Time{}, nil
	}
	now := s.clock.Now()
	base := s.latest()
	var leaf *x509.Certificate
	if base != nil {
		leaf = base.Leaf
	}
	var settled time.Time
	if renew, why := s.leaf.NeedsRenewal(now, leaf, auth.Signing); renew {
		pair, err := s.leaf.Issue(now, auth.Signing)
		if err != nil {
			return time.Time{}, fmt.Errorf("issuing a serving certificate: %w", err)
		}
		base = pair
		settled = s.offer(ctx, pair, why)
	} else {
		settled = s.offer(ctx, base, "the webhook configurations trust it")
	}
	return earliestOf(s.leaf.RenewAt(base.Leaf, auth.Signing), settled), nil
}

// earliestOf is the earlier of two times, zero meaning none.
func earliestOf(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// authority keeps the CA Secret and the CA bundle injected into the webhook configurations current,
// by policy. Its decisions are made on fresh reads of the API server, never on the cache.
type authority struct {
	env                  *env
	clock                clock.Clock
	secret               types.NamespacedName
	policy               certs.CAPolicy
	webhookConfiguration string
	poke                 chan struct{}
}

func (a *authority) start(ctx context.Context) error {
	if err := a.env.watchAll(ctx, a.poke, a.webhookConfiguration); err != nil {
		return err
	}
	return loop(ctx, a.env.log.WithName("authority"), a.clock, a.poke, a.sync)
}

// bootstrap creates the first CA Secret and injects its bundle (with what is injected now, as for a
// lost CA) when a fresh read finds none. Everything after that (renewal, rotation, repair) stays the
// leader's.
func (a *authority) bootstrap(ctx context.Context) error {
	var sec corev1.Secret
	err := a.env.api.Get(ctx, a.secret, &sec)
	if err == nil || !apierrors.IsNotFound(err) {
		return err // it exists (the cache is behind) or cannot be read
	}
	a.env.log.Info("no CA Secret: creating the first CA", "secret", a.secret.String())
	_, err = a.sync(ctx)
	return err
}

func (a *authority) sync(ctx context.Context) (time.Time, error) {
	key := a.secret
	var sec corev1.Secret
	exists := true
	if err := a.env.api.Get(ctx, key, &sec); err != nil {
		if !apierrors.IsNotFound(err) {
			return time.Time{}, fmt.Errorf("reading the CA Secret %s: %w", key, err)
		}
		exists = false
	}
	var cur *certs.Authority
	if exists {
		var err error
		if cur, err = certs.ParseAuthority(sec.Data); err != nil {
			a.env.rec.Eventf(&sec, nil, corev1.EventTypeWarning, EventCAInvalid, "Rotate", "the CA Secret is not a usable authority (%v); a new CA replaces it", err)
		}
	}
	bundles, err := readBundles(ctx, a.env.api, a.webhookConfiguration)
	if err != nil {
		return time.Time{}, err
	}
	now := a.clock.Now()
	next, reason, err := a.policy.Plan(now, cur, trustedByAll(bundles))
	if err != nil {
		return time.Time{}, err
	}
	if next != nil && cur == nil {
		// A lost CA Secret: keep trusting what the API server trusts now (certs.Authority.Adopt).
		var injected [][]byte
		for _, b := range bundles {
			injected = append(injected, b.caBundle)
		}
		next.Adopt(now, injected)
	}
	if next != nil {
		data, err := next.Data()
		if err != nil {
			return time.Time{}, err
		}
		if written, err := a.write(ctx, &sec, exists, data); !written || err != nil {
			return time.Time{}, err
		}
		a.env.rec.Eventf(&sec, nil, corev1.EventTypeNormal, EventCARotated, "Rotate", "%s", reason)
		a.env.log.Info("CA Secret updated", "secret", key.String(), "reason", reason, "signingNotAfter", next.Signing.Cert.NotAfter.UTC(), "trusted", len(next.Trusted))
		cur = next
	}
	injected, err := a.inject(ctx, cur.Bundle())
	if err != nil {
		return time.Time{}, err
	}
	if injected {
		a.env.rec.Eventf(&sec, nil, corev1.EventTypeNormal, EventCAInjected, "Inject", "injected a CA bundle of %d certificates into the webhook configurations %s", len(cur.Trusted), a.webhookConfiguration)
		a.env.log.Info("CA bundle injected", "webhookConfiguration", a.webhookConfiguration, "certificates", len(cur.Trusted))
	}
	return a.policy.NextCheck(now, cur), nil
}

// trustedByAll reports whether every webhook's caBundle of bundles holds a certificate.
func trustedByAll(bundles []webhookBundle) func(*x509.Certificate) bool {
	return func(c *x509.Certificate) bool {
		for _, b := range bundles {
			roots, err := certs.ParseCerts(b.caBundle)
			if err != nil {
				return false
			}
			found := false
			for _, r := range roots {
				found = found || r.Equal(c)
			}
			if !found {
				return false
			}
		}
		return true
	}
}

// write stores data in the CA Secret: it creates sec when it does not exist, else patches the sec
// read, guarded by its resourceVersion. It reports false, without an error, when another leader
// created the Secret first (its event wakes us).
func (a *authority) write(ctx context.Context, sec *corev1.Secret, exists bool, data map[string][]byte) (bool, error) {
	key := a.secret
	if exists {
		orig := sec.DeepCopy()
		sec.Data = data
		if err := a.env.cl.Patch(ctx, sec, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return false, fmt.Errorf("updating the CA Secret %s: %w", key, err)
		}
		return true, nil
	}
	*sec = corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace, Labels: map[string]string{"app.kubernetes.io/name": "cos-externalizer"}},
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
	}
	if err := a.env.cl.Create(ctx, sec); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return false, nil
		}
		return false, fmt.Errorf("creating the CA Secret %s: %w", key, err)
	}
	return true, nil
}

// inject sets every webhook's caBundle of the two configurations to bundle; it reports whether it
// changed anything. Patches carry the read resourceVersion, so a concurrent change is retried.
func (a *authority) inject(ctx context.Context, bundle []byte) (bool, error) {
	changed := false
	for _, wc := range configurations() {
		if err := a.env.api.Get(ctx, types.NamespacedName{Name: a.webhookConfiguration}, wc.obj); err != nil {
			return changed, fmt.Errorf("reading %s %s: %w", wc.kind, a.webhookConfiguration, err)
		}
		orig := wc.obj.DeepCopyObject().(client.Object)
		dirty := false
		for _, h := range wc.webhooks() {
			if !bytes.Equal(h.config.CABundle, bundle) {
				h.config.CABundle, dirty = bundle, true
			}
		}
		if !dirty {
			continue
		}
		if err := a.env.cl.Patch(ctx, wc.obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return changed, fmt.Errorf("injecting the CA bundle into %s %s: %w", wc.kind, a.webhookConfiguration, err)
		}
		changed = true
	}
	return changed, nil
}
