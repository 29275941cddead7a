package adversarial_test

// The orphan sweep's seams (app.Options.SweepBeforeDelete and SweepClock): sweep-race lands a
// refs-only create exactly between the sweep's live confirmation and its delete, decided by the
// Secrets' names, not by timing; sweep-skew restarts the manager with the sweep's clock shifted apart
// from the reconciler's and checks that a Secret written a moment earlier is not swept.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/secretuse"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

const (
	// opSweepRace: revision From is deleted with orphan propagation; when the sweep is about to
	// delete its Secrets (its hook), revision Rev is created with From's stored refs before the hook
	// returns. The create writes nothing the sweep sees (a touch only drops dead owners, and there are
	// none), so the sweep deletes them; its restore must create them again and Rev keep its content.
	opSweepRace = "sweep-race"
	// opOLMSweepRace: sweep-race with Rev created by OLM's operator-controller, whose refs-only
	// creates skip check-refs (its not-olm condition) altogether: content safety must not rest on
	// any webhook call (issue 35).
	opOLMSweepRace = "olm-sweep-race"
	// opSweepKill: sweep-race where the sweeping replica dies at one of its steps for the Secrets
	// (Variant: controllers.StepCopied or StepDeleted), Rev created by OLM there (untouched, before
	// or after the delete); a second replica takes over and must finish: Rev keeps its content.
	opSweepKill = "sweep-kill"
	// opSweepSkew: nemesis: the manager restarts with the sweep's clock shifted (Variant: a
	// duration), apart from the reconciler's; a Secret written then must outlive its grace period.
	opSweepSkew = "sweep-skew"
)

// sweepTrap is armed by a sweep-race op: the first time the sweep is about to delete one of its
// Secrets (keys), spring runs in the sweep's goroutine, before the sweep deletes anything. A guard
// trap (op collector-race) is sprung by the Secret guard instead, the first time it is about to
// admit someone's delete of one of them (app.Options.GuardBeforeAdmitDelete), in the guard's
// goroutine, before it answers.
type sweepTrap struct {
	keys    map[types.NamespacedName]bool
	guard   bool
	spring  func(judged []corev1.Secret)
	started bool
	fired   chan struct{}
}

// beforeSweepDelete is every replica's app.Options.SweepBeforeDelete: it springs the armed traps
// that name one of the Secrets the sweep is about to delete, and returns once they have run.
func (h *harness) beforeSweepDelete(_ context.Context, secrets []corev1.Secret) {
	h.mu.Lock()
	var due []*sweepTrap
	for t := range h.traps {
		if !t.guard && slices.ContainsFunc(secrets, func(s corev1.Secret) bool { return t.keys[client.ObjectKeyFromObject(&s)] }) {
			t.started = true
			delete(h.traps, t)
			due = append(due, t)
		}
	}
	h.mu.Unlock()
	for _, t := range due {
		t.spring(slices.DeleteFunc(slices.Clone(secrets), func(s corev1.Secret) bool { return !t.keys[client.ObjectKeyFromObject(&s)] }))
		close(t.fired)
	}
}

func (h *harness) arm(t *sweepTrap) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.traps == nil {
		h.traps = map[*sweepTrap]bool{}
	}
	h.traps[t] = true
}

// disarm removes t; if the sweep has sprung it already, it waits until its spring has returned.
func (h *harness) disarm(t *sweepTrap) {
	h.mu.Lock()
	delete(h.traps, t)
	started := t.started
	h.mu.Unlock()
	if started {
		<-t.fired
	}
}

// race is what a sweep race of an op works on: revision From (live, to be deleted with orphan
// propagation; or gone, its stored form as last seen), and revision Rev (name), next, with From's
// stored refs: the Secrets keys of the system namespace.
type race struct {
	from, name string
	src        *entry
	live       bool
	next       *olmv1.ClusterObjectSet
	keys       map[types.NamespacedName]bool
	target     *entry
}

// prepareRace returns op's race, or nil when there is nothing to race (From has no content, is
// being deleted by something else, or references no Secret of the system namespace).
func (r *runner) prepareRace(op Op) (*race, error) {
	from := r.m.name(op.Owner, op.From)
	src := r.entry(from)
	if src == nil || src.objs == nil || src.lost {
		return nil, nil
	}
	stored := &olmv1.ClusterObjectSet{}
	var phases []olmv1.ClusterObjectSetPhase
	live := false
	switch err := r.admin.Get(r.ctx(), client.ObjectKey{Name: from}, stored); {
	case err == nil && stored.DeletionTimestamp.IsZero():
		phases, live = storedForm(stored).Spec.Phases, true
	case apierrors.IsNotFound(err) && r.goneInModel(src):
		r.mu.Lock()
		phases = slices.Clone(src.phases)
		r.mu.Unlock()
	case err != nil && !apierrors.IsNotFound(err):
		return nil, err
	default:
		return nil, nil // being deleted by something else
	}
	next := r.revision(op, builders.WithPhases(phases...))
	keys := map[types.NamespacedName]bool{}
	for _, key := range next.ReferencedSecrets(testenv.SystemNamespace) {
		if key.Namespace == testenv.SystemNamespace {
			keys[key] = true
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	return &race{from: from, name: next.Name, src: src, live: live, next: next, keys: keys,
		target: &entry{owner: op.Owner, rev: op.Rev, objs: src.objs}}, nil
}

// remember records the race's Rev, created: its Secrets were there when its create was sent (the
// sweep had just read them).
func (r *runner) rememberRace(rc *race) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rc.target.refs = rc.next.ReferencedSecrets(testenv.SystemNamespace)
	rc.target.phases = rc.next.Spec.Phases
	r.m.entries[rc.name] = rc.target
}

// startRace deletes From (when live) with propagation and waits until the hook has sprung trap:
// false when neither the sweep nor (a guard trap) the collector will come for the race's Secrets
// through it (each gone, used or owned by an existing ClusterObjectSet) or not within its bound.
func (r *runner) startRace(rc *race, trap *sweepTrap, what string, propagation metav1.DeletionPropagation) (bool, error) {
	if rc.live {
		if err := r.deleteAndWait(rc.from, propagation); err != nil {
			return false, err
		}
	}
	// The sweep first sees them unused (the collector has dropped their owner), waits its grace
	// period (once this replica holds the lease) and confirms: within this bound, unless another
	// ClusterObjectSet uses or owns them, or they are gone. (The collector comes within seconds.)
	who := "the sweep"
	if trap.guard {
		who = "the collector (through the guard)"
	}
	bound := time.Now().Add(r.env.grace + 5*r.env.sweepEvery + time.Minute)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-trap.fired:
			return true, nil
		case <-tick.C:
			why := r.noSweepFor(rc.keys)
			if why == "" && time.Now().After(bound) {
				why = "not within " + (r.env.grace + 5*r.env.sweepEvery + time.Minute).String()
			}
			if why == "" {
				continue
			}
			r.env.disarm(trap)
			select {
			case <-trap.fired: // sprung while it was being disarmed
				return true, nil
			default:
				r.logf("%s: %s did not come for the Secrets of %s (%s): no race", what, who, rc.from, why)
				return false, nil
			}
		}
	}
}

// waitDeleteAnswered waits (at most 30 s) until the sweep's delete of judged has had its answer:
// each judged Secret is gone or at another version.
func (r *runner) waitDeleteAnswered(judged []corev1.Secret) {
	_ = wait.PollUntilContextTimeout(r.ctx(), pollInterval, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		for i := range judged {
			cur := &corev1.Secret{}
			err := r.admin.Get(ctx, client.ObjectKeyFromObject(&judged[i]), cur)
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return false, nil //nolint:nilerr // a read that failed says nothing yet: look again
			}
			if cur.UID == judged[i].UID && cur.ResourceVersion == judged[i].ResourceVersion {
				return false, nil
			}
		}
		return true, nil
	})
}

// sweepRace: revision From (live: deleted now with orphan propagation; or gone: its stored form as
// last seen) leaves its Secrets to the sweep. When the sweep, having seen them unused for its grace
// period and confirmed so with a live list, is about to delete them, revision Rev is created with
// From's stored refs, and remembered, before the sweep's hook returns. Then, once the sweep's delete
// has had its answer (each judged Secret gone or at another version), every Secret Rev references
// must be back (restored from the sweep's quarantine copy) and hold all its content.
func (r *runner) sweepRace(op Op) error {
	rc, err := r.prepareRace(op)
	if rc == nil {
		return err
	}
	creator, as := r.admin, ""
	if op.Kind == opOLMSweepRace {
		creator, as = r.olm, ", as OLM's operator-controller"
	}
	var judged []corev1.Secret
	var created error
	trap := &sweepTrap{keys: rc.keys, fired: make(chan struct{}), spring: func(secrets []corev1.Secret) {
		judged = secrets
		created = expect("creating "+rc.name+" with the stored refs of "+rc.from+" while the sweep is about to delete them"+as, creator.Create(r.ctx(), rc.next.DeepCopy()))
		if created == nil {
			// Remembered at once (the sweep deletes as soon as this returns, and the reconciler's
			// ownership patch, which also changes the Secrets' version, must not get there first).
			r.rememberRace(rc)
		}
	}}
	r.env.arm(trap)
	defer r.env.disarm(trap)
	if fired, err := r.startRace(rc, trap, "sweep-race", metav1.DeletePropagationOrphan); !fired || err != nil {
		return err
	}
	if created != nil {
		return created
	}
	r.logf("sweep-race: the sweep was about to delete %d Secrets of %s; %s was created with their refs first", len(judged), rc.from, rc.name)
	r.waitDeleteAnswered(judged)
	// Whatever the sweep deleted, its restore (the same sweep, or the next) creates again from the
	// quarantine copies: every Secret Rev references must be back, while Rev is live.
	return r.checkRestored(rc.name, rc.target, rc.keys, 30*time.Second, "swept and not restored by the sweep")
}

// checkRestored waits up to bound until every Secret of keys exists again, then, while the
// ClusterObjectSet name is live, holds it to all its content: a Secret still missing, read after the
// wait while name was live before and after the read, is content lost. (The wait only waits: a read
// cut short by its deadline says nothing, so the verdict is a read of its own.) lost says what
// happened to a missing Secret, for the violation ("swept and not restored by the sweep").
func (r *runner) checkRestored(name string, target *entry, keys map[types.NamespacedName]bool, bound time.Duration, lost string) error {
	_ = wait.PollUntilContextTimeout(r.ctx(), pollInterval, bound, true, func(ctx context.Context) (bool, error) {
		for key := range keys {
			if err := r.admin.Get(ctx, key, &corev1.Secret{}); err != nil {
				return false, nil //nolint:nilerr // missing, or a read that failed: look again
			}
		}
		return true, nil
	})
	cos := &olmv1.ClusterObjectSet{}
	if err := r.admin.Get(r.ctx(), client.ObjectKey{Name: name}, cos); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !secretuse.Live(cos) || r.goneInModel(target) {
		return nil
	}
	for key := range keys {
		err := r.admin.Get(r.ctx(), key, &corev1.Secret{})
		if err == nil {
			continue
		}
		if !apierrors.IsNotFound(err) {
			return err
		}
		if live, err := r.stillLive(r.ctx(), cos); err != nil || !live {
			r.logf("Secret %s, which %s referenced, is missing; %s is no longer live: not judged", key, name, name)
			return err
		}
		return violated("content-lost", "Secret %s, which %s references, was %s within %s", key, name, lost, bound)
	}
	return r.checkContent(r.ctx(), cos, target)
}

// noSweepFor says why the sweep will not come for any of keys ("" if it may): each is gone, or
// used or owned by an existing ClusterObjectSet.
func (r *runner) noSweepFor(keys map[types.NamespacedName]bool) string {
	list := &olmv1.ClusterObjectSetList{}
	if err := r.admin.List(r.ctx(), list); err != nil {
		return ""
	}
	exists := map[types.UID]bool{}
	for _, c := range list.Items {
		exists[c.UID] = true
	}
	users := secretuse.BySecret(list.Items, testenv.SystemNamespace)
	for key := range keys {
		sec := &corev1.Secret{}
		err := r.admin.Get(r.ctx(), key, sec)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return ""
		}
		owned := slices.ContainsFunc(sec.OwnerReferences, func(o metav1.OwnerReference) bool { return exists[o.UID] })
		if !owned && len(users[key]) == 0 {
			return "" // the sweep's to judge
		}
	}
	return "each is gone, used or owned"
}

// sweepSkew restarts the manager with the sweep's clock shifted by Variant, apart from the
// reconciler's, and writes an object-data Secret that nobody uses: the sweep measures its grace period
// on its own clock from the moment it first sees the Secret unused, so the Secret must still exist
// a grace period after it was written (then the sweep takes it; quiescence holds that).
func (r *runner) sweepSkew(op Op) error {
	skew, err := time.ParseDuration(op.Variant)
	if err != nil {
		return fmt.Errorf("sweep-skew %q: %w", op.Variant, err)
	}
	r.env.sweepSkew = skew
	if err := r.env.restart(); err != nil {
		return err
	}
	key := types.NamespacedName{Namespace: testenv.SystemNamespace, Name: fmt.Sprintf("%s-fresh-%d", r.m.run, op.Seed%100000)}
	data := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"fresh"}}`)
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
		Labels: map[string]string{olmv1.LabelRevisionName: key.Name}},
		Immutable: ptr.To(true), Type: olmv1.SecretTypeObjectData, Data: map[string][]byte{content.Key(data): data}}
	written := time.Now() // before the write: the sweep cannot have seen it unused earlier
	if err := r.admin.Create(r.ctx(), sec); apierrors.IsAlreadyExists(err) {
		return nil // a replay of the same run's op: not written now
	} else if err != nil {
		return expect("writing an unused Secret with the sweep's clock shifted by "+op.Variant, err)
	}
	// An observation window, not a wait for a condition: gone at any time within the grace period
	// after it was written (the time is taken after the read that found it gone) is too early.
	for time.Since(written) < r.env.grace {
		err := r.admin.Get(r.ctx(), key, &corev1.Secret{})
		if apierrors.IsNotFound(err) {
			if early := time.Since(written); early < r.env.grace {
				return violated("swept-early", "Secret %s, unused, was swept %s after it was written (grace %s, the sweep's clock shifted by %s)",
					key.Name, early.Round(time.Millisecond), r.env.grace, op.Variant)
			}
		}
		select {
		case <-r.ctx().Done():
		case <-time.After(pollInterval):
		}
	}
	return nil
}

// killTrap is armed by a sweep-kill op: the first time the sweep reaches step for one of its
// Secrets (keys), spring runs in the sweep's goroutine; then the sweep blocks, as a dead process
// would, until its replica is stopped.
type killTrap struct {
	keys   map[types.NamespacedName]bool
	step   string
	spring func()
	fired  chan struct{}
	once   sync.Once
}

// afterSweepStep is every replica's app.Options.SweepAfterStep.
func (h *harness) afterSweepStep(ctx context.Context, step string, key types.NamespacedName) error {
	h.springSteps(step, key)
	h.mu.Lock()
	var due *killTrap
	for t := range h.kills {
		if t.step == step && t.keys[key] {
			due = t
			delete(h.kills, t)
			break
		}
	}
	h.mu.Unlock()
	if due == nil {
		return nil
	}
	due.spring()
	due.once.Do(func() { close(due.fired) })
	<-ctx.Done() // dead: nothing more of this sweep happens
	return fmt.Errorf("killed after step %s of %s", step, key)
}

// sweepKill: revision From is deleted with orphan propagation; when the sweep reaches step Variant
// for one of its Secrets, revision Rev is created with From's stored refs as OLM (untouched), and
// the sweeping replica dies there (failover: a second replica takes the lease). The new leader must
// finish what the dead one left: every Secret Rev references exists again, with its content.
func (r *runner) sweepKill(op Op) error {
	from := r.m.name(op.Owner, op.From)
	src := r.entry(from)
	if src == nil || src.objs == nil || src.lost {
		return nil
	}
	stored := &olmv1.ClusterObjectSet{}
	switch err := r.admin.Get(r.ctx(), client.ObjectKey{Name: from}, stored); {
	case err == nil && stored.DeletionTimestamp.IsZero():
	case err != nil && !apierrors.IsNotFound(err):
		return err
	default:
		return nil // gone or being deleted by something else
	}
	phases := storedForm(stored).Spec.Phases
	name := r.m.name(op.Owner, op.Rev)
	next := r.revision(op, builders.WithPhases(phases...))
	keys := map[types.NamespacedName]bool{}
	for _, key := range next.ReferencedSecrets(testenv.SystemNamespace) {
		if key.Namespace == testenv.SystemNamespace {
			keys[key] = true
		}
	}
	if len(keys) == 0 {
		return nil
	}
	target := &entry{owner: op.Owner, rev: op.Rev, objs: src.objs}
	var created error
	trap := &killTrap{keys: keys, step: op.Variant, fired: make(chan struct{}), spring: func() {
		created = expect("creating "+name+" as OLM with the stored refs of "+from+" at the sweep's step "+op.Variant, r.olm.Create(r.ctx(), next.DeepCopy()))
		if created == nil {
			r.mu.Lock()
			target.refs = next.ReferencedSecrets(testenv.SystemNamespace)
			target.phases = next.Spec.Phases
			r.m.entries[name] = target
			r.mu.Unlock()
		}
	}}
	r.env.mu.Lock()
	if r.env.kills == nil {
		r.env.kills = map[*killTrap]bool{}
	}
	r.env.kills[trap] = true
	r.env.mu.Unlock()
	disarm := func() {
		r.env.mu.Lock()
		delete(r.env.kills, trap)
		r.env.mu.Unlock()
	}
	if err := r.deleteAndWait(from, metav1.DeletePropagationOrphan); err != nil {
		disarm()
		return err
	}
	bound := time.Now().Add(r.env.grace + 5*r.env.sweepEvery + time.Minute)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for fired := false; !fired; {
		select {
		case <-trap.fired:
			fired = true
		case <-tick.C:
			why := r.noSweepFor(keys)
			if why == "" && time.Now().After(bound) {
				why = "not within the bound"
			}
			if why == "" {
				continue
			}
			disarm()
			select {
			case <-trap.fired:
				fired = true
			default:
				r.logf("sweep-kill: the sweep did not come for the Secrets of %s (%s)", from, why)
				return nil
			}
		}
	}
	r.logf("sweep-kill: the sweep died after step %s for a Secret of %s; %s was created as OLM; failing over", op.Variant, from, name)
	if err := r.env.failover(); err != nil {
		return err
	}
	if created != nil {
		return created
	}
	return r.checkRestored(name, target, keys, settleBound, "swept and not restored by the next leader")
}
