package servingcert

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cos-externalizer/cos-externalizer/certs"
)

// The rules the loops need. The webhook configurations are read (and, in the self-signed mode,
// patched; see config/rbac/ca-injector) by name only.
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,resourceNames=cos-externalizer,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=olmv1-system,resources=secrets,verbs=get;list;watch;create;patch

// caCommonName is the self-signed CA's subject.
const caCommonName = "cos-externalizer-webhook-ca"

func (s *Server) secretKey() types.NamespacedName {
	return types.NamespacedName{Namespace: s.opts.Namespace, Name: s.opts.SecretName}
}

// watchAll wakes ch on changes of the Secret and of the webhook configurations.
func (s *Server) watchAll(ctx context.Context, ch chan struct{}) error {
	objs := []client.Object{&corev1.Secret{}}
	if s.opts.WebhookConfiguration != "" {
		objs = append(objs, &admissionregistrationv1.MutatingWebhookConfiguration{}, &admissionregistrationv1.ValidatingWebhookConfiguration{})
	}
	for _, o := range objs {
		if err := s.watch(ctx, o, ch); err != nil {
			return fmt.Errorf("watching %T: %w", o, err)
		}
	}
	if !s.cache.WaitForCacheSync(ctx) {
		return ctx.Err()
	}
	return nil
}

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

// runReplica keeps this replica's certificate current; every replica runs it.
func (s *Server) runReplica(ctx context.Context) error {
	if err := s.watchAll(ctx, s.poke); err != nil {
		return err
	}
	return loop(ctx, s.log, s.clock, s.poke, s.syncReplica)
}

func (s *Server) syncReplica(ctx context.Context) (time.Time, error) {
	if s.opts.WebhookConfiguration != "" {
		// Every sync records what the configurations trust (offer reads them only on a change).
		if _, err := s.observe(ctx); err != nil {
			s.log.V(1).Info("the webhook configurations cannot be read yet", "reason", err.Error())
		}
	}
	var sec corev1.Secret
	if err := s.cached.Get(ctx, s.secretKey(), &sec); err != nil {
		if apierrors.IsNotFound(err) {
			s.log.Info("waiting for the Secret of the serving certificate", "secret", s.secretKey().String())
			return time.Time{}, nil
		}
		return time.Time{}, err
	}
	now := s.clock.Now()
	switch s.opts.Source {
	case SourceSecret:
		pair, err := certs.KeyPair(sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey])
		if err != nil {
			return time.Time{}, fmt.Errorf("Secret %s: %s/%s: %w", s.secretKey(), corev1.TLSCertKey, corev1.TLSPrivateKeyKey, err)
		}
		return s.offer(ctx, pair, "the Secret holds a new certificate"), nil
	default:
		auth, err := certs.ParseAuthority(sec.Data)
		if err != nil {
			s.log.Info("waiting for the leader to repair the CA Secret", "secret", s.secretKey().String(), "reason", err.Error())
			return time.Time{}, nil
		}
		lp := certs.LeafPolicy{Hosts: s.opts.Hosts, Lifetime: s.opts.CertLifetime}
		s.mu.Lock()
		base := s.pending
		if base == nil {
			base = s.current
		}
		s.mu.Unlock()
		var leaf *x509.Certificate
		if base != nil {
			leaf = base.Leaf
		}
		var settled time.Time
		if renew, why := lp.NeedsRenewal(now, leaf, auth.Signing); renew {
			pair, err := lp.Issue(now, auth.Signing)
			if err != nil {
				return time.Time{}, fmt.Errorf("issuing a serving certificate: %w", err)
			}
			base = pair
			settled = s.offer(ctx, pair, why)
		} else {
			settled = s.offer(ctx, base, "the webhook configurations trust it")
		}
		return earliestOf(lp.RenewAt(base.Leaf, auth.Signing), settled), nil
	}
}

// earliestOf is the earlier of two times, zero meaning none.
func earliestOf(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// runAuthority keeps the CA Secret and the injected CA bundle current; only the leader runs it.
func (s *Server) runAuthority(ctx context.Context) error {
	if err := s.watchAll(ctx, s.pokeCA); err != nil {
		return err
	}
	return loop(ctx, s.log.WithName("authority"), s.clock, s.pokeCA, s.syncAuthority)
}

func (s *Server) syncAuthority(ctx context.Context) (time.Time, error) {
	policy := certs.CAPolicy{CommonName: caCommonName, Lifetime: s.opts.CALifetime}
	key := s.secretKey()
	// Decisions are made on fresh reads, never on the cache.
	var sec corev1.Secret
	exists := true
	if err := s.api.Get(ctx, key, &sec); err != nil {
		if !apierrors.IsNotFound(err) {
			return time.Time{}, fmt.Errorf("reading the CA Secret %s: %w", key, err)
		}
		exists = false
	}
	var cur *certs.Authority
	if exists {
		var err error
		if cur, err = certs.ParseAuthority(sec.Data); err != nil {
			s.rec.Eventf(&sec, nil, corev1.EventTypeWarning, EventCAInvalid, "Rotate", "the CA Secret is not a usable authority (%v); a new CA replaces it", err)
		}
	}
	bundles, err := s.bundles(ctx, s.api)
	if err != nil {
		return time.Time{}, err
	}
	trusted := func(c *x509.Certificate) bool {
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
	now := s.clock.Now()
	next, reason, err := policy.Plan(now, cur, trusted)
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
		if !exists {
			sec = corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace, Labels: map[string]string{"app.kubernetes.io/name": "cos-externalizer"}},
				Type:       corev1.SecretTypeOpaque,
				Data:       data,
			}
			if err := s.cl.Create(ctx, &sec); err != nil {
				if apierrors.IsAlreadyExists(err) {
					return time.Time{}, nil // another leader's; its event wakes us
				}
				return time.Time{}, fmt.Errorf("creating the CA Secret %s: %w", key, err)
			}
		} else {
			orig := sec.DeepCopy()
			sec.Data = data
			if err := s.cl.Patch(ctx, &sec, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
				return time.Time{}, fmt.Errorf("updating the CA Secret %s: %w", key, err)
			}
		}
		s.rec.Eventf(&sec, nil, corev1.EventTypeNormal, EventCARotated, "Rotate", "%s", reason)
		s.log.Info("CA Secret updated", "secret", key.String(), "reason", reason, "signingNotAfter", next.Signing.Cert.NotAfter.UTC(), "trusted", len(next.Trusted))
		cur = next
	}
	injected, err := s.inject(ctx, cur.Bundle())
	if err != nil {
		return time.Time{}, err
	}
	if injected {
		s.rec.Eventf(&sec, nil, corev1.EventTypeNormal, EventCAInjected, "Inject", "injected a CA bundle of %d certificates into the webhook configurations %s", len(cur.Trusted), s.opts.WebhookConfiguration)
		s.log.Info("CA bundle injected", "webhookConfiguration", s.opts.WebhookConfiguration, "certificates", len(cur.Trusted))
	}
	return policy.NextCheck(now, cur), nil
}

// inject sets every webhook's caBundle of the two configurations to bundle; it reports whether it
// changed anything. Patches carry the read resourceVersion, so a concurrent change is retried.
func (s *Server) inject(ctx context.Context, bundle []byte) (bool, error) {
	changed := false
	for _, wc := range s.configurations() {
		if err := s.api.Get(ctx, types.NamespacedName{Name: s.opts.WebhookConfiguration}, wc.obj); err != nil {
			return changed, fmt.Errorf("reading %s %s: %w", wc.kind, s.opts.WebhookConfiguration, err)
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
		if err := s.cl.Patch(ctx, wc.obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return changed, fmt.Errorf("injecting the CA bundle into %s %s: %w", wc.kind, s.opts.WebhookConfiguration, err)
		}
		changed = true
	}
	return changed, nil
}
