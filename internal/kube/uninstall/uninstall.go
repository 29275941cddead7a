// Package uninstall removes cos-externalizer from a cluster and keeps every workload: the one
// uninstaller, run by `cos-externalizer uninstall` (the Helm chart's pre-delete hook runs it with the
// manager's image; hack/uninstall.sh builds it from its checkout, or runs COS_EXTERNALIZER's binary)
// and by `kubectl cos uninstall`. In this order:
//
//  0. the install is found, or checked when named (Locate): the namespace of the Service the webhook
//     configurations call, else of the one manager Deployment; it refuses, changing nothing, when
//     that is not the install named or when another install's manager runs;
//  1. the webhook configurations go (they fail closed: without a manager they refuse writes);
//  2. the manager's Deployment goes, and Run waits until its pods are gone, so that nothing adds a
//     finalizer again or tears anything down;
//  3. our teardown finalizer is released from every ClusterObjectSet, without teardown, where our
//     field manager alone owns it (finalizerowner.Decide); a ClusterObjectSet already being deleted
//     is first switched to orphan deletion, so the garbage collector keeps its objects.
//
// The ClusterObjectSets, their objects and object-data Secrets, the CRD and the namespace stay.
// Running it again does nothing more; it works with the manager already gone and with the namespace
// being deleted. A dry run sends every write as a server-side dry run: the API server checks it and
// changes nothing.
package uninstall

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/finalizerowner"
)

// FieldManager is the field manager of uninstall's writes.
const FieldManager = "cos-externalizer-uninstall"

// passes is how often the finalizers are listed and released before Run gives up on
// ClusterObjectSets that keep changing meanwhile.
const passes = 5

// Options say what to uninstall; the defaults are the names config/ installs.
type Options struct {
	Namespace         string
	Deployment        string
	MutatingWebhook   string
	ValidatingWebhook string
	DryRun            bool
	// Timeout bounds the wait for the manager's pods to be gone.
	Timeout time.Duration
}

// Bind adds the flags of Options to fs, with their defaults.
func (o *Options) Bind(fs *flag.FlagSet) {
	fs.StringVar(&o.Namespace, "namespace", "", "The namespace of the manager's Deployment and of the object-data Secrets. Empty: the namespace of the Service the webhook configurations call, else of the one manager Deployment found. Uninstall refuses a namespace that is not the webhook configurations'.")
	fs.StringVar(&o.Deployment, "deployment", "cos-externalizer", "The manager's Deployment, deleted and waited for until its pods are gone.")
	fs.StringVar(&o.MutatingWebhook, "mutating-webhook", "cos-externalizer", "The MutatingWebhookConfiguration to delete.")
	fs.StringVar(&o.ValidatingWebhook, "validating-webhook", "cos-externalizer", "The ValidatingWebhookConfiguration to delete.")
	fs.BoolVar(&o.DryRun, "dry-run", false, "Say what would be done and change nothing (every write is sent as a server-side dry run).")
	fs.DurationVar(&o.Timeout, "timeout", 5*time.Minute, "How long to wait for the manager's pods to be gone.")
}

// Validate checks the options before anything is sent.
func (o *Options) Validate() error {
	for _, f := range []struct{ name, value string }{
		{"--deployment", o.Deployment},
		{"--mutating-webhook", o.MutatingWebhook}, {"--validating-webhook", o.ValidatingWebhook},
	} {
		if f.value == "" {
			return fmt.Errorf("%s: must not be empty", f.name)
		}
	}
	if o.Timeout <= 0 {
		return fmt.Errorf("--timeout: must be positive, got %s", o.Timeout)
	}
	return nil
}

// Result is what Run did (or, in a dry run, would do).
type Result struct {
	// Released are the ClusterObjectSets whose finalizer was released; Orphaned, those of them that
	// were being deleted and were switched to orphan deletion first.
	Released, Orphaned []string
	// Foreign are the ClusterObjectSets whose finalizer another field manager owns, as "name (owners)";
	// Unowned, those whose finalizer no field manager owns. Both are left.
	Foreign, Unowned []string
}

// runner is one run: the client, the options and where it reports.
type runner struct {
	c   client.Client
	o   Options
	out io.Writer
	// note ends every line of a dry run.
	note string
	// found is what was found of the installs before anything changed.
	found Found
	// orphaning holds the ClusterObjectSets (by UID) this run switched to orphan deletion. The
	// garbage collector removes the orphan finalizer once it has orphaned their objects, and a
	// release that lost the race to it (a conflict) must not switch them again on its next pass:
	// each switch would start that race anew.
	orphaning map[types.UID]bool
}

// Run uninstalls with c, writing one line per step to out.
func Run(ctx context.Context, c client.Client, o Options, out io.Writer) (Result, error) {
	if err := o.Validate(); err != nil {
		return Result{}, err
	}
	r := &runner{c: c, o: o, out: out, orphaning: map[types.UID]bool{}}
	if o.DryRun {
		r.note = " (dry run: nothing is changed)"
	}
	found, err := r.find(ctx)
	if err != nil {
		return Result{}, err
	}
	target, err := Locate(o.Namespace, o.Deployment, found)
	if err != nil {
		return Result{}, err
	}
	r.o.Namespace, r.found = target.Namespace, found
	r.say("uninstalling the install in namespace %s (%s)", target.Namespace, target.Why)
	for _, n := range target.Notes {
		r.say("%s", n)
	}
	terminating, err := r.namespaceTerminating(ctx)
	if err != nil {
		return Result{}, err
	}
	if terminating {
		r.say("namespace %s is being deleted: the object-data Secrets in it go with it (the ClusterObjectSets and their objects stay, but cannot be rolled out again from those Secrets)", r.o.Namespace)
	}
	if err := r.deleteWebhooks(ctx); err != nil {
		return Result{}, err
	}
	if err := r.deleteManager(ctx); err != nil {
		return Result{}, err
	}
	res, err := r.releaseFinalizers(ctx)
	if err != nil {
		return res, err
	}
	r.summary(ctx, res)
	return res, nil
}

func (r *runner) say(format string, args ...any) {
	_, _ = fmt.Fprintf(r.out, format+"\n", args...)
}

// deleteOpts are opts, and a server-side dry run in a dry run.
func (r *runner) deleteOpts(opts ...client.DeleteOption) []client.DeleteOption {
	if r.o.DryRun {
		opts = append(opts, client.DryRunAll)
	}
	return opts
}

// namespaceTerminating reports whether the namespace is being deleted; absent or unreadable is not.
func (r *runner) namespaceTerminating(ctx context.Context) (bool, error) {
	ns := &corev1.Namespace{}
	switch err := r.c.Get(ctx, client.ObjectKey{Name: r.o.Namespace}, ns); {
	case err == nil:
		return ns.Status.Phase == corev1.NamespaceTerminating, nil
	case apierrors.IsNotFound(err), apierrors.IsForbidden(err):
		return false, nil
	default:
		return false, fmt.Errorf("reading namespace %s: %w", r.o.Namespace, err)
	}
}

// find reads, before anything changes, the Services the two webhook configurations call and the
// manager Deployments of every namespace; what it may not read it says, and goes on.
func (r *runner) find(ctx context.Context) (Found, error) {
	var f Found
	services := map[string]bool{}
	for _, obj := range []client.Object{
		&admissionregistrationv1.MutatingWebhookConfiguration{}, &admissionregistrationv1.ValidatingWebhookConfiguration{},
	} {
		name := r.o.MutatingWebhook
		if _, ok := obj.(*admissionregistrationv1.ValidatingWebhookConfiguration); ok {
			name = r.o.ValidatingWebhook
		}
		switch err := r.c.Get(ctx, client.ObjectKey{Name: name}, obj); {
		case apierrors.IsNotFound(err):
			continue
		case apierrors.IsForbidden(err):
			f.WebhooksUnreadable = "forbidden"
			continue
		case err != nil:
			return f, fmt.Errorf("reading the webhook configuration %s: %w", name, err)
		}
		var configs []admissionregistrationv1.WebhookClientConfig
		switch cfg := obj.(type) {
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			for _, w := range cfg.Webhooks {
				configs = append(configs, w.ClientConfig)
			}
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			for _, w := range cfg.Webhooks {
				configs = append(configs, w.ClientConfig)
			}
		}
		for _, c := range configs {
			if c.Service != nil {
				services[c.Service.Namespace+"/"+c.Service.Name] = true
			}
		}
	}
	for s := range services {
		f.WebhookServices = append(f.WebhookServices, s)
	}
	slices.Sort(f.WebhookServices)

	seen := map[string]bool{}
	for _, opt := range []client.ListOption{client.MatchingLabels(ManagerLabels), client.MatchingFields{"metadata.name": r.o.Deployment}} {
		list := &appsv1.DeploymentList{}
		switch err := r.c.List(ctx, list, opt); {
		case apierrors.IsForbidden(err):
			f.ManagersUnlisted = "forbidden"
			continue
		case err != nil:
			return f, fmt.Errorf("listing the manager Deployments: %w", err)
		}
		for _, d := range list.Items {
			m := Manager{Namespace: d.Namespace, Name: d.Name, Replicas: ptr.Deref(d.Spec.Replicas, 1)}
			if !seen[m.String()] {
				seen[m.String()] = true
				f.Managers = append(f.Managers, m)
			}
		}
	}
	slices.SortFunc(f.Managers, func(a, b Manager) int { return strings.Compare(a.String(), b.String()) })
	return f, nil
}

// deleteWebhooks deletes the two webhook configurations; absent ones are done.
func (r *runner) deleteWebhooks(ctx context.Context) error {
	for _, obj := range []client.Object{
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: r.o.MutatingWebhook}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: r.o.ValidatingWebhook}},
	} {
		kind := "mutatingwebhookconfiguration"
		if _, ok := obj.(*admissionregistrationv1.ValidatingWebhookConfiguration); ok {
			kind = "validatingwebhookconfiguration"
		}
		switch err := r.c.Delete(ctx, obj, r.deleteOpts()...); {
		case err == nil:
			r.say("%s %s deleted%s", kind, obj.GetName(), r.note)
		case apierrors.IsNotFound(err):
			r.say("%s %s: already gone", kind, obj.GetName())
		default:
			return fmt.Errorf("deleting %s %s: %w", kind, obj.GetName(), err)
		}
	}
	return nil
}

// deleteManager deletes the manager's Deployment (foreground: its ReplicaSets and pods first) and
// waits until it and its pods are gone.
func (r *runner) deleteManager(ctx context.Context) error {
	what := "deployment " + r.o.Namespace + "/" + r.o.Deployment
	deploy := &appsv1.Deployment{}
	switch err := r.c.Get(ctx, client.ObjectKey{Namespace: r.o.Namespace, Name: r.o.Deployment}, deploy); {
	case apierrors.IsNotFound(err):
		// Locate refused if a manager ran anywhere else.
		if r.found.ManagersUnlisted != "" {
			r.say("%s: not there (other namespaces not searched: %s)", what, r.found.ManagersUnlisted)
		} else {
			r.say("%s: not there, and no manager runs in any namespace", what)
		}
		return nil
	case err != nil:
		return fmt.Errorf("reading %s: %w", what, err)
	}
	selector, err := metav1.LabelSelectorAsSelector(deploy.Spec.Selector)
	if err != nil {
		return fmt.Errorf("%s: spec.selector: %w", what, err)
	}
	if err := r.c.Delete(ctx, deploy, r.deleteOpts(client.PropagationPolicy(metav1.DeletePropagationForeground))...); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s: %w", what, err)
	}
	if r.o.DryRun {
		r.say("%s deleted, and its pods waited for%s", what, r.note)
		return nil
	}
	r.say("%s deleted; waiting for its pods to be gone", what)
	var last string
	err = wait.PollUntilContextTimeout(ctx, time.Second, r.o.Timeout, true, func(ctx context.Context) (bool, error) {
		done, seen, err := r.managerGone(ctx, selector)
		last = seen
		return done, err
	})
	if err != nil {
		return fmt.Errorf("waiting for %s and its pods to be gone (last seen: %s): %w", what, last, err)
	}
	r.say("%s: its pods are gone", what)
	return nil
}

// managerGone reports whether the Deployment and the pods its selector matches are gone, and what
// is left.
func (r *runner) managerGone(ctx context.Context, selector labels.Selector) (bool, string, error) {
	err := r.c.Get(ctx, client.ObjectKey{Namespace: r.o.Namespace, Name: r.o.Deployment}, &appsv1.Deployment{})
	if err == nil {
		return false, "the Deployment", nil
	}
	if !apierrors.IsNotFound(err) {
		return false, "", err
	}
	pods := &metav1.PartialObjectMetadataList{}
	pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	if err := r.c.List(ctx, pods, client.InNamespace(r.o.Namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
		return false, "", err
	}
	return len(pods.Items) == 0, fmt.Sprintf("%d pods", len(pods.Items)), nil
}

// errChanged: a ClusterObjectSet changed between its read and its write; the next pass reads it again.
var errChanged = errors.New("changed meanwhile")

// releaseFinalizers releases our finalizer from every ClusterObjectSet where it is ours alone, in up
// to as many passes over the list as the constant passes says.
func (r *runner) releaseFinalizers(ctx context.Context) (Result, error) {
	var res Result
	for pass := 1; ; pass++ {
		sets := &metav1.PartialObjectMetadataList{}
		sets.SetGroupVersionKind(olmv1.GroupVersion.WithKind("ClusterObjectSetList"))
		if err := r.c.List(ctx, sets); err != nil {
			if apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) {
				r.say("the cluster serves no ClusterObjectSets: no finalizer to release")
				return res, nil
			}
			return res, fmt.Errorf("listing ClusterObjectSets: %w", err)
		}
		res.Foreign, res.Unowned = nil, nil
		changed := false
		for i := range sets.Items {
			switch err := r.release(ctx, &sets.Items[i], &res); {
			case errors.Is(err, errChanged):
				changed = true
			case err != nil:
				return res, err
			}
		}
		if !changed || r.o.DryRun {
			break
		}
		if pass == passes {
			return res, fmt.Errorf("our finalizer is still on some ClusterObjectSets after %d passes (they keep changing); run uninstall again", passes)
		}
		r.say("some ClusterObjectSets changed meanwhile: trying again")
	}
	for _, s := range res.Foreign {
		r.say("clusterobjectset %s: the finalizer is another controller's; left to it", s)
	}
	for _, s := range res.Unowned {
		r.say("clusterobjectset %s: no field manager owns the finalizer (managedFields cleared), left; if no other controller holds it, remove it by hand", s)
	}
	return res, nil
}

// release handles one ClusterObjectSet.
func (r *runner) release(ctx context.Context, cos *metav1.PartialObjectMetadata, res *Result) error {
	d := finalizerowner.Decide(cos.Finalizers, cos.ManagedFields, finalizerowner.Teardown, finalizerowner.OurFieldManager)
	switch d.Action {
	case finalizerowner.Absent:
		return nil
	case finalizerowner.Foreign:
		res.Foreign = append(res.Foreign, fmt.Sprintf("%s (%s)", cos.Name, strings.Join(d.Owners, ", ")))
		return nil
	case finalizerowner.Unowned:
		res.Unowned = append(res.Unowned, cos.Name)
		return nil
	}
	orphaned := r.orphaning[cos.UID]
	if cos.DeletionTimestamp != nil && !orphaned && !slices.Contains(cos.Finalizers, metav1.FinalizerOrphanDependents) {
		// Orphan deletion first: once the finalizers are gone, the garbage collector removes the
		// ClusterObjectSet from its objects' owners instead of deleting them.
		if err := r.c.Delete(ctx, cos, r.deleteOpts(client.PropagationPolicy(metav1.DeletePropagationOrphan))...); err != nil {
			return ignoreGone(fmt.Errorf("clusterobjectset %s: switching to orphan deletion: %w", cos.Name, err))
		}
		orphaned = true
		if !r.o.DryRun {
			r.orphaning[cos.UID] = true
			// The finalizers changed (orphan in place of foregroundDeletion): decide again on the
			// object as it is now.
			if err := r.c.Get(ctx, client.ObjectKeyFromObject(cos), cos); err != nil {
				return ignoreGone(fmt.Errorf("clusterobjectset %s: %w", cos.Name, err))
			}
			if d = finalizerowner.Decide(cos.Finalizers, cos.ManagedFields, finalizerowner.Teardown, finalizerowner.OurFieldManager); d.Action != finalizerowner.Release {
				return errChanged
			}
		}
	}
	patch := client.MergeFromWithOptions(cos.DeepCopy(), client.MergeFromWithOptimisticLock{})
	cos.Finalizers = d.Keep
	opts := []client.PatchOption{client.FieldOwner(FieldManager)}
	if r.o.DryRun {
		opts = append(opts, client.DryRunAll)
	}
	switch err := r.c.Patch(ctx, cos, patch, opts...); {
	case apierrors.IsConflict(err):
		return errChanged
	case err != nil:
		return ignoreGone(fmt.Errorf("clusterobjectset %s: releasing the finalizer: %w", cos.Name, err))
	}
	res.Released = append(res.Released, cos.Name)
	if orphaned {
		res.Orphaned = append(res.Orphaned, cos.Name)
		r.say("clusterobjectset %s is being deleted: its objects are kept (orphan deletion)%s", cos.Name, r.note)
	}
	r.say("clusterobjectset %s: released our finalizer%s", cos.Name, r.note)
	return nil
}

// ignoreGone drops the error of a ClusterObjectSet that went meanwhile: nothing is left to release.
func ignoreGone(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// summary says what was done and what is kept; counts it may not read are left out.
func (r *runner) summary(ctx context.Context, res Result) {
	r.say("done%s: %s released (%d from ClusterObjectSets being deleted, whose objects stay)", r.note, plural(len(res.Released), "finalizer"), len(res.Orphaned))
	kept := "kept: the ClusterObjectSets and the objects they installed, the object-data Secrets in " + r.o.Namespace + ", the CRD and the namespace"
	sets := &metav1.PartialObjectMetadataList{}
	sets.SetGroupVersionKind(olmv1.GroupVersion.WithKind("ClusterObjectSetList"))
	secrets := &metav1.PartialObjectMetadataList{}
	secrets.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if r.c.List(ctx, sets) == nil && r.c.List(ctx, secrets, client.InNamespace(r.o.Namespace), client.HasLabels{olmv1.LabelRevisionName}) == nil {
		live := 0
		for i := range sets.Items {
			if sets.Items[i].DeletionTimestamp == nil {
				live++
			}
		}
		kept = fmt.Sprintf("kept: %s and the objects they installed, %s in %s, the CRD and the namespace", plural(live, "ClusterObjectSet"), plural(len(secrets.Items), "object-data Secret"), r.o.Namespace)
	}
	r.say("%s", kept)
	r.say("left to your tool (helm uninstall, kubectl delete -k, your GitOps tool): the manager's RBAC, Services and certificates")
}
