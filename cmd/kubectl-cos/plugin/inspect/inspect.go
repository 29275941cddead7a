// Package inspect builds the one-screen status of a ClusterObjectSet that kubectl cos inspect prints:
// its conditions and current phase; per phase, each object's kind, namespace and name; per ref, its
// Secret (exists, immutable, type, owner), whether the key's digest verifies, and its inline and stored
// bytes; whether each latched phase digest still matches; recent Events; and the orphaned Secrets of
// that name. It is pure: the caller reads the ClusterObjectSet, the Secrets and the Events, and passes
// what it got or the error it got instead, so each part is reported even when another could not be
// read. Nothing it prints holds object or Secret content.
package inspect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/utils/ptr"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/naming"
	"github.com/cos-externalizer/cos-externalizer/internal/phasedigest"
	"github.com/cos-externalizer/cos-externalizer/internal/secretdata"
)

// Event is one Event about the ClusterObjectSet.
type Event struct {
	Time    time.Time
	Type    string
	Reason  string
	Message string
	Count   int32
}

// SecretRead is a Secret as read, or the error reading it gave.
type SecretRead struct {
	Secret *corev1.Secret
	Err    error
}

// Input is what the caller read.
type Input struct {
	// Name is the ClusterObjectSet's name.
	Name string
	// SystemNamespace is what an empty ref.namespace means.
	SystemNamespace string
	// COS is the ClusterObjectSet, or nil with COSErr.
	COS    *olmv1.ClusterObjectSet
	COSErr error
	// Secrets are the referenced Secrets by "namespace/name".
	Secrets map[string]SecretRead
	// Events are the Events about the ClusterObjectSet, or EventsErr.
	Events    []Event
	EventsErr error
	// Labelled are the object-data Secrets of the system namespace labelled with the
	// ClusterObjectSet's revision name, or LabelledErr.
	Labelled    []corev1.Secret
	LabelledErr error
	// Now is the time of the reading.
	Now time.Time
	// Resolve bounds the content resolved in all, as the reconciler's resolution of one
	// ClusterObjectSet is (secretdata.ResolveMemory.MaxResolvedBytes; 0: content.DefaultMaxResolvedBytes).
	Resolve secretdata.ResolveMemory
	// MaxEvents is how many of the latest Events are shown (0: 10).
	MaxEvents int
}

// Report is the status, ready to render.
type Report struct {
	Name       string
	COSErr     string
	Revision   int64
	State      olmv1.LifecycleState
	Protection olmv1.CollisionProtection
	Created    time.Time
	Deleting   bool
	Labels     map[string]string
	Conditions []metav1.Condition
	// Current is the phase being rolled out, or what is going on instead.
	Current string
	Phases  []Phase
	Secrets []Secret
	// Events are the latest first; EventsErr when they could not be read.
	Events    []Event
	EventsErr string
	// Orphans are labelled Secrets the ClusterObjectSet does not reference; OrphansErr when they could
	// not be listed.
	Orphans    []Orphan
	OrphansErr string
	// Problems counts what needs attention (missing Secrets, mismatched digests, ...).
	Problems int
	now      time.Time
}

// Phase is one phase and its objects.
type Phase struct {
	Name        string
	CompletedAt *time.Time
	// Digest is the latched digest, and DigestCheck whether the content still gives it.
	Digest      string
	DigestCheck string
	Objects     []Object
}

// Object is one member of a phase.
type Object struct {
	// What is "Kind namespace/name", or why it is not known.
	What string
	// Ref is set for a ref, nil for an inline object.
	Ref *Ref
}

// Ref is what a ref points at and what was found there.
type Ref struct {
	Secret, Key string
	// Check is "digest verified", "not a content key: not verified", or the problem.
	Check string
	OK    bool
	// Inline is the decoded (JSON) size, Stored the stored size; Gzip whether it is compressed.
	Inline, Stored int
	Gzip           bool
}

// Secret is one referenced Secret.
type Secret struct {
	Key string // namespace/name
	// Exists, or Err when it could not be read.
	Exists    bool
	Err       string
	Immutable bool
	Type      corev1.SecretType
	// Owner describes the controlling owner; Ours whether it is this ClusterObjectSet.
	Owner string
	Ours  bool
	Keys  int
	Data  int
	Notes []string
}

// Orphan is a labelled Secret the ClusterObjectSet does not reference.
type Orphan struct {
	Key      string
	Created  time.Time
	LastUsed *time.Time
	Owner    string
}

// Build makes the report from what was read.
func Build(in Input) *Report {
	r := &Report{Name: in.Name, now: in.Now}
	if in.COSErr != nil {
		r.COSErr = in.COSErr.Error()
		r.Problems++
	}
	c := in.COS
	if c != nil {
		r.Revision, r.State, r.Protection = c.Spec.Revision, c.Spec.LifecycleState, c.Spec.CollisionProtection
		r.Created, r.Deleting, r.Labels = c.CreationTimestamp.Time, !c.DeletionTimestamp.IsZero(), c.Labels
		r.Conditions = c.Status.Conditions
		r.Current = current(c)
		r.Secrets = secrets(in, c)
		r.Phases = phases(in, c, r)
		for _, s := range r.Secrets {
			r.Problems += len(s.Notes)
			if s.Err != "" {
				r.Problems++
			}
		}
	}
	if in.EventsErr != nil {
		r.EventsErr = in.EventsErr.Error()
	} else {
		r.Events = slices.Clone(in.Events)
		slices.SortStableFunc(r.Events, func(a, b Event) int { return b.Time.Compare(a.Time) })
		n := in.MaxEvents
		if n <= 0 {
			n = 10
		}
		r.Events = r.Events[:min(n, len(r.Events))]
	}
	if in.LabelledErr != nil {
		r.OrphansErr = in.LabelledErr.Error()
	} else {
		r.Orphans = orphans(in, c)
		r.Problems += len(r.Orphans)
	}
	return r
}

// current says which phase is rolling out.
func current(c *olmv1.ClusterObjectSet) string {
	switch {
	case !c.DeletionTimestamp.IsZero():
		return "being deleted: its objects are torn down in reverse phase order"
	case c.Spec.LifecycleState == olmv1.LifecycleStateArchived:
		return "none: the revision is archived"
	case len(c.Spec.Phases) == 0:
		return "none: the revision has no phases yet"
	}
	done := map[string]bool{}
	for _, o := range c.Status.ObservedPhases {
		done[o.Name] = !o.CompletedAt.IsZero()
	}
	for i, p := range c.Spec.Phases {
		if !done[p.Name] {
			return fmt.Sprintf("%s (%d of %d)", p.Name, i+1, len(c.Spec.Phases))
		}
	}
	return fmt.Sprintf("none: all %d phases have rolled out", len(c.Spec.Phases))
}

// secrets reports every referenced Secret, in the order of first reference.
func secrets(in Input, c *olmv1.ClusterObjectSet) []Secret {
	var out []Secret
	for _, key := range c.ReferencedSecrets(in.SystemNamespace) {
		out = append(out, secretReport(key.String(), in.Secrets[key.String()], c, in.SystemNamespace))
	}
	return out
}

func secretReport(key string, read SecretRead, c *olmv1.ClusterObjectSet, systemNamespace string) Secret {
	s := Secret{Key: key}
	switch {
	case apierrors.IsNotFound(read.Err):
		s.Notes = append(s.Notes, "does not exist: the reconciler waits for it (Retrying)")
		return s
	case read.Err != nil:
		s.Err = read.Err.Error()
		return s
	case read.Secret == nil:
		s.Err = "not read"
		return s
	}
	sec := read.Secret
	s.Exists, s.Immutable, s.Type, s.Keys = true, ptr.Deref(sec.Immutable, false), sec.Type, len(sec.Data)
	for k, v := range sec.Data {
		s.Data += len(k) + len(v)
	}
	if ref := metav1.GetControllerOf(sec); ref != nil {
		s.Owner = ref.Kind + " " + ref.Name
		s.Ours = ref.UID == c.UID
		if !s.Ours {
			s.Owner += " (not this one)"
		}
	}
	if !s.Immutable {
		s.Notes = append(s.Notes, "not immutable: the reconciler refuses it (Blocked)")
	}
	if sec.Type != olmv1.SecretTypeObjectData {
		s.Notes = append(s.Notes, fmt.Sprintf("not of type %s", olmv1.SecretTypeObjectData))
	}
	if sec.Namespace == systemNamespace && sec.Type == olmv1.SecretTypeObjectData && s.Owner == "" && c.DeletionTimestamp.IsZero() {
		s.Notes = append(s.Notes, "no owner yet: the reconciler makes the ClusterObjectSet its owner")
	}
	return s
}

// phases reports the objects of every phase, resolving refs within one budget.
func phases(in Input, c *olmv1.ClusterObjectSet, r *Report) []Phase {
	latched := map[string]olmv1.ObservedPhase{}
	for _, o := range c.Status.ObservedPhases {
		latched[o.Name] = o
	}
	budget := in.Resolve.NewBudget()
	defer budget.Release()
	res := secretdata.New(secretdata.Config{Get: readSecrets(in.Secrets), SystemNamespace: in.SystemNamespace, Budget: budget})
	out := make([]Phase, len(c.Spec.Phases))
	for i, p := range c.Spec.Phases {
		ph := Phase{Name: p.Name}
		if l, ok := latched[p.Name]; ok {
			ph.Digest = l.Digest
			if !l.CompletedAt.IsZero() {
				t := l.CompletedAt.Time
				ph.CompletedAt = &t
			}
		}
		resolved := make([]map[string]any, 0, len(p.Objects))
		complete := true
		for _, o := range p.Objects {
			if !o.IsRef() {
				ph.Objects = append(ph.Objects, Object{What: naming.Object(o.Object.Object)})
				resolved = append(resolved, o.Object.Object)
				continue
			}
			ref := &Ref{Secret: res.Key(o.Ref).String(), Key: o.Ref.Key}
			v, err := res.Value(context.Background(), o.Ref)
			describe(ref, v, err)
			obj := v.Object
			if !ref.OK {
				r.Problems++
				complete = false
			}
			what := "(not resolved)"
			if obj != nil {
				what = naming.Object(obj)
				resolved = append(resolved, obj)
			}
			ph.Objects = append(ph.Objects, Object{What: what, Ref: ref})
		}
		switch {
		case ph.Digest == "":
			ph.DigestCheck = "not latched yet"
		case !complete:
			ph.DigestCheck = "not checked: not every object resolved"
		default:
			ok, err := phasedigest.Matches(ph.Digest, p.Name, resolved)
			switch {
			case err != nil:
				ph.DigestCheck = "not checked: " + err.Error()
			case ok:
				ph.DigestCheck = "matches the content"
			default:
				ph.DigestCheck = "DIFFERS from the content: the reconciler blocks this revision"
				r.Problems++
			}
		}
		out[i] = ph
	}
	return out
}

// errNotRead is a referenced Secret the caller did not read.
var errNotRead = errors.New("not read")

// readSecrets reads the Secrets the caller read, for the resolver.
func readSecrets(secrets map[string]SecretRead) secretdata.GetSecretFunc {
	return func(_ context.Context, key types.NamespacedName) (*corev1.Secret, error) {
		read := secrets[key.String()]
		switch {
		case read.Err != nil:
			return nil, read.Err
		case read.Secret == nil:
			return nil, errNotRead
		}
		return read.Secret, nil
	}
}

// budgetReached ends the check of a value that the budget has no room for.
const budgetReached = "; not decoded: the limit of decoded content (--max-resolved-bytes) is reached"

// describe fills a ref's check line and sizes from what the resolver found: the value, or the
// failure err.
func describe(ref *Ref, v secretdata.Value, err error) {
	ref.Stored, ref.Gzip, ref.Inline = v.Stored, v.Gzip, int(v.Decoded)
	verified := "not a content key: not verified"
	if content.IsContentKey(ref.Key) {
		verified = "digest verified" // the resolver verifies before anything else about the value
	}
	var f *secretdata.Failure
	if !errors.As(err, &f) {
		ref.Check, ref.OK = verified, err == nil
		if err != nil {
			ref.Check = "not resolved: " + err.Error()
		}
		return
	}
	switch f.Reason {
	case secretdata.SecretMissing:
		ref.Check = "the Secret does not exist"
	case secretdata.SecretUnreadable:
		ref.Check = "the Secret cannot be read: " + f.Err.Error()
		if errors.Is(f.Err, errNotRead) {
			ref.Check = "Secret not read"
		}
	case secretdata.KeyMissing:
		ref.Check = "key not found in the Secret"
	case secretdata.DigestMismatch:
		ref.Check = "DIGEST MISMATCH: the content does not hash to its key"
	case secretdata.OverBudget, secretdata.Busy:
		ref.Check = verified + budgetReached
	case secretdata.TooLarge:
		ref.Check = fmt.Sprintf("%s; not decoded: over %d bytes", verified, content.MaxDecompressedSize)
	case secretdata.NotAnObject:
		ref.Check = verified + "; not a JSON object"
		if errors.Is(f.Err, secretdata.ErrNotKubernetesObject) {
			ref.Check = verified + "; not a Kubernetes object (no apiVersion or kind)"
		}
	default: // Corrupt; NotImmutable is not asked for: secretReport notes it
		ref.Check = verified + "; cannot be decoded (corrupt)"
	}
}

// orphans are the labelled Secrets that c does not reference (all of them when c does not exist).
func orphans(in Input, c *olmv1.ClusterObjectSet) []Orphan {
	var out []Orphan
	for _, sec := range in.Labelled {
		if c != nil {
			if _, referenced := c.RefTo(sec.Namespace, sec.Name, in.SystemNamespace); referenced {
				continue
			}
		}
		o := Orphan{Key: sec.Namespace + "/" + sec.Name, Created: sec.CreationTimestamp.Time}
		if t, ok := content.LastUsed(sec.Annotations); ok {
			o.LastUsed = &t
		}
		if ref := metav1.GetControllerOf(&sec); ref != nil {
			o.Owner = ref.Kind + " " + ref.Name
		}
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b Orphan) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// Render writes the report for people, in sections.
func Render(w io.Writer, r *Report) error {
	p := &printer{w: w}
	p.f("Name:\t%s\n", r.Name)
	if r.COSErr != "" {
		p.f("ClusterObjectSet:\tcannot be read: %s\n", r.COSErr)
	} else {
		p.f("Revision:\t%d, %s, collision protection %s\n", r.Revision, r.State, r.Protection)
		created := "-"
		if !r.Created.IsZero() {
			created = fmt.Sprintf("%s (%s ago)", r.Created.UTC().Format(time.RFC3339), age(r.now, r.Created))
		}
		p.f("Created:\t%s\n", created)
		if r.Deleting {
			p.f("Deleting:\tyes\n")
		}
		if owner := r.Labels[olmv1.LabelOwnerName]; owner != "" {
			if kind := r.Labels[olmv1.LabelOwnerKind]; kind != "" {
				owner = kind + " " + owner
			}
			p.f("Owner:\t%s\n", owner)
		}
		p.f("Current phase:\t%s\n", r.Current)
		p.flush()
		p.f("\nConditions:\n")
		if len(r.Conditions) == 0 {
			p.f("  none yet: no reconciler has reported on it\n")
		}
		for _, t := range []string{olmv1.ConditionProgressing, olmv1.ConditionAvailable, olmv1.ConditionSucceeded} {
			if c := apimeta.FindStatusCondition(r.Conditions, t); c != nil {
				p.f("  %s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, c.Message)
			}
		}
		p.flush()
		p.f("\nPhases:\n")
		for i, ph := range r.Phases {
			state := "not completed"
			if ph.CompletedAt != nil {
				state = "completed " + ph.CompletedAt.UTC().Format(time.RFC3339)
			}
			p.f("  %d. %s: %s, %s; digest %s\n", i+1, ph.Name, naming.Count(len(ph.Objects), "object"), state, ph.DigestCheck)
			for _, o := range ph.Objects {
				if o.Ref == nil {
					p.f("     %s\tinline\n", o.What)
					continue
				}
				p.f("     %s\t%s key %s\t%s\n", o.What, refSecretName(o.Ref.Secret), short(o.Ref.Key), refDetail(o.Ref))
			}
			p.flush()
		}
		p.f("\nSecrets:\n")
		if len(r.Secrets) == 0 {
			p.f("  none: every object is inline\n")
		}
		for _, s := range r.Secrets {
			p.f("  %s: %s\n", s.Key, secretLine(s))
			for _, n := range s.Notes {
				p.f("    ! %s\n", n)
			}
		}
	}
	p.listHeading("Events", r.EventsErr, len(r.Events))
	for _, e := range r.Events {
		count := ""
		if e.Count > 1 {
			count = fmt.Sprintf(" (x%d)", e.Count)
		}
		p.f("  %s ago\t%s\t%s\t%s%s\n", age(r.now, e.Time), e.Type, e.Reason, e.Message, count)
	}
	p.flush()
	p.listHeading("Orphaned Secrets", r.OrphansErr, len(r.Orphans))
	for _, o := range r.Orphans {
		since := fmt.Sprintf("created %s ago", age(r.now, o.Created))
		if o.LastUsed != nil {
			since += fmt.Sprintf(", last used %s ago", age(r.now, *o.LastUsed))
		}
		owner := "no owner"
		if o.Owner != "" {
			owner = "owner " + o.Owner
		}
		p.f("  %s: not referenced; %s; %s. The orphan sweep deletes it once its grace period has passed since then.\n", o.Key, since, owner)
	}
	p.flush()
	return p.err
}

func refSecretName(key string) string {
	_, name, _ := strings.Cut(key, "/")
	return name
}

func refDetail(r *Ref) string {
	switch {
	case r.Stored == 0 && !r.OK:
		return r.Check
	case r.Inline == 0:
		return fmt.Sprintf("%s; %s stored", r.Check, byteSize(r.Stored))
	}
	gz := ""
	if r.Gzip {
		gz = ", gzip"
	}
	return fmt.Sprintf("%s; %s inline, %s stored%s", r.Check, byteSize(r.Inline), byteSize(r.Stored), gz)
}

func secretLine(s Secret) string {
	switch {
	case s.Err != "":
		return "cannot be read: " + s.Err
	case !s.Exists:
		return "MISSING"
	}
	parts := []string{"exists"}
	if s.Immutable {
		parts = append(parts, "immutable")
	} else {
		parts = append(parts, "MUTABLE")
	}
	parts = append(parts, "type "+string(s.Type))
	switch {
	case s.Owner == "":
		parts = append(parts, "no owner")
	case s.Ours:
		parts = append(parts, "owner "+s.Owner+" (this one)")
	default:
		parts = append(parts, "owner "+s.Owner)
	}
	parts = append(parts, naming.Count(s.Keys, "key"), byteSize(s.Data)+" of data")
	return strings.Join(parts, ", ")
}

// short abbreviates a content key for the phase listing; the full key is in -o yaml.
func short(key string) string {
	if len(key) <= 12 {
		return key
	}
	return key[:10] + "…"
}

func age(now, t time.Time) string {
	if t.IsZero() {
		return "?"
	}
	return duration.HumanDuration(now.Sub(t))
}

func byteSize(n int) string {
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String() + " B"
}

// printer writes through a tabwriter, keeping the first error.
type printer struct {
	w   io.Writer
	tw  *tabwriter.Writer
	err error
}

func (p *printer) f(format string, args ...any) {
	if p.tw == nil {
		p.tw = tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	}
	if _, err := fmt.Fprintf(p.tw, format, args...); err != nil && p.err == nil {
		p.err = err
	}
}

// listHeading prints the heading of a listed section and, when the list could not be read (listErr)
// or is empty, says so in place of the entries.
func (p *printer) listHeading(title, listErr string, entries int) {
	p.f("\n%s:\n", title)
	switch {
	case listErr != "":
		p.f("  cannot be listed: %s\n", listErr)
	case entries == 0:
		p.f("  none\n")
	}
}

func (p *printer) flush() {
	if p.tw != nil {
		if err := p.tw.Flush(); err != nil && p.err == nil {
			p.err = err
		}
		p.tw = nil
	}
}
