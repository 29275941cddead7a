package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/jsonmergepatch"
	"k8s.io/apimachinery/pkg/util/mergepatch"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/cmd/kubectl-cos/plugin/bundle"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/kube/objectdata"
	"github.com/cos-externalizer/cos-externalizer/internal/secretdata"
	cosadmission "github.com/cos-externalizer/cos-externalizer/webhook/admission"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission/validation"
)

const (
	dryRunNone   = "none"
	dryRunClient = "client"
	dryRunServer = "server"
)

type applyOptions struct {
	*root
	files        resource.FilenameOptions
	serverSide   bool
	force        bool
	fieldManager string
	dryRun       string
	mode         string
	threshold    int
	resolve      secretdata.ResolveMemory
	progress     string
	printFlags   *genericclioptions.PrintFlags
}

func (r *root) applyCommand() *cobra.Command {
	o := &applyOptions{root: r, printFlags: genericclioptions.NewPrintFlags("")}
	cmd := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Apply a ClusterObjectSet of any size, externalizing its objects on the client as the webhook would",
		Long: `Apply a ClusterObjectSet, inline or not, of any size.

Its inline objects are stored in object-data Secrets with exactly the names, keys, labels and
compression the cos-externalizer webhook would use (the same code), then the ClusterObjectSet is sent
with refs in their place: first the Secrets, then the ClusterObjectSet; the reconciler then makes the
ClusterObjectSet the Secrets' owner. A run stopped between the two is completed by running it again;
otherwise the orphan sweep deletes its Secrets after its grace period. It works with the webhook
installed (which passes refs through) and without it.

Applying the same file again writes nothing. A ClusterObjectSet that exists is compared by content:
when its objects are the same, only its mutable fields (lifecycleState, progressDeadlineMinutes,
progressionProbes, labels, annotations) are applied; changed objects are refused, as the API refuses
them (a new revision is a new ClusterObjectSet).

Which ClusterObjectSets are externalized follows the webhook's policy: --externalize (default
oversized: a spec over --externalize-threshold bytes) and the cos-externalizer.io/externalize
annotation; use --externalize=always to externalize every inline object.`,
		Example: `  # Apply a 10 MB bundle that kubectl apply cannot send
  kubectl cos build ./manifests --name my-operator-1 --revision 1 -n my-operator > cos.yaml
  kubectl cos apply -f cos.yaml --server-side`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context()) },
	}
	addFilenameFlags(cmd, &o.files, "holding the ClusterObjectSet(s)")
	cmd.Flags().BoolVar(&o.serverSide, "server-side", false, "Send the ClusterObjectSet with server-side apply (otherwise: create, or a three-way merge patch as client-side kubectl apply sends).")
	cmd.Flags().BoolVar(&o.force, "force-conflicts", false, "With --server-side: take over fields other managers own.")
	cmd.Flags().StringVar(&o.fieldManager, "field-manager", "kubectl-cos", "The field manager of the ClusterObjectSet's fields.")
	cmd.Flags().StringVar(&o.dryRun, "dry-run", dryRunNone, `"none", "server" (check existing Secrets and send the ClusterObjectSet as a server-side dry run; nothing is written) or "client" (only print what would be sent).`)
	cmd.Flags().StringVar(&o.mode, "externalize", string(cosadmission.ModeOversized), "Which ClusterObjectSets to externalize, as the webhook's --externalize: oversized, always or never (the annotation cos-externalizer.io/externalize overrides it).")
	cmd.Flags().IntVar(&o.threshold, "externalize-threshold", cosadmission.DefaultThreshold, "With --externalize=oversized: the serialized spec size above which objects are externalized (the webhook's --externalize-threshold).")
	cmd.Flags().Int64Var(&o.resolve.MaxResolvedBytes, "max-resolved-bytes", content.DefaultMaxResolvedBytes, "The most content read back to compare with a stored ClusterObjectSet (the manager's --max-resolved-bytes).")
	cmd.Flags().StringVar(&o.progress, "progress", "auto", `Show a progress bar of the Secrets on stderr: "auto" (when stderr is a terminal), "always" or "never".`)
	o.printFlags.AddFlags(cmd)
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
	return cmd
}

func (o *applyOptions) run(ctx context.Context) error {
	mode, err := cosadmission.ParseMode(o.mode)
	if err != nil {
		return fmt.Errorf("--externalize: %w", err)
	}
	switch o.dryRun {
	case dryRunNone, dryRunClient, dryRunServer:
	default:
		return fmt.Errorf(`--dry-run: %q is not one of "none", "server", "client"`, o.dryRun)
	}
	if o.force && !o.serverSide {
		return errors.New("--force-conflicts needs --server-side")
	}
	var printer func(obj *unstructured.Unstructured) error
	if o.printFlags.OutputFormat != nil && *o.printFlags.OutputFormat != "" {
		p, err := o.printFlags.ToPrinter()
		if err != nil {
			return err
		}
		printer = func(obj *unstructured.Unstructured) error { return p.PrintObj(obj, o.Out) }
	}
	objs, err := o.clusterObjectSets(o.files)
	if err != nil {
		return err
	}
	cl, err := o.clients()
	if err != nil {
		return err
	}
	bounds := servedBounds(ctx, cl.client)
	for _, src := range objs {
		res, err := o.applyOne(ctx, cl, src, mode, bounds)
		if err != nil {
			return err
		}
		if printer != nil {
			if err := printer(res.obj); err != nil {
				return err
			}
		} else if _, err := fmt.Fprintf(o.Out, "clusterobjectset.%s/%s %s%s\n", olmv1.GroupVersion.Group, res.obj.GetName(), res.op, dryRunSuffix(o.dryRun)); err != nil {
			return err
		}
	}
	return nil
}

func dryRunSuffix(dryRun string) string {
	if dryRun == dryRunNone {
		return ""
	}
	return " (" + dryRun + " dry run)"
}

// servedBounds are the bounds of the CRD the cluster serves, as the webhook validates with; the
// generated ones when it cannot be read.
func servedBounds(ctx context.Context, c client.Client) validation.Bounds {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: "clusterobjectsets." + olmv1.GroupVersion.Group}, crd); err != nil {
		return validation.Bounds{}
	}
	return validation.BoundsFromCRD(crd)
}

// applyResult is what applying one ClusterObjectSet did.
type applyResult struct {
	obj *unstructured.Unstructured
	op  string // created, configured, unchanged
}

// applyOne applies one ClusterObjectSet of the file: validate, compare with the stored one, plan and
// write the Secrets (step 1), send the ClusterObjectSet of refs (step 2).
func (o *applyOptions) applyOne(ctx context.Context, cl *clients, src bundle.Object, mode cosadmission.Mode, bounds validation.Bounds) (*applyResult, error) {
	raw, err := json.Marshal(src.Object.Object)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src.Source, err)
	}
	// The ClusterObjectSet as the webhook would receive it from kubectl, and the size it decides by.
	obj, specSize, err := cosadmission.DecodeCOS(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: not a valid ClusterObjectSet: %w", src.Source, err)
	}
	where := fmt.Sprintf("%s (ClusterObjectSet %s)", src.Source, obj.Name)
	if obj.Name == "" {
		return nil, fmt.Errorf("%s: metadata.name: Required value: kubectl cos apply needs a name (generateName is not supported)", src.Source)
	}
	live, liveU, err := o.live(ctx, cl, obj.Name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if live != nil && !live.DeletionTimestamp.IsZero() {
		return nil, fmt.Errorf("%s: the stored ClusterObjectSet is being deleted; wait until it is gone", where)
	}
	// Step 1: the admission pipeline the webhook runs, as a create or an update of the stored one.
	in := cosadmission.Request{Operation: cosadmission.Create, New: obj, SpecSize: specSize, DryRun: o.dryRun != dryRunNone,
		Bounds: cosadmission.FixedBounds(bounds)}
	if live != nil {
		in.Operation, in.Old = cosadmission.Update, live
	}
	r := o.pipeline(cl, mode).Admit(ctx, in)
	for _, w := range r.Warnings {
		// As kubectl prints the API server's warnings: the webhook's same warnings are printed once.
		cl.config.WarningHandler.HandleWarningHeader(299, "", w)
	}
	if r.Refusal != nil {
		if len(r.Refusal.Errs) > 0 {
			return nil, invalid(where, obj.Name, r.Refusal.Errs)
		}
		return nil, fmt.Errorf("%s: step 1 of 2, the Secrets: %w", where, r.Refusal.Err)
	}
	switch s := r.Stats; {
	case s.Kept && len(s.Healed) == 0:
		notef(o.ErrOut, "kubectl-cos: %s: the stored ClusterObjectSet holds the same objects: no Secret written\n", obj.Name)
	case s.Plan.Secrets > 0:
		written := fmt.Sprintf("%d created, %d already there", s.Created, s.Plan.Secrets-s.Created)
		if s.DryRun {
			written = "nothing written"
		}
		notef(o.ErrOut, "kubectl-cos: %s: %s\n", obj.Name, s.Summary(o.systemNamespace, written))
	case !s.Kept && cosadmission.CountInline(obj.Spec.Phases) > 0:
		notef(o.ErrOut, "kubectl-cos: %s: sent inline: %s\n", obj.Name, s.Decision.Reason)
	}
	// A server-side dry run of the ClusterObjectSet would warn, per ref, that the Secrets step 1 did
	// not write do not exist: said once above ("nothing written"), not once per object.
	unwritten := planned(obj.Spec.Phases, r.Phases, o.systemNamespace)
	obj.Spec.Phases = r.Phases
	if o.hooks.AfterSecrets != nil {
		if err := o.hooks.AfterSecrets(ctx, obj.Name); err != nil {
			return nil, err
		}
	}
	if o.dryRun == dryRunServer && len(unwritten) > 0 {
		cl = withoutWarnings(cl, unwritten)
	}
	res, err := o.send(ctx, cl, obj, live != nil, liveU)
	if err != nil {
		return nil, fmt.Errorf("%s: step 2 of 2, the ClusterObjectSet: %w", where, err)
	}
	return res, nil
}

// live reads the stored ClusterObjectSet (nil when there is none), as sent by the API server and
// decoded as the webhook decodes it.
func (o *applyOptions) live(ctx context.Context, cl *clients, name string) (*olmv1.ClusterObjectSet, *unstructured.Unstructured, error) {
	u, err := cl.dynamic.Resource(cosGVR).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading the stored ClusterObjectSet: %w", err)
	}
	b, err := json.Marshal(u.Object)
	if err != nil {
		return nil, nil, err
	}
	live, _, err := cosadmission.DecodeCOS(b)
	if err != nil {
		return nil, nil, fmt.Errorf("decoding the stored ClusterObjectSet: %w", err)
	}
	return live, u, nil
}

// pipeline is the admission pipeline over the plugin's client (applyStore).
func (o *applyOptions) pipeline(cl *clients, mode cosadmission.Mode) *cosadmission.Pipeline {
	return &cosadmission.Pipeline{
		Store:           applyStore{Writer: &objectdata.Writer{Client: cl.client, Reader: cl.client, Namespace: o.systemNamespace}, o: o},
		SystemNamespace: o.systemNamespace,
		Mode:            mode,
		Threshold:       o.threshold,
		Resolve:         o.resolve,
	}
}

// applyStore is the pipeline's Store: objectdata.Writer with a progress bar of the Secrets it
// writes (or, on a dry run, checks) on a terminal.
type applyStore struct {
	*objectdata.Writer
	o *applyOptions
}

func (s applyStore) Write(ctx context.Context, cosName string, plan *content.Plan, dryRun bool) (int, error) {
	bar := newProgress(s.o.ErrOut, s.o.progress, plan, "writing Secrets")
	w := *s.Writer
	w.Written = bar.written
	n, err := w.Write(ctx, cosName, plan, dryRun)
	bar.done()
	return n, err
}

// send sends the ClusterObjectSet (step 2): by server-side apply, or as client-side kubectl apply
// does (create, or a three-way JSON merge patch against the last-applied annotation; no request when
// there is nothing to change).
func (o *applyOptions) send(ctx context.Context, cl *clients, obj *olmv1.ClusterObjectSet, exists bool, liveU *unstructured.Unstructured) (*applyResult, error) {
	u, err := toUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u.SetAPIVersion(olmv1.GroupVersion.String())
	u.SetKind(olmv1.ClusterObjectSetKind)
	// A file saved from the cluster (kubectl get -o yaml, kubectl cos inspect -o yaml) holds fields
	// the API server sets: they are not the user's to apply.
	u.SetUID("")
	u.SetResourceVersion("")
	u.SetGeneration(0)
	u.SetSelfLink("")
	u.SetManagedFields(nil)
	u.SetDeletionTimestamp(nil)
	u.SetDeletionGracePeriodSeconds(nil)
	var dryRun []string
	if o.dryRun == dryRunServer {
		dryRun = []string{metav1.DryRunAll}
	}
	res := &applyResult{op: "created"}
	if exists {
		res.op = "configured"
	}
	rc := cl.dynamic.Resource(cosGVR)
	switch {
	case o.serverSide:
		if o.dryRun == dryRunClient {
			res.obj = u
			return res, nil
		}
		out, err := rc.Apply(ctx, obj.Name, u, metav1.ApplyOptions{FieldManager: o.fieldManager, Force: o.force, DryRun: dryRun})
		if err != nil {
			return nil, err
		}
		res.obj = out
	default:
		modified, err := withLastApplied(u)
		if err != nil {
			return nil, err
		}
		if o.dryRun == dryRunClient {
			res.obj = u
			return res, nil
		}
		if !exists {
			out, err := rc.Create(ctx, u, metav1.CreateOptions{FieldManager: o.fieldManager, DryRun: dryRun})
			if err != nil {
				return nil, err
			}
			res.obj = out
			break
		}
		current, err := json.Marshal(liveU.Object)
		if err != nil {
			return nil, err
		}
		original := []byte(liveU.GetAnnotations()[cosadmission.LastAppliedAnnotation])
		patch, err := jsonmergepatch.CreateThreeWayJSONMergePatch(original, modified, current,
			mergepatch.RequireKeyUnchanged("apiVersion"), mergepatch.RequireKeyUnchanged("kind"), mergepatch.RequireMetadataKeyUnchanged("name"))
		if err != nil {
			return nil, fmt.Errorf("computing the patch: %w", err)
		}
		if string(patch) == "{}" {
			res.obj, res.op = liveU, "unchanged"
			return res, nil
		}
		out, err := rc.Patch(ctx, obj.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: o.fieldManager, DryRun: dryRun})
		if err != nil {
			return nil, err
		}
		res.obj = out
	}
	if exists && liveU != nil && unchanged(liveU, res.obj) {
		res.op = "unchanged"
	}
	return res, nil
}

// unchanged reports whether an apply left the ClusterObjectSet as it was: the same resourceVersion,
// or (the reconciler may write its status meanwhile) the same generation, labels and annotations.
func unchanged(before, after *unstructured.Unstructured) bool {
	if before.GetResourceVersion() == after.GetResourceVersion() {
		return true
	}
	return before.GetGeneration() == after.GetGeneration() &&
		apiequality.Semantic.DeepEqual(before.GetLabels(), after.GetLabels()) &&
		apiequality.Semantic.DeepEqual(before.GetAnnotations(), after.GetAnnotations())
}

// withLastApplied sets kubectl's last-applied annotation on u to u itself (without the annotation),
// as client-side kubectl apply does, and returns u's JSON. As kubectl's, the annotation's object has
// its other annotations, an empty map when there are none ("annotations":{}): so kubectl cos apply
// after kubectl apply of the same file (whose annotation the webhook rewrote to refs) computes an
// empty patch, and the other way round.
func withLastApplied(u *unstructured.Unstructured) ([]byte, error) {
	annotations := u.GetAnnotations()
	delete(annotations, cosadmission.LastAppliedAnnotation)
	if annotations == nil {
		annotations = map[string]string{}
	}
	u.SetAnnotations(annotations)
	b, err := json.Marshal(u.Object)
	if err != nil {
		return nil, err
	}
	annotations[cosadmission.LastAppliedAnnotation] = string(b) + "\n"
	u.SetAnnotations(annotations)
	return json.Marshal(u.Object)
}

// invalid is the API server's Invalid error for a ClusterObjectSet, after where it was read.
func invalid(where, name string, errs field.ErrorList) error {
	return fmt.Errorf("%s: %w", where, apierrors.NewInvalid(olmv1.GroupVersion.WithKind(olmv1.ClusterObjectSetKind).GroupKind(), name, errs))
}

// planned are the Secrets ("namespace/name") the refs of after name that before's refs do not: those
// step 1 planned, rather than the user's own refs.
func planned(before, after []olmv1.ClusterObjectSetPhase, systemNamespace string) map[string]bool {
	users := map[string]bool{}
	refs := func(phases []olmv1.ClusterObjectSetPhase, f func(key string)) {
		for _, ph := range phases {
			for _, m := range ph.Objects {
				if m.IsRef() {
					f(m.Ref.NamespaceOr(systemNamespace) + "/" + m.Ref.Name)
				}
			}
		}
	}
	refs(before, func(key string) { users[key] = true })
	out := map[string]bool{}
	refs(after, func(key string) {
		if !users[key] {
			out[key] = true
		}
	})
	return out
}

// missingSecretWarning is the webhook's warning about a ref to a Secret that does not exist.
var missingSecretWarning = regexp.MustCompile(`: Secret (\S+) does not exist \(yet\)$`)

// withoutWarnings is cl with a dynamic client that drops the API server's warnings about refs to
// the Secrets in skip not existing, and passes on the others.
func withoutWarnings(cl *clients, skip map[string]bool) *clients {
	cfg := rest.CopyConfig(cl.config)
	next := cl.config.WarningHandler
	cfg.WarningHandler = warningFunc(func(code int, agent, text string) {
		if m := missingSecretWarning.FindStringSubmatch(text); m != nil && skip[m[1]] {
			return
		}
		next.HandleWarningHeader(code, agent, text)
	})
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		// The config made the first dynamic client: keep that one and its warnings.
		return cl
	}
	out := *cl
	out.dynamic = dyn
	return &out
}

// warningFunc is a rest.WarningHandler.
type warningFunc func(code int, agent, text string)

func (f warningFunc) HandleWarningHeader(code int, agent, text string) { f(code, agent, text) }
