package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/kube/objectdata"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
)

// refusedMarker is what the reconciler's condition says when the API server refused an apply; it
// keeps the reason and code only, since the API's message may quote the object (controllers'
// sanitize).
const refusedMarker = "the API server refused it"

// inspectFieldManager is the field manager of inspect's dry runs.
const inspectFieldManager = "kubectl-cos-inspect"

// objectCause is why one object of the phase being rolled out is refused.
type objectCause struct {
	// What is "group/version Kind namespace/name".
	What string
	// Why is apiCause's sentence.
	Why string
}

// apiCause describes an API error by its reason, code and names, with its message only when the
// message is one the API server builds from names alone (nothing of the object sent): NotFound and
// AlreadyExists as apierrors builds them, a namespace being terminated, and RBAC's refusal. Invalid
// names its fields and their error types, not the values.
func apiCause(err error) string {
	if apimeta.IsNoMatchError(err) {
		return "not served: " + err.Error()
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return "the request failed: " + err.Error()
	}
	s := status.Status()
	out := fmt.Sprintf("%s (%d)", s.Reason, s.Code)
	d := s.Details
	switch {
	case safeMessage(s):
		return out + ": " + s.Message
	case len(causeFields(d)) > 0:
		return out + ": " + strings.Join(causeFields(d), ", ")
	case d != nil && d.Name != "":
		return fmt.Sprintf("%s: %s %q", out, qualified(d), d.Name)
	}
	return out
}

var (
	terminating = regexp.MustCompile(`^[a-z0-9.-]+ "[a-z0-9.-]+" is forbidden: unable to create new content in namespace [a-z0-9-]+ because it is being terminated$`)
	rbac        = regexp.MustCompile(`^[a-z0-9.-]+ "[a-z0-9.:-]*" is forbidden: User "[^"]+" cannot [a-z]+ resource "[a-z0-9/.-]+" in API group "[a-z0-9.-]*"( in the namespace "[a-z0-9-]+"| at the cluster scope)(: [A-Za-z .,:"/-]*)?$`)
)

// safeMessage says whether the status message holds names only.
func safeMessage(s metav1.Status) bool {
	d := s.Details
	switch s.Reason {
	case metav1.StatusReasonNotFound:
		return d != nil && s.Message == apierrors.NewNotFound(schema.GroupResource{Group: d.Group, Resource: d.Kind}, d.Name).Error()
	case metav1.StatusReasonAlreadyExists:
		return d != nil && s.Message == apierrors.NewAlreadyExists(schema.GroupResource{Group: d.Group, Resource: d.Kind}, d.Name).Error()
	case metav1.StatusReasonForbidden:
		return terminating.MatchString(s.Message) || rbac.MatchString(s.Message)
	}
	return false
}

// causeFields are the fields and error types of the causes (their messages may quote values).
func causeFields(d *metav1.StatusDetails) []string {
	if d == nil {
		return nil
	}
	var fields []string
	for _, c := range d.Causes {
		if c.Field != "" || c.Type != "" {
			fields = append(fields, fmt.Sprintf("%s: %s", c.Field, c.Type))
		}
	}
	return fields
}

func qualified(d *metav1.StatusDetails) string {
	if d.Group == "" {
		return d.Kind
	}
	return d.Kind + "." + d.Group
}

// refused says whether the Progressing condition is the reconciler's retry after an API refusal.
func refused(c *olmv1.ClusterObjectSet) bool {
	p := apimeta.FindStatusCondition(c.Status.Conditions, olmv1.ConditionProgressing)
	return p != nil && p.Reason == olmv1.ReasonRetrying && strings.Contains(p.Message, refusedMarker)
}

// currentPhase is the index of the first phase not completed, -1 when there is none.
func currentPhase(c *olmv1.ClusterObjectSet) int {
	done := map[string]bool{}
	for _, o := range c.Status.ObservedPhases {
		done[o.Name] = !o.CompletedAt.IsZero()
	}
	for i, p := range c.Spec.Phases {
		if !done[p.Name] {
			return i
		}
	}
	return -1
}

// causes finds, when the reconciler retries after the API server refused an object, why: each
// object of the phase being rolled out is sent as a server-side dry run (as the user; nothing is
// written), and the refusals are described by apiCause.
func (o *inspectOptions) causes(ctx context.Context, cl *clients, c *olmv1.ClusterObjectSet) (int, []objectCause, error) {
	i := currentPhase(c)
	if i < 0 {
		return -1, nil, nil
	}
	phases, err := admission.Inline(c.Spec.Phases[i:i+1], objectdata.Resolver(ctx, cl.client, o.systemNamespace, o.resolve))
	if err != nil {
		return i, nil, fmt.Errorf("resolving phase %s: %w", c.Spec.Phases[i].Name, err)
	}
	mapper, err := o.flags.ToRESTMapper()
	if err != nil {
		return i, nil, err
	}
	var out []objectCause
	for _, m := range phases[0].Objects {
		obj := m.Object.DeepCopy()
		gvk := obj.GroupVersionKind()
		what := strings.TrimSpace(fmt.Sprintf("%s %s %s", gvk.GroupVersion(), gvk.Kind, objectName(obj)))
		if err := dryRunApply(ctx, cl, mapper, obj); err != nil {
			out = append(out, objectCause{What: what, Why: apiCause(err)})
		}
	}
	return i, out, nil
}

func objectName(u *unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return u.GetName()
	}
	return u.GetNamespace() + "/" + u.GetName()
}

// dryRunApply sends obj as a forced server-side apply dry run.
func dryRunApply(ctx context.Context, cl *clients, mapper apimeta.RESTMapper, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	obj.SetResourceVersion("")
	obj.SetManagedFields(nil)
	res := cl.dynamic.Resource(mapping.Resource)
	opts := metav1.ApplyOptions{FieldManager: inspectFieldManager, Force: true, DryRun: []string{metav1.DryRunAll}}
	if mapping.Scope.Name() == apimeta.RESTScopeNameNamespace {
		_, err = res.Namespace(obj.GetNamespace()).Apply(ctx, obj.GetName(), obj, opts)
	} else {
		_, err = res.Apply(ctx, obj.GetName(), obj, opts)
	}
	return err
}

// renderCauses prints the causes part of inspect.
func renderCauses(w io.Writer, phase string, objects int, causes []objectCause, err error) error {
	var b strings.Builder
	fmt.Fprintf(&b, "\nCauses (the reconciler retries: the API server refused an object of phase %s; a server-side dry run of its %d objects as you, nothing written):\n", phase, objects)
	switch {
	case err != nil:
		fmt.Fprintf(&b, "  not found: %v\n", err)
	case len(causes) == 0:
		b.WriteString("  every object passes now: the next reconcile should apply them\n")
	}
	for _, c := range causes {
		fmt.Fprintf(&b, "  %s: %s\n", c.What, c.Why)
	}
	_, werr := io.WriteString(w, b.String())
	return werr
}
