package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/kube/objectdata"
	"github.com/cos-externalizer/cos-externalizer/internal/olmlayout"
	"github.com/cos-externalizer/cos-externalizer/internal/secretuse"
	cosadmission "github.com/cos-externalizer/cos-externalizer/webhook/admission"
)

// The Secret guard. sideEffects NoneOnDryRun: before it admits a delete it writes a quarantine copy
// of the Secret (keepCopy), except on a dry run. Its object selector limits it to Secrets carrying the revision-name label, so no
// other Secret in the cluster ever waits on this webhook. On UPDATE the API server matches the
// selector against the old and the new object, so an update that removes the label is guarded too.
// Its matchCondition ExemptConditionName is in config/webhook/matchconditions.yaml.
// +kubebuilder:webhook:path=/validate-v1-secret-object-data,mutating=false,failurePolicy=fail,sideEffects=NoneOnDryRun,groups="",resources=secrets,verbs=update;delete,versions=v1,name=secret-guard.cos-externalizer.io,admissionReviewVersions=v1,timeoutSeconds=10,patch=`{"objectSelector":{"matchExpressions":[{"key":"olm.operatorframework.io/revision-name","operator":"Exists"}]}}`

// SecretGuardName is the secret guard's name in the ValidatingWebhookConfiguration.
const SecretGuardName = "secret-guard.cos-externalizer.io"

// NamespaceControllerUser is the identity of kube-controller-manager's namespace controller, which
// deletes every Secret of a namespace being deleted: it is exempt, so that deleting the system
// namespace never wedges.
const NamespaceControllerUser = "system:serviceaccount:kube-system:namespace-controller"

// OperatorControllerUser is the identity of OLM v1's operator-controller (its release's
// ServiceAccount operator-controller-controller-manager in olmv1-system). It writes object-data
// Secrets of its own, with the same label, and then sets their owner with a JSON merge patch of the
// whole ownerReferences list (its own ClusterObjectSet alone): the guard would refuse that patch
// when it drops another user's reference, and, with no manager answering, every such patch. The
// webhook-only overlay exempts it beside NamespaceControllerUser; its deletes of referenced Secrets
// are then not refused either (it makes none: the garbage collector deletes them, and is not exempt).
const OperatorControllerUser = "system:serviceaccount:" + olmlayout.Namespace + ":" + olmlayout.OperatorControllerDeployment

// ObjectControllerUser is the identity of OLM v1's object-controller (ServiceAccount
// object-controller-controller-manager in olmv1-system), which reconciles ClusterObjectSets in OLM's
// newer layout, a Deployment of its own beside operator-controller. It reads Secrets (uncached, in
// any namespace) and writes none: only ClusterObjectSets' finalizers, lifecycleState and status.
const ObjectControllerUser = "system:serviceaccount:" + olmlayout.Namespace + ":" + olmlayout.ObjectControllerDeployment

// OLMUsers are OLM v1's identities that write ClusterObjectSets, in both of its layouts. The
// check-refs webhook's matchCondition OLMConditionName keeps their requests from reaching it
// (config/webhook/matchconditions.yaml), so OLM never waits on its timeout while no manager answers.
var OLMUsers = []string{OperatorControllerUser, ObjectControllerUser}

// OLMConditionName is the name of that matchCondition.
const OLMConditionName = "not-olm"

// ExemptConditionName is the name of the secret-guard webhook's matchCondition that keeps the exempt
// users (--secret-guard-exempt-users) from reaching the guard at all: the API server never calls it
// for them, so their requests pass also when no manager answers (the namespace controller emptying
// the system namespace after the manager's Pods are gone, or OLM uninstalled beside webhook-only).
const ExemptConditionName = "not-exempt"

// ExemptCondition is the CEL expression of that matchCondition for users (the generated
// config/webhook/manifests.yaml holds it for the flag's default, NamespaceControllerUser).
func ExemptCondition(users []string) string {
	quoted := make([]string, len(users))
	for i, u := range users {
		quoted[i] = "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(u) + "'"
	}
	return "!(request.userInfo.username in [" + strings.Join(quoted, ", ") + "])"
}

// SecretGuard refuses to delete an object-data Secret that a live ClusterObjectSet references, and
// to change its revision-name label or its ownerReferences (which would let the sweep or the
// garbage collector take it). "Live" means it exists and is not being deleted, as the API server has
// it now: the cache only proposes which ClusterObjectSets to look at, and every refusal is
// confirmed with a live read, so a stale cache never refuses anything.
//
// The garbage collector is not exempt: a Secret whose ClusterObjectSet is gone or being deleted is
// not referenced by a live one, so the collector may delete it; a Secret that a re-created
// ClusterObjectSet of the same name references again is refused to the collector until the
// reconciler has made the new ClusterObjectSet its owner.
//
// No live read can see a ClusterObjectSet that is admitted but not stored yet (a refs-only create
// copying the refs of a ClusterObjectSet being deleted, whose check-refs call did not run). So every
// delete the guard admits of an object-data Secret of the system namespace is made undoable first:
// the guard writes the Secret's quarantine copy (objectdata.KeepCopy, as the orphan sweep does before
// its own deletes), and the sweep's restore creates the Secret again if a ClusterObjectSet stored
// within the restore window references it. No copy, no delete: a copy that cannot be written refuses
// the delete with 503, which the garbage collector retries.
type SecretGuard struct {
	// Cache lists the ClusterObjectSets that reference a Secret, to find candidates: the manager's
	// cache, which has objectdata.RefIndex.
	Cache client.Reader
	// APIReader reads ClusterObjectSets uncached, to confirm a refusal, and before a DELETE is
	// admitted, that no live ClusterObjectSet references the Secret.
	APIReader client.Reader
	// Client writes the quarantine copy of a Secret before a delete is admitted.
	Client  client.Writer
	Options Options
	Metrics *Metrics

	// confirm coalesces the uncached Lists of ClusterObjectSets of concurrent requests.
	confirm coalescedList
}

// guardedSecret is what the guard reads of a Secret; data is never decoded.
type guardedSecret struct {
	metav1.ObjectMeta `json:"metadata"`
	Type              corev1.SecretType `json:"type"`
}

// Handle answers a DELETE or UPDATE of a labelled Secret.
func (g *SecretGuard) Handle(ctx context.Context, req admission.Request) admission.Response {
	defer func(start time.Time) {
		g.Metrics.Latency.WithLabelValues("secret-guard", string(req.Operation)).Observe(time.Since(start).Seconds())
	}(time.Now())
	if (req.Operation != admissionv1.Delete && req.Operation != admissionv1.Update) || slices.Contains(g.Options.ExemptUsers, req.UserInfo.Username) {
		return admission.Allowed("")
	}
	old := &guardedSecret{}
	if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the Secret: %w", err))
	}
	if old.Type != olmv1.SecretTypeObjectData {
		return admission.Allowed("")
	}
	// The per-item requests of a DeleteCollection carry no name: the old object has it.
	if old.Name == "" {
		old.Name = req.Name
	}
	if old.Namespace == "" {
		old.Namespace = req.Namespace
	}
	var updated *guardedSecret
	if req.Operation == admissionv1.Update {
		updated = &guardedSecret{}
		if err := json.Unmarshal(req.Object.Raw, updated); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the Secret: %w", err))
		}
		if updated.Labels[olmv1.LabelRevisionName] == old.Labels[olmv1.LabelRevisionName] &&
			apiequality.Semantic.DeepEqual(updated.OwnerReferences, old.OwnerReferences) {
			// Neither who may delete it nor where the cache finds it changes: no read needed.
			return admission.Allowed("")
		}
	}
	users, err := g.liveUsers(ctx, old, req.Operation == admissionv1.Delete)
	if err != nil {
		return admission.Errored(http.StatusServiceUnavailable, err)
	}
	what := "delete it"
	if updated != nil {
		what = secretuse.GuardUpdate(old.Labels[olmv1.LabelRevisionName], updated.Labels[olmv1.LabelRevisionName],
			old.OwnerReferences, updated.OwnerReferences, users)
	}
	if len(users) == 0 || what == "" {
		if req.Operation == admissionv1.Delete && !ptr.Deref(req.DryRun, false) {
			if err := g.keepCopy(ctx, req, old); err != nil {
				return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf("secret %s/%s is kept until a copy of it is written: %w", old.Namespace, old.Name, err))
			}
			if g.Options.BeforeAdmitDelete != nil {
				g.Options.BeforeAdmitDelete(ctx, types.NamespacedName{Namespace: old.Namespace, Name: old.Name})
			}
		}
		return admission.Allowed("")
	}
	g.Metrics.Refusals.WithLabelValues(string(cosadmission.ReasonSecretInUse)).Inc()
	ctrl.LoggerFrom(ctx).Info("refused a change of a referenced Secret", "secret", old.Namespace+"/"+old.Name,
		"operation", req.Operation, "clusterObjectSet", users[0].Name, "user", req.UserInfo.Username)
	return admission.Denied(fmt.Sprintf(
		"secret %s/%s holds objects of ClusterObjectSet %s (%s): it cannot %s while that ClusterObjectSet exists; delete the ClusterObjectSet instead, and its Secrets go with it",
		old.Namespace, old.Name, users[0].Name, users[0].Path, what))
}

// keepCopy writes the quarantine copy of the object-data Secret of the system namespace that req
// deletes (its old object, with its data), so that the sweep's restore can undo the delete.
func (g *SecretGuard) keepCopy(ctx context.Context, req admission.Request, old *guardedSecret) error {
	if old.Namespace != g.Options.SystemNamespace || g.Client == nil {
		return nil // the sweep restores only the system namespace's Secrets: those are ours
	}
	full := &corev1.Secret{}
	if err := json.Unmarshal(req.OldObject.Raw, full); err != nil {
		return fmt.Errorf("decoding the Secret: %w", err)
	}
	full.Name, full.Namespace = old.Name, old.Namespace
	if full.UID == "" {
		return fmt.Errorf("the Secret in the request has no uid")
	}
	if err := objectdata.KeepCopy(ctx, g.Client, g.APIReader, full); err != nil {
		return err
	}
	g.Metrics.GuardCopies.Inc()
	return nil
}

// liveUsers returns the users of the Secret (internal/secretuse): the live ClusterObjectSets that
// reference it, as the API server has them now. Candidates are the ClusterObjectSets the cache says
// reference it, the one its revision-name label names, and those its ownerReferences name; each is
// read live before it counts, so a stale cache never refuses anything. The reads are bounded whatever
// the request carries: at most maxCandidateGets uncached GETs; more candidates are answered by one
// uncached List of ClusterObjectSets instead. On a DELETE (confirm), "no users" is confirmed by that
// List too before it is believed, so that a ClusterObjectSet the cache has not seen yet (a GitOps
// wave that prunes x-1 and creates x-2 with x-1's refs at once) still protects its Secrets.
func (g *SecretGuard) liveUsers(ctx context.Context, sec *guardedSecret, confirm bool) ([]secretuse.Use, error) {
	key := client.ObjectKey{Namespace: sec.Namespace, Name: sec.Name}
	referrers, err := objectdata.Referrers(ctx, g.Cache, key)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(referrers))
	for i := range referrers {
		names[i] = referrers[i].Name
	}
	candidates, many := guardCandidates(names, sec.Labels[olmv1.LabelRevisionName], sec.OwnerReferences, maxCandidateGets)
	if many {
		return g.listUsers(ctx, key)
	}
	var live []olmv1.ClusterObjectSet
	for _, name := range candidates {
		cos := olmv1.ClusterObjectSet{}
		if err := g.APIReader.Get(ctx, client.ObjectKey{Name: name}, &cos); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("reading ClusterObjectSet %s: %w", name, err)
		}
		live = append(live, cos)
	}
	users := secretuse.Users(live, key, g.Options.SystemNamespace)
	if len(users) > 0 || !confirm {
		return users, nil
	}
	return g.listUsers(ctx, key)
}

// listUsers returns the users of the Secret key from an uncached List of every ClusterObjectSet,
// shared with the concurrent requests that wait for one (coalescedList).
func (g *SecretGuard) listUsers(ctx context.Context, key types.NamespacedName) ([]secretuse.Use, error) {
	byKey, err := g.confirm.Do(ctx, key, func(ctx context.Context, keys map[types.NamespacedName]bool) (map[types.NamespacedName][]secretuse.Use, error) {
		return listUsersOf(ctx, g.APIReader, keys, g.Options.SystemNamespace)
	})
	if err != nil {
		return nil, err
	}
	return byKey[key], nil
}
