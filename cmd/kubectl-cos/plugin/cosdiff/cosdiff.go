// Package cosdiff compares two ClusterObjectSets object by object, on their resolved (inline)
// content, as kubectl cos diff shows them: each object of either side becomes one file, named by its
// group, kind, namespace and name, whose YAML starts with the phase it is in; the ClusterObjectSet's
// own fields (revision, phases and their order, probes, labels) become one more file. An external
// diff program then compares the two folders, as kubectl diff does. It is pure: callers resolve the
// refs and write the files.
package cosdiff

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/naming"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
)

// Status is how an object differs between the two sides.
type Status string

const (
	Added     Status = "added"
	Removed   Status = "removed"
	Changed   Status = "changed"
	Unchanged Status = "unchanged"
)

// Entry is one file of the comparison.
type Entry struct {
	// File is the file name on both sides, e.g. "apps.Deployment.argocd.argocd-server.yaml".
	File string
	// Object describes it, e.g. "Deployment argocd/argocd-server".
	Object string
	Status Status
	// A and B are the file's content on each side; nil where the object is absent.
	A, B []byte
}

// Options change what is shown.
type Options struct {
	// ShowSecret shows the values of Secret objects' data and stringData; by default they are masked
	// as kubectl diff masks them ("***", or "*** (before)" and "*** (after)" where they differ).
	ShowSecret bool
}

// SpecFile is the name of the file holding the ClusterObjectSet's own fields.
const SpecFile = "ClusterObjectSet.yaml"

// Diff compares a and b, whose phases must hold inline objects only (admission.Inline resolves
// refs). Either may be nil: a ClusterObjectSet that does not exist. Entries come sorted by file name,
// the ClusterObjectSet's own file first.
func Diff(a, b *olmv1.ClusterObjectSet, opts Options) ([]Entry, error) {
	as, err := filesOf(a)
	if err != nil {
		return nil, err
	}
	bs, err := filesOf(b)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for n := range as {
		names[n] = true
	}
	for n := range bs {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	slices.SortFunc(sorted, func(x, y string) int {
		switch {
		case x == SpecFile:
			return -1
		case y == SpecFile:
			return 1
		}
		return strings.Compare(x, y)
	})
	out := make([]Entry, 0, len(sorted))
	for _, n := range sorted {
		fa, fb := as[n], bs[n]
		e := Entry{File: n}
		var oa, ob map[string]any
		if fa != nil {
			e.Object, oa = fa.describe, fa.obj
		}
		if fb != nil {
			e.Object, ob = fb.describe, fb.obj
		}
		if !opts.ShowSecret && (fa != nil && fa.secret || fb != nil && fb.secret) {
			oa, ob = mask(oa, ob)
		}
		if fa != nil {
			if e.A, err = render(fa.header, oa); err != nil {
				return nil, err
			}
		}
		if fb != nil {
			if e.B, err = render(fb.header, ob); err != nil {
				return nil, err
			}
		}
		switch {
		case fa == nil:
			e.Status = Added
		case fb == nil:
			e.Status = Removed
		case string(e.A) == string(e.B):
			e.Status = Unchanged
		default:
			e.Status = Changed
		}
		out = append(out, e)
	}
	return out, nil
}

// Summary counts the entries by status, e.g. "2 changed, 1 added, 0 removed, 57 unchanged".
func Summary(entries []Entry) string {
	n := map[Status]int{}
	for _, e := range entries {
		n[e.Status]++
	}
	return fmt.Sprintf("%d changed, %d added, %d removed, %d unchanged", n[Changed], n[Added], n[Removed], n[Unchanged])
}

// file is one side's content of one file before rendering.
type file struct {
	header   string
	describe string
	obj      map[string]any
	secret   bool
}

// filesOf returns the files of one side by name.
func filesOf(c *olmv1.ClusterObjectSet) (map[string]*file, error) {
	out := map[string]*file{}
	if c == nil {
		return out, nil
	}
	out[SpecFile] = &file{describe: "ClusterObjectSet " + c.Name, obj: ownFields(c)}
	for i, p := range c.Spec.Phases {
		for j, o := range p.Objects {
			if o.IsRef() {
				return nil, fmt.Errorf("phase %q object %d is a ref: resolve it first", p.Name, j)
			}
			u := &o.Object
			name := fileName(u)
			if _, dup := out[name]; dup {
				return nil, fmt.Errorf("ClusterObjectSet %s holds %s twice", c.Name, naming.Unstructured(u))
			}
			header := fmt.Sprintf("# phase %d: %s\n", i+1, p.Name)
			if cp := o.CollisionProtection; cp != "" {
				header += "# collisionProtection: " + string(cp) + "\n"
			}
			gk := u.GroupVersionKind().GroupKind()
			out[name] = &file{header: header, describe: naming.Unstructured(u), obj: u.Object, secret: gk.Group == "" && gk.Kind == "Secret"}
		}
	}
	return out, nil
}

// ownFields are the fields of the ClusterObjectSet besides its objects: those that make a revision
// differ (not its name, which differs between revisions anyway).
func ownFields(c *olmv1.ClusterObjectSet) map[string]any {
	phases := make([]any, len(c.Spec.Phases))
	for i, p := range c.Spec.Phases {
		ph := map[string]any{"name": p.Name, "objects": int64(len(p.Objects))}
		if p.CollisionProtection != "" {
			ph["collisionProtection"] = string(p.CollisionProtection)
		}
		phases[i] = ph
	}
	spec := map[string]any{
		"lifecycleState":      string(c.Spec.LifecycleState),
		"revision":            c.Spec.Revision,
		"collisionProtection": string(c.Spec.CollisionProtection),
		"phases":              phases,
	}
	if c.Spec.ProgressDeadlineMinutes != 0 {
		spec["progressDeadlineMinutes"] = int64(c.Spec.ProgressDeadlineMinutes)
	}
	if len(c.Spec.ProgressionProbes) > 0 {
		spec["progressionProbes"] = c.Spec.ProgressionProbes
	}
	md := map[string]any{}
	if len(c.Labels) > 0 {
		md["labels"] = c.Labels
	}
	annotations := map[string]string{}
	for k, v := range c.Annotations {
		if k != admission.LastAppliedAnnotation {
			annotations[k] = v
		}
	}
	if len(annotations) > 0 {
		md["annotations"] = annotations
	}
	out := map[string]any{"spec": spec}
	if len(md) > 0 {
		out["metadata"] = md
	}
	return out
}

// fileName names an object's file by group, kind, namespace and name (not version: a new version of
// the same object is a change of it).
func fileName(u *unstructured.Unstructured) string {
	gk := u.GroupVersionKind().GroupKind()
	parts := []string{gk.Kind}
	if gk.Group != "" {
		parts = []string{gk.Group, gk.Kind}
	}
	if ns := u.GetNamespace(); ns != "" {
		parts = append(parts, ns)
	}
	parts = append(parts, u.GetName())
	return strings.ReplaceAll(strings.Join(parts, "."), "/", "_") + ".yaml"
}

// render writes the header comments and the object as YAML.
func render(header string, obj map[string]any) ([]byte, error) {
	b, err := yaml.Marshal(obj)
	if err != nil {
		return nil, err
	}
	return append([]byte(header), b...), nil
}

// mask replaces the values of Secret data and stringData as kubectl diff does: "***" where both
// sides agree (or only one side has the key), "*** (before)" and "*** (after)" where they differ. The
// objects are copied; their other fields are kept.
func mask(a, b map[string]any) (map[string]any, map[string]any) {
	a, b = copyTop(a), copyTop(b)
	for _, f := range []string{"data", "stringData"} {
		da, _ := a[f].(map[string]any)
		db, _ := b[f].(map[string]any)
		ma, mb := map[string]any{}, map[string]any{}
		for k, va := range da {
			ma[k] = "***"
			if vb, ok := db[k]; ok && fmt.Sprint(vb) != fmt.Sprint(va) {
				ma[k], mb[k] = "*** (before)", "*** (after)"
			}
		}
		for k := range db {
			if _, ok := mb[k]; !ok {
				mb[k] = "***"
			}
		}
		if a != nil && a[f] != nil {
			a[f] = ma
		}
		if b != nil && b[f] != nil {
			b[f] = mb
		}
	}
	return a, b
}

// copyTop copies the top level of an object (only data and stringData are replaced).
func copyTop(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
