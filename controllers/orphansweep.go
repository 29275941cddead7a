package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/kube/objectdata"
	"github.com/cos-externalizer/cos-externalizer/internal/secretdata"
	"github.com/cos-externalizer/cos-externalizer/internal/secretuse"
)

// +kubebuilder:rbac:groups="",namespace=olmv1-system,resources=configmaps,verbs=get;create;update

// OrphanSweeper deletes the object-data Secrets of the system namespace that nobody uses (no live
// ClusterObjectSet references them, internal/secretuse) and no existing ClusterObjectSet owns,
// once they have been seen so for GracePeriod (secretuse.Progress): Secrets whose ClusterObjectSet
// never appeared (the admission request that wrote them failed later, or a caller that is not the API
// server had them written), or was deleted with orphan propagation.
//
// No write of a Secret, by a request or anyone, restarts its grace period, and no admission write is
// what keeps content safe. Safety rests on the sweep alone: it deletes a Secret only after writing a
// quarantine copy of it (secretdata.Quarantine), and for RestoreWindow after the delete (longer than
// any request that could still store a ClusterObjectSet admitted while the Secret existed) it lists
// the live ClusterObjectSets at every sweep and creates again, byte for byte (verified by digest),
// every Secret one of them references (Restore); only a list begun after the window has passed lets a
// copy go. A leader that dies at any step leaves copies that the next one finishes, measuring the
// window again from when it first sees them.
type OrphanSweeper struct {
	// Client lists through the manager's cache and writes; APIReader reads uncached: it confirms
	// candidates with a live list of ClusterObjectSets, reads a Secret's data before it is copied,
	// lists the quarantine copies, and reads the sweep's progress. Both are required.
	Client          client.Client
	APIReader       client.Reader
	SystemNamespace string
	Interval        time.Duration
	// GracePeriod is how long a Secret must have been seen unused before it is deleted.
	GracePeriod time.Duration
	// RestoreWindow is how long a quarantine copy is kept after its Secret's delete: longer than the
	// longest request the API server can still be serving (its --request-timeout, 60 s by default).
	RestoreWindow time.Duration
	// Clock is the one clock every period is measured on; nil is the real clock.
	Clock clock.PassiveClock
	// Recorder, when set, records an Event on each ClusterObjectSet whose Secret was restored.
	Recorder events.EventRecorder
	// BeforeDelete, when set (tests), is called with the Secrets about to be deleted, after the live
	// confirmation and before the first of them is copied.
	BeforeDelete func(ctx context.Context, secrets []corev1.Secret)
	// AfterStep, when set (tests), is called after each step the sweep takes for one Secret
	// (StepCopied, StepDeleted) and before it restores one (StepRestoring); an error stops the sweep
	// there, as if the process had died (the adversarial test kills the replica between steps).
	AfterStep func(ctx context.Context, step string, secret types.NamespacedName) error
	Metrics   *Metrics

	mu       sync.Mutex
	progress secretuse.Progress
	// loaded: the progress kept in the cluster has been read (once per leadership); saved is the
	// encoding last written, at savedVersion.
	loaded       bool
	saved        string
	savedVersion string
	// quarantined is when this process first knew of each quarantine copy, by the uid of the Secret
	// it copies: the start of its RestoreWindow.
	quarantined map[types.UID]time.Time
}

// SafeGracePeriod is the shortest grace period that outlasts any admission request: the API server's
// default request timeout (60 s), within which a create that wrote a Secret is stored or fails.
const SafeGracePeriod = time.Minute

// SafeRestoreWindow is the shortest restore window that outlasts any request the API server serves
// with its default --request-timeout (60 s): a ClusterObjectSet admitted before a delete is stored
// within it.
const SafeRestoreWindow = time.Minute

// The steps of the sweep for one Secret, for AfterStep.
const (
	StepCopied    = "copied"
	StepDeleted   = "deleted"
	StepRestoring = "restoring"
)

// ProgressConfigMap is the ConfigMap of the system namespace in which the leader keeps how long each
// Secret has been seen unused (secretuse.Progress), under ProgressKey.
const (
	ProgressConfigMap = "cos-externalizer-orphan-sweep"
	ProgressKey       = "unused"
)

// Start runs the sweep every Interval until ctx ends (a manager Runnable; it runs on the leader).
func (s *OrphanSweeper) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("orphan-sweep")
	ctx = ctrl.LoggerInto(ctx, log)
	if s.GracePeriod < SafeGracePeriod {
		log.Info("the orphan grace period is shorter than the longest admission request: Secrets written for a create still in admission may be swept (and restored once it is stored)",
			"gracePeriod", s.GracePeriod.String(), "safeGracePeriod", SafeGracePeriod.String())
	}
	if s.RestoreWindow < SafeRestoreWindow {
		log.Info("the orphan restore window is shorter than the API server's default request timeout: a ClusterObjectSet stored later than that after a sweep may lose content",
			"restoreWindow", s.RestoreWindow.String(), "safeRestoreWindow", SafeRestoreWindow.String())
	}
	t := time.NewTicker(s.Interval)
	defer t.Stop()
	for {
		if n, err := s.Sweep(ctx); err != nil {
			log.Error(err, "sweeping orphaned Secrets")
		} else if n > 0 {
			log.Info("swept orphaned Secrets", "count", n)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// NeedLeaderElection makes the sweep run on the leader only.
func (s *OrphanSweeper) NeedLeaderElection() bool { return true }

// Sweep deletes the orphaned Secrets once, each after copying it, then restores the deleted Secrets
// that live ClusterObjectSets reference and lets go of the copies whose window has passed. It returns
// how many Secrets it deleted.
func (s *OrphanSweeper) Sweep(ctx context.Context) (int, error) {
	orphans, err := s.Orphans(ctx)
	if err != nil {
		return 0, err
	}
	if len(orphans) > 0 && s.BeforeDelete != nil {
		s.BeforeDelete(ctx, orphans)
	}
	n, err := s.Delete(ctx, orphans)
	return n, errors.Join(err, s.Restore(ctx))
}

// Waiting is how many object-data Secrets the sweep has seen unused and not yet deleted.
func (s *OrphanSweeper) Waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.progress.Waiting()
}

// SeenUnused reports whether the sweep has seen the Secret uid unused (its grace period is running).
func (s *OrphanSweeper) SeenUnused(uid types.UID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.progress.Seen(uid)
}

// Orphans lists the object-data Secrets that may be swept now. The cache proposes the unused ones
// (secretuse.UnusedSecrets) and Progress says which have been so for the grace period; each of those
// is confirmed against ClusterObjectSets listed live from the API server after that, so a
// ClusterObjectSet the cache has not seen yet (a ref copied a moment ago) still protects its Secrets.
func (s *OrphanSweeper) Orphans(ctx context.Context) ([]corev1.Secret, error) {
	if s.APIReader == nil {
		return nil, errors.New("the orphan sweep needs an uncached reader (APIReader)")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	secrets := &corev1.SecretList{}
	if err := s.Client.List(ctx, secrets, client.InNamespace(s.SystemNamespace), client.HasLabels{olmv1.LabelRevisionName}); err != nil {
		return nil, err
	}
	sets := &olmv1.ClusterObjectSetList{}
	if err := s.Client.List(ctx, sets); err != nil {
		return nil, err
	}
	s.loadProgress(ctx)
	unused := secretuse.UnusedSecrets(secrets.Items, sets.Items, s.SystemNamespace)
	uids := make([]types.UID, len(unused))
	byUID := make(map[types.UID]corev1.Secret, len(unused))
	for i, sec := range unused {
		uids[i] = sec.UID
		byUID[sec.UID] = sec
	}
	due := s.progress.Observe(uids, s.clock().Now(), s.GracePeriod)
	s.Metrics.OrphansWaiting.Set(float64(s.progress.Waiting()))
	if err := s.saveProgress(ctx); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "keeping the orphan sweep's progress in the cluster (a new leader would start over)",
			"configMap", klog.KRef(s.SystemNamespace, ProgressConfigMap))
	}
	candidates := make([]corev1.Secret, len(due))
	for i, uid := range due {
		candidates[i] = byUID[uid]
	}
	if len(candidates) == 0 {
		return candidates, nil
	}
	live := &olmv1.ClusterObjectSetList{}
	if err := s.APIReader.List(ctx, live); err != nil {
		return nil, fmt.Errorf("confirming orphaned Secrets: %w", err)
	}
	return secretuse.UnusedSecrets(candidates, live.Items, s.SystemNamespace), nil
}

// loadProgress carries on from the progress the previous leader kept, once.
func (s *OrphanSweeper) loadProgress(ctx context.Context) {
	if s.loaded {
		return
	}
	cm := &corev1.ConfigMap{}
	err := s.APIReader.Get(ctx, client.ObjectKey{Namespace: s.SystemNamespace, Name: ProgressConfigMap}, cm)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		ctrl.LoggerFrom(ctx).Error(err, "reading the orphan sweep's progress; will try again", "configMap", klog.KRef(s.SystemNamespace, ProgressConfigMap))
		return
	default:
		s.savedVersion = cm.ResourceVersion
		sums, err := secretuse.DecodeProgress(cm.Data[ProgressKey])
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "the orphan sweep's progress is unreadable: starting over", "configMap", klog.KRef(s.SystemNamespace, ProgressConfigMap))
		}
		s.progress.Carry(sums)
		s.saved = cm.Data[ProgressKey]
	}
	s.loaded = true
}

// saveProgress writes the progress when it changed: a ConfigMap of at most about 600 KB
// (secretuse.MaxProgressEntries), once per sweep at most.
func (s *OrphanSweeper) saveProgress(ctx context.Context) error {
	if !s.loaded {
		return nil
	}
	enc := s.progress.Encode()
	if enc == s.saved {
		return nil
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: ProgressConfigMap, Namespace: s.SystemNamespace, ResourceVersion: s.savedVersion},
		Data:       map[string]string{ProgressKey: enc},
	}
	var err error
	if s.savedVersion == "" {
		err = s.Client.Create(ctx, cm)
	} else {
		err = s.Client.Update(ctx, cm)
	}
	if err != nil {
		// Read again next time: another leader wrote it, or it was deleted.
		s.loaded, s.savedVersion = false, ""
		return err
	}
	s.saved, s.savedVersion = enc, cm.ResourceVersion
	return nil
}

// Delete deletes the Secrets, each only if it is still exactly the version that was judged (same uid
// and resourceVersion), and each only once its quarantine copy is written.
func (s *OrphanSweeper) Delete(ctx context.Context, orphans []corev1.Secret) (int, error) {
	n := 0
	for i := range orphans {
		deleted, err := s.deleteOne(ctx, &orphans[i])
		if err != nil {
			return n, fmt.Errorf("deleting orphaned %s: %w", describe(&orphans[i]), err)
		}
		if deleted {
			n++
			s.Metrics.SecretsSwept.Inc()
		}
	}
	return n, nil
}

func (s *OrphanSweeper) deleteOne(ctx context.Context, sec *corev1.Secret) (bool, error) {
	full := &corev1.Secret{}
	if err := s.APIReader.Get(ctx, client.ObjectKeyFromObject(sec), full); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if full.UID != sec.UID || full.ResourceVersion != sec.ResourceVersion {
		return false, nil // not the version judged: judged again at the next sweep
	}
	if err := objectdata.KeepCopy(ctx, s.Client, s.APIReader, full); err != nil {
		return false, fmt.Errorf("%w: not deleted", err)
	}
	if err := s.step(ctx, StepCopied, sec); err != nil {
		return false, err
	}
	err := s.Client.Delete(ctx, sec, client.Preconditions{UID: &sec.UID, ResourceVersion: &sec.ResourceVersion})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := s.step(ctx, StepDeleted, sec); err != nil {
		return true, err
	}
	// The window starts once the delete has been answered.
	s.mu.Lock()
	if s.quarantined == nil {
		s.quarantined = map[types.UID]time.Time{}
	}
	s.quarantined[sec.UID] = s.clock().Now()
	s.mu.Unlock()
	return true, nil
}

// Restore creates again, from its quarantine copy, every swept Secret that a live ClusterObjectSet
// references, and deletes the copies that are no longer needed: the Secret exists again, or the
// window has passed and a list of live ClusterObjectSets begun after that finds no user. It reads a
// copy's data only to restore it, one at a time.
func (s *OrphanSweeper) Restore(ctx context.Context) error {
	copies := &metav1.PartialObjectMetadataList{}
	copies.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := s.APIReader.List(ctx, copies, client.InNamespace(s.SystemNamespace), client.MatchingLabels{secretdata.LabelQuarantine: "true"}); err != nil {
		return fmt.Errorf("listing the quarantine copies: %w", err)
	}
	s.Metrics.QuarantineCopies.Set(float64(len(copies.Items)))
	if len(copies.Items) == 0 {
		s.mu.Lock()
		s.quarantined = nil
		s.mu.Unlock()
		return nil
	}
	// Taken before the list: a window that has passed by now has passed before the list began.
	now := s.clock().Now()
	live := &olmv1.ClusterObjectSetList{}
	if err := s.APIReader.List(ctx, live); err != nil {
		return fmt.Errorf("listing ClusterObjectSets for the quarantine copies: %w", err)
	}
	users := secretuse.BySecret(live.Items, s.SystemNamespace)
	s.mu.Lock()
	known := s.quarantined
	s.mu.Unlock()
	next := map[types.UID]time.Time{}
	var errs []error
	for i := range copies.Items {
		q := &copies.Items[i]
		key, uid, ok := secretdata.QuarantineOf(q)
		if !ok {
			continue // labelled by someone else: not ours to read or delete
		}
		start, ok := known[uid]
		if !ok || start.After(now) {
			start = now
		}
		done := false
		var err error
		switch {
		case len(users[key]) > 0:
			done, err = s.restoreOne(ctx, q, key, users[key])
		case now.Sub(start) >= s.RestoreWindow:
			done = true
		}
		if err != nil {
			errs = append(errs, err)
		}
		if done {
			err := s.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: q.Namespace, Name: q.Name}},
				client.Preconditions{UID: &q.UID})
			if err == nil || apierrors.IsNotFound(err) {
				continue
			}
			errs = append(errs, fmt.Errorf("deleting quarantine copy %s/%s: %w", q.Namespace, q.Name, err))
		}
		next[uid] = start
	}
	s.mu.Lock()
	s.quarantined = next
	s.mu.Unlock()
	return errors.Join(errs...)
}

// restoreOne makes sure the Secret key, which live ClusterObjectSets use, exists: created again from
// the copy q when it is missing. It reports whether the copy is no longer needed.
func (s *OrphanSweeper) restoreOne(ctx context.Context, q *metav1.PartialObjectMetadata, key types.NamespacedName, users []secretuse.Use) (bool, error) {
	err := s.APIReader.Get(ctx, key, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}})
	if err == nil {
		return true, nil // it exists: created again by a re-apply, or never deleted
	}
	if !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("reading Secret %s: %w", key, err)
	}
	full := &corev1.Secret{}
	if err := s.APIReader.Get(ctx, client.ObjectKeyFromObject(q), full); err != nil {
		return false, fmt.Errorf("reading quarantine copy %s/%s: %w", q.Namespace, q.Name, err)
	}
	restored, err := secretdata.Restored(full)
	if err != nil {
		s.Metrics.RestoreFailures.Inc()
		return false, err
	}
	if err := s.step(ctx, StepRestoring, restored); err != nil {
		return false, err
	}
	if err := s.Client.Create(ctx, restored); err != nil && !apierrors.IsAlreadyExists(err) {
		return false, fmt.Errorf("creating Secret %s again from its quarantine copy: %w", key, err)
	}
	s.Metrics.SecretsRestored.Inc()
	log := ctrl.LoggerFrom(ctx)
	for _, u := range users {
		log.Info("created a swept Secret again: a ClusterObjectSet admitted meanwhile references it",
			"secret", klog.KRef(key.Namespace, key.Name), "clusterObjectSet", klog.KRef("", u.Name), "ref", u.Path)
		if s.Recorder != nil {
			cos := &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: u.Name, UID: u.UID}}
			cos.SetGroupVersionKind(olmv1.GroupVersion.WithKind(olmv1.ClusterObjectSetKind))
			s.Recorder.Eventf(cos, nil, corev1.EventTypeWarning, EventSecretRestored, "Restore",
				"Secret %s was swept as unused while this ClusterObjectSet was being created, and was created again from its quarantine copy (%s)", key, u.Path)
		}
	}
	return true, nil
}

func (s *OrphanSweeper) step(ctx context.Context, step string, sec *corev1.Secret) error {
	if s.AfterStep == nil {
		return nil
	}
	return s.AfterStep(ctx, step, client.ObjectKeyFromObject(sec))
}

func (s *OrphanSweeper) clock() clock.PassiveClock {
	if s.Clock == nil {
		return clock.RealClock{}
	}
	return s.Clock
}
