package bundle

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/cmd/kubectl-cos/plugin/phasesort"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission/validation"
)

// Options say what ClusterObjectSet Build makes.
type Options struct {
	// Name is metadata.name (required).
	Name string
	// Revision is spec.revision (at least 1).
	Revision int64
	// Namespace is given to namespaced objects that have none. Empty: such an object is an error.
	Namespace string
	// CollisionProtection is spec.collisionProtection; empty means Prevent.
	CollisionProtection olmv1.CollisionProtection
	// ProgressDeadlineMinutes is spec.progressDeadlineMinutes; 0 leaves it unset.
	ProgressDeadlineMinutes int32
	// Probes are spec.progressionProbes (ParseProbe reads them from flags).
	Probes []olmv1.ProgressionProbe
	// Labels and Annotations go to the ClusterObjectSet's metadata.
	Labels, Annotations map[string]string
	// Bounds are the CRD's bounds to validate with; the zero value is the generated CRD's.
	Bounds validation.Bounds
}

// Build turns objects into an inline ClusterObjectSet: namespaced objects without a namespace are
// put into opts.Namespace, the objects are sorted into the producer phase order (keeping input
// order within a phase), phases over olmv1.MaxObjectsPerPhase objects are split, and the result is
// validated with webhook/admission/validation. Problems with the input are *Error values naming the source of
// the object and the field inside it; problems with the options name the flag. All are reported
// together, as Errors. The objects are copied; the input is not changed.
//
// Whether a kind is namespaced is known for the built-in kinds (phasesort.IsClusterScoped) and, for
// custom resources, from the CustomResourceDefinitions among the objects; other kinds are taken as
// namespaced.
func Build(objs []Object, opts Options) (*olmv1.ClusterObjectSet, error) {
	errs := optionErrors(opts)
	if len(objs) == 0 {
		errs = append(errs, ErrNoObjects)
	}
	scopes := crdScopes(objs)
	placed := make([]*unstructured.Unstructured, 0, len(objs))
	sources := map[*unstructured.Unstructured]Source{}
	seen := map[string]Source{}
	for _, o := range objs {
		u := o.Object.DeepCopy()
		md, _ := u.Object["metadata"].(map[string]any)
		if _, isString := md["name"].(string); md == nil || (isString && md["name"] == "") || md["name"] == nil {
			errs = append(errs, &Error{Source: o.Source, Object: errorObject(u), Field: "metadata.name",
				Detail: "Required value: objects of a ClusterObjectSet are applied by name"})
			continue
		}
		gk := u.GroupVersionKind().GroupKind()
		namespaced := !phasesort.IsClusterScoped(gk)
		if s, ok := scopes[gk]; ok {
			namespaced = s
		}
		// A namespace that is there but not a string is validation's to report.
		if _, given := md["namespace"]; namespaced && !given {
			if opts.Namespace == "" {
				errs = append(errs, &Error{Source: o.Source, Object: errorObject(u), Field: "metadata.namespace",
					Detail: fmt.Sprintf("Required value: %s is namespaced; set metadata.namespace or pass --namespace", gk.Kind)})
				continue
			}
			u.SetNamespace(opts.Namespace)
		}
		id := identity(u)
		if first, dup := seen[id]; dup {
			errs = append(errs, &Error{Source: o.Source, Object: errorObject(u),
				Detail: fmt.Sprintf("Duplicate value: the same object as %s", first)})
			continue
		}
		seen[id] = o.Source
		placed = append(placed, u)
		sources[u] = o.Source
	}
	if len(errs) > 0 {
		return nil, errs
	}
	phases, err := phasesort.Sort(placed, olmv1.MaxObjectsPerPhase)
	if err != nil {
		return nil, err
	}
	if len(phases) > olmv1.MaxPhases {
		return nil, fmt.Errorf("the objects need %d phases, more than the %d a ClusterObjectSet may have; split them into several ClusterObjectSets", len(phases), olmv1.MaxPhases)
	}
	cos := &olmv1.ClusterObjectSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: olmv1.GroupVersion.String(), Kind: olmv1.ClusterObjectSetKind},
		ObjectMeta: metav1.ObjectMeta{Name: opts.Name, Labels: opts.Labels, Annotations: opts.Annotations},
		Spec: olmv1.ClusterObjectSetSpec{
			LifecycleState:          olmv1.LifecycleStateActive,
			Revision:                opts.Revision,
			CollisionProtection:     opts.CollisionProtection,
			ProgressDeadlineMinutes: opts.ProgressDeadlineMinutes,
			ProgressionProbes:       opts.Probes,
		},
	}
	if cos.Spec.CollisionProtection == "" {
		cos.Spec.CollisionProtection = olmv1.CollisionProtectionPrevent
	}
	for _, p := range phases {
		members := make([]olmv1.ClusterObjectSetObject, len(p.Objects))
		for i, o := range p.Objects {
			members[i] = olmv1.ClusterObjectSetObject{Object: *o}
		}
		cos.Spec.Phases = append(cos.Spec.Phases, olmv1.ClusterObjectSetPhase{Name: p.Name, Objects: members})
	}
	if ferrs := opts.Bounds.ValidateCreate(cos); len(ferrs) > 0 {
		return nil, located(cos, sources, ferrs)
	}
	return cos, nil
}

// optionErrors checks the options that validation does not see (the name) or reports at a spec path.
func optionErrors(opts Options) Errors {
	if opts.Name == "" {
		return Errors{errors.New("--name: Required value")}
	}
	var errs Errors
	for _, msg := range utilvalidation.IsDNS1123Subdomain(opts.Name) {
		errs = append(errs, fmt.Errorf("--name: Invalid value: %s", msg))
	}
	return errs
}

// identity is what makes two objects the same object in a cluster: group, kind, namespace and name.
func identity(u *unstructured.Unstructured) string {
	gk := u.GroupVersionKind().GroupKind()
	return gk.String() + "|" + u.GetNamespace() + "|" + u.GetName()
}

// crdScopes returns, for the kinds that CustomResourceDefinitions among objs define, whether they are
// namespaced.
func crdScopes(objs []Object) map[schema.GroupKind]bool {
	out := map[schema.GroupKind]bool{}
	for _, o := range objs {
		if o.Object.GroupVersionKind().GroupKind() != (schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}) {
			continue
		}
		group, _, _ := unstructured.NestedString(o.Object.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(o.Object.Object, "spec", "names", "kind")
		scope, _, _ := unstructured.NestedString(o.Object.Object, "spec", "scope")
		if kind != "" {
			out[schema.GroupKind{Group: group, Kind: kind}] = scope != "Cluster"
		}
	}
	return out
}

// objectPath matches the path of a field inside an inline object.
var objectPath = regexp.MustCompile(`^spec\.phases\[(\d+)\]\.objects\[(\d+)\]\.object(?:\.(.*))?$`)

// flagOf names the flag behind a spec field that Build sets from its options.
var flagOf = []struct{ prefix, flag string }{
	{"spec.revision", "--revision"},
	{"spec.collisionProtection", "--collision-protection"},
	{"spec.progressDeadlineMinutes", "--progress-deadline-minutes"},
	{"spec.progressionProbes", "--progression-probe"},
}

// located turns validation errors into errors naming the source of each object, or the flag.
func located(cos *olmv1.ClusterObjectSet, sources map[*unstructured.Unstructured]Source, ferrs field.ErrorList) error {
	// The phase members are copies of the placed objects: find the source by position.
	bySpot := map[[2]int]Source{}
	placed := map[string]Source{}
	for u, s := range sources {
		placed[identity(u)] = s
	}
	for i, p := range cos.Spec.Phases {
		for j := range p.Objects {
			bySpot[[2]int{i, j}] = placed[identity(&p.Objects[j].Object)]
		}
	}
	var errs Errors
	for _, fe := range ferrs {
		path := fe.Field
		// The type and detail without the value: the file and field say where it is.
		detail := fe.Type.String()
		if d := strings.TrimPrefix(fe.Detail, fe.Field+" in body "); d != "" {
			detail += ": " + d
		}
		if m := objectPath.FindStringSubmatch(path); m != nil {
			i, _ := strconv.Atoi(m[1])
			j, _ := strconv.Atoi(m[2])
			obj := &cos.Spec.Phases[i].Objects[j].Object
			errs = append(errs, &Error{Source: bySpot[[2]int{i, j}], Object: errorObject(obj), Field: m[3], Detail: detail})
			continue
		}
		where := path
		for _, f := range flagOf {
			if rest, ok := strings.CutPrefix(path, f.prefix); ok {
				where = f.flag + rest
				break
			}
		}
		if where == "" {
			where = "the ClusterObjectSet"
		}
		errs = append(errs, fmt.Errorf("%s: %s", where, detail))
	}
	return errs
}
