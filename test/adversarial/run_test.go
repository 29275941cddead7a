package adversarial_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/naming"
	"github.com/cos-externalizer/cos-externalizer/internal/secretuse"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// violation is an invariant that did not hold, or an answer no op may get: the run fails with it.
// kind names the invariant (content-lost, delete-wedged, ...): shrinking keeps a shorter sequence
// only when it violates the same one.
type violation struct {
	kind, msg string
	cause     error // the answer it was about, when there is one
}

func (v *violation) Error() string { return v.kind + ": " + v.msg }

func (v *violation) Unwrap() error { return v.cause }

func violated(kind, format string, args ...any) error {
	return &violation{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// Bounds of the waits an invariant allows (generous for loaded CI machines; a wedge never ends).
const (
	deleteBound  = 2 * time.Minute
	settleBound  = 2 * time.Minute
	pollInterval = 100 * time.Millisecond
)

// runner executes the ops of one run against the cluster and its model.
type runner struct {
	env   *harness
	m     *model
	admin client.Client // cluster admin, as a GitOps tool or kubectl user
	alice client.Client // another cluster admin, not exempt from the Secret guard
	olm   client.Client // OLM's operator-controller, exempt from the Secret guard as config/webhook-only makes it
	done  []Op
	logf  func(format string, args ...any)

	// mu guards the model (m), what the checks remember (uids) and roundOps: ops of a round run at
	// once.
	mu sync.Mutex
	// roundOps are the ops of the round running (none between rounds and in the sequential mode).
	roundOps []Op
	// uids: per managed object, the UID it had and the live ClusterObjectSet that controlled it
	// when last seen (the invariant "a managed object's UID never changes under a live controller").
	uids map[string]controlled
	// hist records every op of the run with its invoke and complete times and its answer.
	hist history
	// faulty is set while a round runs beside a nemesis or a burst: answers that say the service
	// was unavailable (timeouts, failed webhook calls) are indeterminate then, not violations.
	faulty atomic.Bool
	// plant: the Secrets planted where the caller may not read (plant_test.go).
	plant *planted
	// warned is the admin's client whose warnings go to warnings (refs-fail-race's probes of the
	// check-refs webhook), made on first use.
	warned   client.Client
	warnings *testenv.Warnings
	// settled is set while the checks after quiescence run: a swept Secret that a live
	// ClusterObjectSet references must have been restored by then, not only be held in quarantine.
	settled atomic.Bool
}

// entry returns the model's entry of name (nil if none).
func (r *runner) entry(name string) *entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m.entries[name]
}

func (r *runner) ctx() context.Context { return context.Background() }

// step runs op and then the invariants that must hold after every step.
func (r *runner) step(op Op) error {
	r.done = append(r.done, op)
	if err := r.execRecorded(0, op); err != nil {
		return fmt.Errorf("step %d %s: %w", len(r.done), op, err)
	}
	if op.Kind == opNSDelete {
		return nil
	}
	if err := r.checkAlways(); err != nil {
		return fmt.Errorf("after step %d %s: %w", len(r.done), op, err)
	}
	return nil
}

func (r *runner) exec(op Op) error {
	switch op.Kind {
	case opApply:
		return r.apply(op)
	case opCopy:
		return r.copyRefs(op)
	case opEmpty:
		return r.empty(op)
	case opFill:
		return r.fill(op)
	case opArchive:
		return r.archive(op)
	case opDelete:
		return r.delete(op)
	case opRecreate:
		return r.recreate(op)
	case opRestore:
		return r.restore(op)
	case opSecretDel, opSecretColl, opSecretEdit:
		return r.secretOp(op)
	case opDrift:
		return r.drift(op)
	case opBad:
		return r.badRefs(op)
	case opRestart:
		return r.env.restart()
	case opFailover:
		return r.env.failover()
	case opDown:
		return r.webhookDown(op)
	case opOLMOwners:
		return r.olmOwners(op)
	case opNSDelete:
		return r.deleteSystemNamespace()
	}
	return r.execNew(op)
}

// expect returns a violation unless err is nil or one of the allowed answers.
func expect(what string, err error, allowed ...func(error) bool) error {
	if err == nil {
		return nil
	}
	for _, ok := range allowed {
		if ok(err) {
			return nil
		}
	}
	return violated("unexpected-answer", "%s: unexpected answer: %v", what, err)
}

// replaceAnswer judges the answer to apply variant replace's PUT of the manifests a revision was
// just created from: nil for every answer a correct system may give under the round's interleaving,
// and nothing changed by it (the revision holds what was created). Conflict: the reconciler wrote it
// (finalizer, status) between each read and its PUT, as many times as retry.DefaultRetry retries.
// Invalid "cannot un-archive": a revision of the same owner created in the round rolled out and
// archived it before the PUT (whose lifecycleState is the manifests' Active), as the CRD's rule
// answers. Anything else is err.
func (r *runner) replaceAnswer(name string, err error) error {
	switch {
	case apierrors.IsConflict(err):
		r.logf("replacing %s: Conflict after every retry (the reconciler wrote it meanwhile): not replaced", name)
		return nil
	case apierrors.IsInvalid(err) && strings.Contains(err.Error(), "cannot un-archive"):
		cur := &olmv1.ClusterObjectSet{}
		if gerr := r.admin.Get(r.ctx(), client.ObjectKey{Name: name}, cur); gerr == nil && cur.Spec.LifecycleState == olmv1.LifecycleStateArchived {
			r.logf("replacing %s: archived by a successor before the PUT: refused as un-archive, not replaced", name)
			return nil
		}
	}
	return err
}

// isGoneAfterAdmission: err is rememberAs', for a revision gone by the time it was read back.
func isGoneAfterAdmission(err error) bool {
	var v *violation
	return errors.As(err, &v) && v.kind == "unexpected-answer" && apierrors.IsNotFound(err)
}

// revision is the ClusterObjectSet of revision op.Rev of owner op.Owner, with opts (its phases).
func (r *runner) revision(op Op, opts ...builders.Option) *olmv1.ClusterObjectSet {
	return builders.COS(r.m.name(op.Owner, op.Rev), append([]builders.Option{builders.WithRevision(op.Rev),
		builders.WithLabels(map[string]string{olmv1.LabelOwnerName: r.m.ownerLabel(op.Owner)}),
		// A revision deleted with orphan propagation leaves its objects without a controller: the
		// next revision adopts them (under Prevent it would collide, as it should, and never succeed).
		builders.WithCollisionProtection(olmv1.CollisionProtectionIfNoController)}, opts...)...)
}

// inlineCOS is revision op with objs inline, one phase per element.
func (r *runner) inlineCOS(op Op, objs [][]*unstructured.Unstructured) *olmv1.ClusterObjectSet {
	var opts []builders.Option
	for i, phase := range objs {
		var members []olmv1.ClusterObjectSetObject
		for _, o := range phase {
			members = append(members, builders.Inline(o))
		}
		opts = append(opts, builders.WithPhase([]string{"configuration", "deploy"}[i], members...))
	}
	return r.revision(op, opts...)
}

func (r *runner) remember(name string, e *entry) error { return r.rememberAs(name, e, false) }

// rememberAs is remember; with copied, content already gone when the create completed (a copy of a
// revision deleted meanwhile) was never the copy's: the entry is then lost (nothing to check).
func (r *runner) rememberAs(name string, e *entry, copied bool) error {
	cos := &olmv1.ClusterObjectSet{}
	if err := r.admin.Get(r.ctx(), client.ObjectKey{Name: name}, cos); err != nil {
		return &violation{kind: "unexpected-answer", msg: fmt.Sprintf("reading %s right after it was admitted: %v", name, err), cause: err}
	}
	lost := false
	if copied {
		for _, key := range cos.ReferencedSecrets(testenv.SystemNamespace) {
			if err := r.admin.Get(r.ctx(), key, &corev1.Secret{}); apierrors.IsNotFound(err) {
				r.logf("%s was created with refs to Secret %s, gone by then: its content is not checked", name, key)
				lost = true
				break
			}
		}
	}
	r.mu.Lock()
	e.lost = lost
	defer r.mu.Unlock()
	e.refs = cos.ReferencedSecrets(testenv.SystemNamespace)
	e.phases = cos.Spec.Phases
	e.gone = false
	r.m.entries[name] = e
	return nil
}

func (r *runner) apply(op Op) error {
	objs := r.m.objects(op.Owner, op.Rev, op.Seed, op.Variant == "large")
	cos := r.inlineCOS(op, objs)
	var err error
	switch op.Variant {
	case "invalid":
		cos.Spec.Phases[0].Name = "Not_A_DNS_Label"
		err = r.admin.Create(r.ctx(), cos)
		if !apierrors.IsInvalid(err) {
			return violated("unexpected-answer", "an invalid ClusterObjectSet: want Invalid, got %v", err)
		}
		// Refused before any Secret was written.
		secrets := &corev1.SecretList{}
		if err := r.admin.List(r.ctx(), secrets, client.InNamespace(testenv.SystemNamespace),
			client.MatchingLabels{olmv1.LabelRevisionName: naming.RevisionLabelValue(cos.Name)}); err != nil {
			return err
		}
		if len(secrets.Items) > 0 {
			return violated("half-written", "an invalid ClusterObjectSet left %d Secrets behind", len(secrets.Items))
		}
		return nil
	case "create":
		err = r.admin.Create(r.ctx(), cos)
	case "replace":
		// Created, then replaced with the same manifests at the resourceVersion just read (a PUT, which
		// also drops the finalizer the reconciler added; retried on conflict): the update gets the
		// stored refs back.
		if err = r.admin.Create(r.ctx(), cos.DeepCopy()); err == nil {
			err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
				cur := &olmv1.ClusterObjectSet{}
				if err := r.admin.Get(r.ctx(), client.ObjectKeyFromObject(cos), cur); err != nil {
					return err
				}
				replaced := cos.DeepCopy()
				replaced.ResourceVersion = cur.ResourceVersion
				return r.admin.Update(r.ctx(), replaced)
			})
			err = r.replaceAnswer(cos.Name, err)
		}
	case "always":
		cos.Annotations = map[string]string{"cos-externalizer.io/externalize": "always"}
		err = r.admin.Create(r.ctx(), cos)
	case "kubectl-cos":
		err = r.kubectlCOS(cos, op.Seed)
	case "kubectl":
		raw, jerr := json.Marshal(cos)
		if jerr != nil {
			return jerr
		}
		_, stderr, kerr := testenv.Kubectl(r.env.t, raw, "apply", "-f", "-")
		if kerr != nil {
			err = fmt.Errorf("%v: %s", kerr, stderr)
		}
	default: // ssa, large
		err = r.serverSideApply(cos)
	}
	if err := expect("applying "+cos.Name, err); err != nil {
		return err
	}
	return r.remember(cos.Name, &entry{owner: op.Owner, rev: op.Rev, objs: objs, inline: true})
}

func (r *runner) copyRefs(op Op) error {
	src, stored, err := r.source(r.m.name(op.Owner, op.From))
	if src == nil {
		return err // the source is gone: nothing to copy
	}
	return r.createCopy(op, "with copied refs", stored.Spec.Phases, src.objs)
}

// source returns the model's entry of revision name and the revision as stored; nil and no error
// when either is gone or the entry has no content (a bad or empty revision): nothing to work on.
func (r *runner) source(name string) (*entry, *olmv1.ClusterObjectSet, error) {
	e, stored, err := r.stored(name)
	if stored == nil || e == nil || e.objs == nil {
		return nil, nil, err
	}
	return e, stored, nil
}

// stored returns the model's entry of revision name (nil when it has none) and the revision as
// stored; a nil revision and no error when it is gone.
func (r *runner) stored(name string) (*entry, *olmv1.ClusterObjectSet, error) {
	e := r.entry(name)
	stored := &olmv1.ClusterObjectSet{}
	if err := r.admin.Get(r.ctx(), client.ObjectKey{Name: name}, stored); err != nil {
		return e, nil, client.IgnoreNotFound(err)
	}
	return e, stored, nil
}

// createCopy creates revision Rev of op's owner with phases, the refs of another revision whose
// content objs is, and remembers it. how ends the expectation's description.
func (r *runner) createCopy(op Op, how string, phases []olmv1.ClusterObjectSetPhase, objs [][]*unstructured.Unstructured) error {
	name := r.m.name(op.Owner, op.Rev)
	cos := r.revision(op, builders.WithPhases(phases...))
	if err := expect("creating "+name+" "+how, r.admin.Create(r.ctx(), cos)); err != nil {
		return err
	}
	return r.rememberCopy(name, &entry{owner: op.Owner, rev: op.Rev, objs: objs})
}

func (r *runner) empty(op Op) error {
	name := r.m.name(op.Owner, op.Rev)
	cos := r.revision(op)
	if err := expect("creating the empty revision "+name, r.admin.Create(r.ctx(), cos)); err != nil {
		return err
	}
	return r.remember(name, &entry{owner: op.Owner, rev: op.Rev, empty: true})
}

// fill sets the phases of an empty revision once, with an Update at the resourceVersion it read.
// What the round does meanwhile decides the answer, and each is the API server's own (the webhooks
// answer a stale update as it does: docs/adversarial.md, "What the oracle accepts"): success;
// Conflict when the stored revision moved on since the read (the reconciler archived it or wrote
// its finalizer or status, a concurrent archive, fill or delete); NotFound when it is gone, if the
// round may delete it (deletable). Nothing else.
func (r *runner) fill(op Op) error {
	name := r.m.name(op.Owner, op.Rev)
	e, cos, err := r.stored(name)
	// Nothing to fill: gone, being deleted, or filled already (a concurrent fill got there first:
	// filling it again is refused as the API server refuses it, phases are immutable).
	if cos == nil || e == nil || !e.empty || !cos.DeletionTimestamp.IsZero() || len(cos.Spec.Phases) > 0 {
		return err
	}
	archived := cos.Spec.LifecycleState == olmv1.LifecycleStateArchived
	objs := r.m.objects(op.Owner, op.Rev, op.Seed, false)
	cos.Spec.Phases = r.inlineCOS(op, objs).Spec.Phases
	err = r.admin.Update(r.ctx(), cos)
	switch {
	case apierrors.IsConflict(err):
		r.logf("filling %s: Conflict, the stored revision moved on since it was read: not filled", name)
		return nil
	case apierrors.IsNotFound(err) && r.deletable(op, name, archived):
		r.logf("filling %s: gone since it was read (deleted by the round or pruned): not filled", name)
		return nil
	}
	if err := expect("filling "+name, err); err != nil {
		return err
	}
	return r.rememberExisting(op, name, &entry{owner: op.Owner, rev: op.Rev, objs: objs, inline: true}, false, archived)
}

// rememberExisting is rememberAs for a write of a revision that existed before op (it changed it,
// or made it again): gone by the time it is read back is accepted when the round may delete it
// (deletable; archived: as op wrote or read it), and the model then has it gone. A new name must
// read back (remember).
func (r *runner) rememberExisting(op Op, name string, e *entry, copied, archived bool) error {
	err := r.rememberAs(name, e, copied)
	if err == nil || !isGoneAfterAdmission(err) || !r.deletable(op, name, archived) {
		return err
	}
	r.logf("%s of %s: admitted, gone by the time it was read back (deleted by the round or pruned)", op.Kind, name)
	r.mu.Lock()
	if cur := r.m.entries[name]; cur != nil {
		cur.gone = true
	}
	r.mu.Unlock()
	return nil
}

// deletable reports whether revision name may be deleted while op runs, by something a correct
// system does: another op of the round deletes it (a delete, recreate, restore, wave,
// orphan-recreate or sweep-race), or, archived (when op read it), the reconciler prunes it
// (--keep-archived-revisions). Then an answer NotFound is the API server's, not a violation.
func (r *runner) deletable(op Op, name string, archived bool) bool {
	if archived {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, other := range r.roundOps {
		if other != op && slices.Contains(r.m.deletes(other), name) {
			return true
		}
	}
	return false
}

func (r *runner) archive(op Op) error {
	name := r.m.name(op.Owner, op.Rev)
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"lifecycleState":"Archived"}}`))
	err := r.admin.Patch(r.ctx(), &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: name}}, patch)
	if err == nil {
		r.mu.Lock()
		if e := r.m.entries[name]; e != nil {
			e.archivedByUs = true
		}
		r.mu.Unlock()
	}
	return expect("archiving "+name, err, apierrors.IsNotFound)
}

// deleteAndWait deletes the ClusterObjectSet and waits, within deleteBound, until it is gone.
func (r *runner) deleteAndWait(name string, propagation metav1.DeletionPropagation) error {
	cos := &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: name}}
	err := r.admin.Delete(r.ctx(), cos, client.PropagationPolicy(propagation))
	if err := expect("deleting "+name, err, apierrors.IsNotFound); err != nil {
		return err
	}
	var last string
	if err := wait.PollUntilContextTimeout(r.ctx(), pollInterval, deleteBound, true, func(ctx context.Context) (bool, error) {
		cur := &olmv1.ClusterObjectSet{}
		err := r.admin.Get(ctx, client.ObjectKey{Name: name}, cur)
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("finalizers %v, conditions %v", cur.Finalizers, cur.Status.Conditions)
		}
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		return violated("delete-wedged", "the %s delete of %s did not finish within %s (wedged): %s", propagation, name, deleteBound, last)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.m.entries[name]; e != nil {
		e.gone = true
		r.m.deletedRevs[e.owner] = append(r.m.deletedRevs[e.owner], e.rev)
	}
	return nil
}

func (r *runner) delete(op Op) error {
	return r.deleteAndWait(r.m.name(op.Owner, op.Rev), metav1.DeletionPropagation(op.Variant))
}

func (r *runner) recreate(op Op) error {
	name := r.m.name(op.Owner, op.Rev)
	e := r.entry(name)
	if e == nil || e.gone || !e.inline {
		return nil
	}
	if err := r.deleteAndWait(name, metav1.DeletePropagationBackground); err != nil {
		return err
	}
	cos := r.inlineCOS(op, e.objs)
	if err := expect("re-creating "+name, r.serverSideApply(cos)); err != nil {
		return err
	}
	return r.rememberExisting(op, name, e, false, false)
}

// restore backs up the stored ClusterObjectSet and its Secrets (as a backup tool would: objects
// without uid, resourceVersion or owners), deletes it, and restores both in the order Variant says.
func (r *runner) restore(op Op) error {
	name := r.m.name(op.Owner, op.Rev)
	e, stored, err := r.stored(name)
	// A lost copy (created with refs to content already gone) has nothing to back up: how many
	// copies are lost depends on the interleaving of earlier rounds.
	if stored == nil || e == nil || e.lost || !stored.DeletionTimestamp.IsZero() {
		return err
	}
	var secrets []*corev1.Secret
	for _, key := range stored.ReferencedSecrets(testenv.SystemNamespace) {
		s := &corev1.Secret{}
		if err := r.admin.Get(r.ctx(), key, s); err != nil {
			return violated("content-lost", "backing up %s: a Secret it references: %v", name, err)
		}
		secrets = append(secrets, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, Labels: s.Labels, Annotations: s.Annotations},
			Type:       s.Type, Immutable: s.Immutable, Data: s.Data,
		})
	}
	backup := &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: stored.Labels, Annotations: stored.Annotations}, Spec: stored.Spec}
	if err := r.deleteAndWait(name, metav1.DeletePropagationBackground); err != nil {
		return err
	}
	// The old Secrets go with their owner (unless another ClusterObjectSet uses them): a restore
	// writes them again only once they are gone, as a restore into a cleaned cluster would.
	for _, s := range secrets {
		if err := wait.PollUntilContextTimeout(r.ctx(), pollInterval, deleteBound, true, func(ctx context.Context) (bool, error) {
			cur := &corev1.Secret{}
			err := r.admin.Get(ctx, client.ObjectKeyFromObject(s), cur)
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			list := &olmv1.ClusterObjectSetList{}
			if err := r.admin.List(ctx, list); err != nil {
				return false, nil //nolint:nilerr // a list that failed says nothing yet: poll again
			}
			return len(secretuse.Users(list.Items, client.ObjectKeyFromObject(s), testenv.SystemNamespace)) > 0, nil
		}); err != nil {
			return violated("delete-wedged", "Secret %s of deleted %s was not collected within %s", s.Name, name, deleteBound)
		}
	}
	createCOS := func() error {
		return expect("restoring "+name, r.admin.Create(r.ctx(), backup.DeepCopy()))
	}
	createSecrets := func() error {
		for _, s := range secrets {
			if err := expect("restoring Secret "+s.Name, r.admin.Create(r.ctx(), s.DeepCopy()), apierrors.IsAlreadyExists); err != nil {
				return err
			}
		}
		return nil
	}
	order := []func() error{createSecrets, createCOS}
	if op.Variant == "cos-first" {
		order = []func() error{createCOS, createSecrets}
	}
	for _, f := range order {
		if err := f(); err != nil {
			return err
		}
	}
	// Restored Archived, it may be pruned at once (a successor of the round archived a newer one).
	return r.rememberExisting(op, name, e, false, backup.Spec.LifecycleState == olmv1.LifecycleStateArchived)
}

// seededRef returns the name of op's revision and the Secret, of those its stored form referenced
// when last seen, that op's seed picks; not ok when there is none (nothing to act on).
func (r *runner) seededRef(op Op) (string, types.NamespacedName, bool) {
	name := r.m.name(op.Owner, op.Rev)
	e := r.entry(name)
	if e == nil || len(e.refs) == 0 {
		return name, types.NamespacedName{}, false
	}
	return name, e.refs[int(op.Seed%uint64(len(e.refs)))], true
}

// secretOp is what an admin does to the Secrets of a ClusterObjectSet: delete one, delete them all
// by label, or edit one's label or owners. What a live ClusterObjectSet uses must be refused.
func (r *runner) secretOp(op Op) error {
	name, key, ok := r.seededRef(op)
	if !ok {
		return nil
	}
	if op.Kind == opSecretColl {
		err := r.alice.DeleteAllOf(r.ctx(), &corev1.Secret{}, client.InNamespace(testenv.SystemNamespace),
			client.MatchingLabels{olmv1.LabelRevisionName: naming.RevisionLabelValue(name)})
		// Whatever it deleted, the invariants after the step say whether it was allowed to.
		return expect("deleting the Secrets of "+name+" by label", err, apierrors.IsForbidden)
	}
	sec := &corev1.Secret{}
	if err := r.admin.Get(r.ctx(), key, sec); err != nil {
		return client.IgnoreNotFound(err)
	}
	list := &olmv1.ClusterObjectSetList{}
	if err := r.admin.List(r.ctx(), list); err != nil {
		return err
	}
	users := secretuse.Users(list.Items, key, testenv.SystemNamespace)
	var err error
	refuse := len(users) > 0
	if op.Kind == opSecretDel {
		err = r.alice.Delete(r.ctx(), sec, client.Preconditions{ResourceVersion: &sec.ResourceVersion})
	} else {
		changed := sec.DeepCopy()
		if op.Variant == "label" {
			changed.Labels[olmv1.LabelRevisionName] = "someone-else"
		} else {
			changed.OwnerReferences = nil
		}
		refuse = secretuse.GuardUpdate(sec.Labels[olmv1.LabelRevisionName], changed.Labels[olmv1.LabelRevisionName],
			sec.OwnerReferences, changed.OwnerReferences, users) != ""
		err = r.alice.Update(r.ctx(), changed)
	}
	if err == nil && refuse {
		// Used before the request and still used after the answer (the same live ClusterObjectSet,
		// so used throughout): the guard let it through. A user gone meanwhile (a concurrent delete)
		// may have made it unused when the guard read.
		if still, serr := r.stillLive(r.ctx(), &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: users[0].Name, UID: users[0].UID}}); serr != nil || still {
			return violated("guard-bypassed", "%s of Secret %s was admitted while %s uses it", op.Kind, key, users[0].Name)
		}
	}
	if apierrors.IsForbidden(err) && !refuse {
		return r.guardRefusedUnused(op, key, err)
	}
	// A conflict: someone (the collector, ownership) changed it meanwhile.
	return expect(op.Kind+" of Secret "+key.String(), err, apierrors.IsForbidden, apierrors.IsNotFound, apierrors.IsConflict)
}

// olmOwners is OLM's operator-controller setting the owner of one of the revision's Secrets as it
// does: a JSON merge patch of the whole ownerReferences list, that ClusterObjectSet alone. It is
// exempt from the guard (config/webhook-only), so it drops the references of other users; Secret
// ownership adds them back, and the collector is refused a Secret that a live ClusterObjectSet uses
// until then (the invariants after the step).
func (r *runner) olmOwners(op Op) error {
	name, key, ok := r.seededRef(op)
	if !ok {
		return nil
	}
	cos := &olmv1.ClusterObjectSet{}
	if err := r.admin.Get(r.ctx(), client.ObjectKey{Name: name}, cos); err != nil {
		return client.IgnoreNotFound(err)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": []metav1.OwnerReference{{
		APIVersion: olmv1.GroupVersion.String(), Kind: olmv1.ClusterObjectSetKind, Name: cos.Name, UID: cos.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}}})
	if err != nil {
		return err
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	return expect("OLM's owner patch of Secret "+key.String(), r.olm.Patch(r.ctx(), sec, client.RawPatch(types.MergePatchType, patch)), apierrors.IsNotFound)
}

func (r *runner) drift(op Op) error {
	e := r.entry(r.m.name(op.Owner, op.Rev))
	if e == nil || len(e.objs) == 0 {
		return nil
	}
	o := e.objs[0][0]
	patch := client.RawPatch(types.MergePatchType, []byte(`{"data":{"v":"drifted"},"metadata":{"labels":{"drifted":"true"}}}`))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: o.GetNamespace(), Name: o.GetName()}}
	return expect("editing ConfigMap "+o.GetName(), r.alice.Patch(r.ctx(), cm, patch), apierrors.IsNotFound)
}

// badRefs creates a revision whose refs point at a Secret of its own holding a gzip bomb (a few KB
// that inflate to 10 MiB of `[{},{},...]`, with a valid content key) or a corrupt value.
func (r *runner) badRefs(op Op) error {
	name := r.m.name(op.Owner, op.Rev)
	// Six distinct values (each is parsed once however many refs share it), as in issue 18.
	data := map[string][]byte{}
	var keys []string
	for i := range 6 {
		var stored []byte
		if op.Variant == "bomb" {
			var raw bytes.Buffer
			fmt.Fprintf(&raw, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bomb-%d"},"x":[`, i)
			for raw.Len() < content.MaxDecompressedSize-16 {
				raw.WriteString(`{},`)
			}
			raw.WriteString(`{}]}`)
			var gz bytes.Buffer
			w, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
			_, _ = w.Write(raw.Bytes())
			_ = w.Close()
			stored = gz.Bytes()
		} else {
			stored = []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff, 'n', 'o', 't', ' ', 'g', 'z', 'i', 'p', byte('0' + i)}
		}
		key := content.Key(stored)
		data[key] = stored
		keys = append(keys, key)
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testenv.SystemNamespace, Name: name + "-bad",
		Labels: map[string]string{olmv1.LabelRevisionName: naming.RevisionLabelValue(name)}},
		Type: olmv1.SecretTypeObjectData, Immutable: ptr.To(true), Data: data}
	if err := expect("creating a bad Secret", r.admin.Create(r.ctx(), sec), apierrors.IsAlreadyExists); err != nil {
		return err
	}
	var refs []olmv1.ClusterObjectSetObject
	for _, key := range keys {
		refs = append(refs, builders.Ref(sec.Name, "", key))
	}
	cos := r.revision(op, builders.WithPhase("configuration", refs...))
	if err := expect("creating "+name+" with bad refs", r.admin.Create(r.ctx(), cos)); err != nil {
		return err
	}
	return r.remember(name, &entry{owner: op.Owner, rev: op.Rev, bad: true})
}

// webhookDown stops the manager: the fail-closed webhooks refuse inline ClusterObjectSets and the
// deletion of labelled Secrets, and write nothing; then it starts again.
func (r *runner) webhookDown(op Op) error {
	if err := r.env.stop(); err != nil {
		return err
	}
	name := fmt.Sprintf("%s-down-%d", r.m.run, op.Seed%1000)
	cos := r.inlineCOS(Op{Owner: 0, Rev: 1}, r.m.objects(0, 1, op.Seed, false))
	cos.Name = name
	cos.Annotations = map[string]string{"cos-externalizer.io/externalize": "always"}
	err := r.admin.Create(r.ctx(), cos)
	if err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
		_ = r.admin.Delete(r.ctx(), cos)
		return violated("fail-open", "an inline ClusterObjectSet with no webhook to answer: want a fail-closed refusal, got %v", err)
	}
	r.mu.Lock()
	names := r.m.live(func(e *entry) bool { return len(e.refs) > 0 })
	r.mu.Unlock()
	if len(names) > 0 {
		e := r.entry(names[int(op.Seed%uint64(len(names)))])
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.refs[0].Namespace, Name: e.refs[0].Name}}
		if err := r.alice.Delete(r.ctx(), s); err == nil {
			return violated("fail-open", "deleting Secret %s with no guard to answer was admitted", e.refs[0])
		}
	}
	return r.env.start()
}

// deleteSystemNamespace deletes the system namespace with the manager gone (its Pods go first): the
// namespace controller must empty it whatever the guard, which nobody answers.
func (r *runner) deleteSystemNamespace() error {
	if err := r.env.stop(); err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testenv.SystemNamespace}}
	if err := expect("deleting the system namespace", r.admin.Delete(r.ctx(), ns), apierrors.IsNotFound); err != nil {
		return err
	}
	if err := wait.PollUntilContextTimeout(r.ctx(), pollInterval, deleteBound, true, func(ctx context.Context) (bool, error) {
		err := r.admin.Get(ctx, client.ObjectKeyFromObject(ns), &corev1.Namespace{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		// Unwedge it for the replays that follow (shrinking): without the webhooks the namespace
		// controller finishes.
		if err := testenv.Env.RemoveWebhooks(r.ctx()); err == nil {
			_ = wait.PollUntilContextTimeout(r.ctx(), pollInterval, deleteBound, true, func(ctx context.Context) (bool, error) {
				return apierrors.IsNotFound(r.admin.Get(ctx, client.ObjectKeyFromObject(ns), &corev1.Namespace{})), nil
			})
		}
		_ = r.env.start()
		return violated("namespace-wedged", "the system namespace was not deleted within %s with the manager gone (wedged)", deleteBound)
	}
	return r.env.start()
}

// runGenerated runs steps ops drawn from seed (or until deadline, when set), checking quiescence every
// quiesceEvery steps and at the end, and ends with the deletion of the system namespace.
func (r *runner) runGenerated(seed uint64, steps int, deadline time.Time) error {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	workers := r.env.workers
	// i counts ops (in the concurrent mode, the ops of the rounds, nemesis aside), so STEPS means the
	// same in both modes; quiescence is checked every quiesceEvery ops.
	for i, rounds, unquiesced := 0, 0, 0; deadline.IsZero() && i < steps || !deadline.IsZero() && time.Now().Before(deadline); {
		if workers > 1 {
			rounds++
			ops := generateRound(rng, r.m, workers, rounds, r.env.nemesis)
			n := len(slices.DeleteFunc(slices.Clone(ops), func(o Op) bool { return isNemesis(o.Kind) }))
			i, unquiesced = i+n, unquiesced+n
			r.logf("round %d (ops %d-%d): %s", rounds, i-n+1, i, mustJSON(ops))
			if err := r.replay(ops); err != nil {
				return err
			}
		} else {
			op, ok := generate(rng, r.m)
			if !ok {
				continue
			}
			i, unquiesced = i+1, unquiesced+1
			r.logf("step %d: %s", len(r.done)+1, op)
			if err := r.step(op); err != nil {
				return err
			}
		}
		if unquiesced >= quiesceEvery {
			unquiesced = 0
			r.done = append(r.done, Op{Kind: opQuiesce})
			if err := r.quiesce(); err != nil {
				return fmt.Errorf("at quiescence after step %d: %w", len(r.done), err)
			}
		}
	}
	return r.finish()
}

// finish checks quiescence and deletes the system namespace.
func (r *runner) finish() error {
	r.done = append(r.done, Op{Kind: opQuiesce})
	if err := r.quiesce(); err != nil {
		return fmt.Errorf("at quiescence at the end: %w", err)
	}
	return r.step(Op{Kind: opNSDelete})
}

// replay runs ops as given (a printed failure, or a candidate of shrinking).
func (r *runner) replay(ops []Op) error {
	for i := 0; i < len(ops); i++ {
		op := ops[i]
		if op.Round != 0 {
			j := i
			for j < len(ops) && ops[j].Round == op.Round {
				j++
			}
			if err := r.round(ops[i:j]); err != nil {
				return err
			}
			i = j - 1
			continue
		}
		if op.Kind == opQuiesce {
			r.done = append(r.done, op)
			if err := r.quiesce(); err != nil {
				return fmt.Errorf("at quiescence after step %d: %w", len(r.done), err)
			}
			continue
		}
		if err := r.step(op); err != nil {
			return err
		}
	}
	return nil
}

// opQuiesce marks where a sequence checked quiescence (part of a replayed sequence).
const opQuiesce = "quiesce"

const quiesceEvery = 12

// serverSideApply applies cos as the adversary, taking every field it sets.
func (r *runner) serverSideApply(cos *olmv1.ClusterObjectSet) error {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cos)
	if err != nil {
		return err
	}
	obj := &unstructured.Unstructured{Object: u}
	obj.SetGroupVersionKind(olmv1.GroupVersion.WithKind(olmv1.ClusterObjectSetKind))
	return r.admin.Apply(r.ctx(), client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("adversary"), client.ForceOwnership)
}
