// Package sizes reports, without a cluster, how large a ClusterObjectSet is in its two forms (inline,
// and externalized into Secrets and a ClusterObjectSet of refs, exactly as the webhook and kubectl cos
// apply would store it), which of the platform's limits each form hits, and how to apply it. It is
// pure: kubectl cos size reads the file and prints the report.
package sizes

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/naming"
	"github.com/cos-externalizer/cos-externalizer/internal/secretdata"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
)

// The platform's limits (docs/design.md).
const (
	// RequestLimit is the API server's limit on a request body, checked before admission.
	RequestLimit = 3 << 20
	// StoredLimit is the largest ClusterObjectSet the storage takes: etcd's 1.5 MiB request limit
	// less room for the metadata the API server adds (the validating webhook's --max-stored-bytes).
	StoredLimit = 1536*1024 - 64*1024
	// AnnotationsLimit is the limit on all annotations of one object, which client-side kubectl apply
	// fills with the whole object (kubectl.kubernetes.io/last-applied-configuration).
	AnnotationsLimit = 256 << 10
	// SecretDataLimit is the API server's limit on the data of one Secret.
	SecretDataLimit = content.MaxBudget
)

// Form is the size of one way to store a ClusterObjectSet, in bytes of compact JSON.
type Form struct {
	// ClusterObjectSet is the ClusterObjectSet as sent and stored.
	ClusterObjectSet int `json:"clusterObjectSet"`
	// LastApplied is the annotation client-side kubectl apply would add (the object and a newline).
	LastApplied int `json:"lastApplied"`
	// ClientSideApply is the body client-side kubectl apply sends to create it: the object with
	// that annotation, which holds the object again as an escaped string.
	ClientSideApply int `json:"clientSideApply"`
	// Secrets are the object-data Secrets (none for the inline form).
	Secrets []Secret `json:"secrets,omitempty"`
	// LargestRequest is the largest single request: the ClusterObjectSet or a Secret.
	LargestRequest int `json:"largestRequest"`
	// Total is the ClusterObjectSet and every Secret.
	Total int `json:"total"`
}

// Secret is the size of one object-data Secret.
type Secret struct {
	Name string `json:"name"`
	// Data is the sum of len(key)+len(value) over its data, what the 1 MiB limit counts.
	Data int `json:"data"`
	// JSON is the Secret as sent (base64 values).
	JSON int `json:"json"`
}

// Check is one limit and whether each form stays within it.
type Check struct {
	Limit string `json:"limit"`
	Bytes int    `json:"bytes"`
	// Inline and Externalized are "ok", "over" or "-" (does not apply).
	Inline       string `json:"inline"`
	Externalized string `json:"externalized"`
	// Why says when the limit matters.
	Why string `json:"why"`
}

// Report is the size report of one ClusterObjectSet.
type Report struct {
	Name          string `json:"name"`
	Phases        int    `json:"phases"`
	Objects       int    `json:"objects"`
	InlineObjects int    `json:"inlineObjects"`
	// Inline is the ClusterObjectSet as written.
	Inline Form `json:"inline"`
	// Externalized is what kubectl cos apply (and the webhook) store; nil when the objects cannot be
	// externalized (ExternalizeError says why).
	Externalized     *Form  `json:"externalized,omitempty"`
	ExternalizeError string `json:"externalizeError,omitempty"`
	// StoredPercent is the externalized total as a percentage of the inline ClusterObjectSet.
	StoredPercent float64 `json:"storedPercent,omitempty"`
	// Webhook is what the webhook would do with the inline form under its default policy, e.g.
	// "externalizes it: spec is 2005093 bytes, over the 131072-byte threshold".
	Webhook string  `json:"webhook"`
	Checks  []Check `json:"checks"`
	Advice  string  `json:"advice"`
}

// Options are the webhook's policy (its defaults when zero) and the system namespace.
type Options struct {
	Mode            admission.Mode
	Threshold       int
	SystemNamespace string
}

// Compute reports on obj, the ClusterObjectSet of a file, whose JSON as a client sends it is raw
// (what admission.DecodeCOS decoded obj from, with specSize). The externalized form is planned with
// content.PlanFor exactly as kubectl cos apply and the webhook plan it.
func Compute(obj *olmv1.ClusterObjectSet, raw []byte, specSize int, opts Options) (*Report, error) {
	if opts.Mode == "" {
		opts.Mode = admission.ModeOversized
	}
	if opts.Threshold == 0 {
		opts.Threshold = admission.DefaultThreshold
	}
	if opts.SystemNamespace == "" {
		opts.SystemNamespace = olmv1.DefaultSystemNamespace
	}
	r := &Report{Name: obj.Name, Phases: len(obj.Spec.Phases), InlineObjects: admission.CountInline(obj.Spec.Phases)}
	for _, p := range obj.Spec.Phases {
		r.Objects += len(p.Objects)
	}
	csa, err := clientSideApply(raw)
	if err != nil {
		return nil, err
	}
	r.Inline = Form{ClusterObjectSet: len(raw), LastApplied: len(raw) + 1, ClientSideApply: csa, LargestRequest: len(raw), Total: len(raw)}

	decision, ferr := admission.Decide(opts.Mode, opts.Threshold, obj.Annotations, specSize, r.InlineObjects)
	switch {
	case ferr != nil:
		r.Webhook = "refuses it: " + ferr.Error()
	case decision.Externalize:
		r.Webhook = "externalizes it: " + decision.Reason
	default:
		r.Webhook = "stores it as written: " + decision.Reason
	}

	plan, err := content.PlanFor(nameOr(obj.Name), admission.PlanInput(obj), content.Options{})
	if err != nil {
		var tooLarge *content.TooLargeError
		if !errors.As(err, &tooLarge) {
			return nil, err
		}
		r.ExternalizeError = admission.TooLargeFieldError(tooLarge).Error()
	} else {
		f, err := externalized(obj, plan, opts.SystemNamespace)
		if err != nil {
			return nil, err
		}
		r.Externalized = f
		if len(raw) > 0 {
			r.StoredPercent = float64(f.Total) * 100 / float64(len(raw))
		}
	}
	r.Checks = checks(r)
	r.Advice = advice(r, decision.Externalize && ferr == nil)
	return r, nil
}

// nameOr gives PlanFor a name when the file has none (it then only affects Secret names).
func nameOr(name string) string {
	if name == "" {
		return "unnamed"
	}
	return name
}

// externalized sizes the stored form of plan.
func externalized(obj *olmv1.ClusterObjectSet, plan *content.Plan, ns string) (*Form, error) {
	refs := obj.DeepCopy()
	refs.Spec.Phases = admission.WithRefs(obj.Spec.Phases, plan, ns)
	refs.Status = olmv1.ClusterObjectSetStatus{}
	b, err := marshalSent(refs)
	if err != nil {
		return nil, err
	}
	csa, err := clientSideApply(b)
	if err != nil {
		return nil, err
	}
	f := &Form{ClusterObjectSet: len(b), LastApplied: len(b) + 1, ClientSideApply: csa, LargestRequest: len(b), Total: len(b)}
	for _, s := range plan.Secrets {
		sec := secretdata.ObjectDataSecret(nameOr(obj.Name), ns, s)
		sb, err := json.Marshal(sec)
		if err != nil {
			return nil, err
		}
		data := 0
		for k, v := range s.Data {
			data += len(k) + len(v)
		}
		f.Secrets = append(f.Secrets, Secret{Name: s.Name, Data: data, JSON: len(sb)})
		f.Total += len(sb)
		f.LargestRequest = max(f.LargestRequest, len(sb))
	}
	return f, nil
}

// clientSideApply is the size of the body client-side kubectl apply sends to create the object
// whose JSON is raw: raw with kubectl's last-applied annotation set to raw and a newline.
func clientSideApply(raw []byte) (int, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return 0, err
	}
	md, _ := m["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		m["metadata"] = md
	}
	annotations, _ := md["annotations"].(map[string]any)
	if annotations == nil {
		annotations = map[string]any{}
		md["annotations"] = annotations
	}
	annotations[admission.LastAppliedAnnotation] = string(raw) + "\n"
	b, err := json.Marshal(m)
	return len(b), err
}

// marshalSent is the JSON a client sends for obj: without the empty status and the zero
// creationTimestamp a Go struct serializes.
func marshalSent(obj *olmv1.ClusterObjectSet) ([]byte, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	return json.Marshal(m)
}

const (
	ok   = "ok"
	over = "OVER"
	na   = "-"
)

func verdict(size, limit int) string {
	if size > limit {
		return over
	}
	return ok
}

// checks compares both forms with each limit.
func checks(r *Report) []Check {
	ext := func(f func(*Form) string) string {
		if r.Externalized == nil {
			return na
		}
		return f(r.Externalized)
	}
	largestSecret := func(f *Form) int {
		n := 0
		for _, s := range f.Secrets {
			n = max(n, s.Data)
		}
		return n
	}
	return []Check{{
		Limit: "API server request body (3 MiB)", Bytes: RequestLimit,
		Inline:       verdict(r.Inline.LargestRequest, RequestLimit),
		Externalized: ext(func(f *Form) string { return verdict(f.LargestRequest, RequestLimit) }),
		Why:          "checked before admission: a larger request never reaches the webhook",
	}, {
		Limit: "client-side kubectl apply body (3 MiB)", Bytes: RequestLimit,
		Inline:       verdict(r.Inline.ClientSideApply, RequestLimit),
		Externalized: ext(func(f *Form) string { return verdict(f.ClientSideApply, RequestLimit) }),
		Why:          "client-side kubectl apply (Argo CD's default) sends the object twice, the second time in its last-applied annotation; over 3 MiB it is refused with 413 before admission",
	}, {
		Limit: "stored object (etcd, ~1.5 MiB)", Bytes: StoredLimit,
		Inline:       verdict(r.Inline.ClusterObjectSet, StoredLimit),
		Externalized: ext(func(f *Form) string { return verdict(f.ClusterObjectSet, StoredLimit) }),
		Why:          "what the API server can store; the webhook stores the externalized form instead when it externalizes",
	}, {
		Limit: "annotations (256 KiB)", Bytes: AnnotationsLimit,
		Inline:       verdict(r.Inline.LastApplied, AnnotationsLimit),
		Externalized: ext(func(f *Form) string { return verdict(f.LastApplied, AnnotationsLimit) }),
		Why:          "client-side kubectl apply keeps the whole object in an annotation; server-side apply does not, and the webhook rewrites it",
	}, {
		Limit: "Secret data (1 MiB)", Bytes: SecretDataLimit,
		Inline:       na,
		Externalized: ext(func(f *Form) string { return verdict(largestSecret(f), SecretDataLimit) }),
		Why:          "each object-data Secret; objects are packed up to 900 KiB and compressed when needed",
	}}
}

// advice says how to apply it, and warns when client-side kubectl apply's body is over the
// request limit while the object alone is not.
func advice(r *Report, webhookExternalizes bool) string {
	s := adviceFor(r, webhookExternalizes)
	if r.Externalized != nil && r.Inline.LargestRequest <= RequestLimit && r.Inline.ClientSideApply > RequestLimit {
		s += fmt.Sprintf(" Warning: client-side kubectl apply (Argo CD's default) sends %s, the object and its last-applied annotation, over the API server's 3 MiB request limit: "+
			"it is refused with 413 Request Entity Too Large before the webhook sees it. Use kubectl apply --server-side (Argo CD: ServerSideApply=true) or kubectl cos apply.",
			byteSize(r.Inline.ClientSideApply))
	}
	return s
}

func adviceFor(r *Report, webhookExternalizes bool) string {
	switch {
	case r.Externalized == nil:
		return "It cannot be stored in any form: " + r.ExternalizeError + "; split that object or leave it out."
	case r.Inline.LargestRequest > RequestLimit:
		return "Use kubectl cos apply: the inline form is over the API server's 3 MiB request limit and can never reach the webhook."
	case r.Inline.ClusterObjectSet > StoredLimit:
		return "Use kubectl cos apply, or kubectl apply --server-side with the webhook installed: the inline form is too large to store as it is. kubectl cos apply externalizes on the client and sends less."
	case webhookExternalizes:
		s := "Either works: kubectl apply --server-side stores it externalized through the webhook; kubectl cos apply does the same on the client and sends less."
		if r.Inline.LastApplied > AnnotationsLimit {
			s += " Without the webhook, client-side kubectl apply fails on its annotation: use --server-side."
		}
		return s
	case r.Inline.LastApplied > AnnotationsLimit:
		return "Apply it inline with kubectl apply --server-side: it fits, but client-side kubectl apply's annotation would be over 256 KiB."
	default:
		return "Apply it inline (kubectl apply --server-side, or kubectl apply): it fits every limit."
	}
}

// Render writes the report for people.
func Render(w io.Writer, r *Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	// The table is written into tw's buffer; the first write error, if any, is kept.
	var err error
	printf := func(w io.Writer, format string, args ...any) {
		if err == nil {
			_, err = fmt.Fprintf(w, format, args...)
		}
	}
	name := r.Name
	if name == "" {
		name = "(no name)"
	}
	printf(tw, "ClusterObjectSet %s: %s in %s (%d inline, %d refs)\n\n", name, naming.Count(r.Objects, "object"), naming.Count(r.Phases, "phase"),
		r.InlineObjects, r.Objects-r.InlineObjects)
	ext := func(f func(*Form) string) string {
		if r.Externalized == nil {
			return na
		}
		return f(r.Externalized)
	}
	printf(tw, "\tinline\texternalized\n")
	printf(tw, "ClusterObjectSet\t%s\t%s\n", byteSize(r.Inline.ClusterObjectSet), ext(func(f *Form) string { return byteSize(f.ClusterObjectSet) }))
	printf(tw, "Secrets\t%s\t%s\n", na, ext(func(f *Form) string {
		data, largest := 0, 0
		for _, s := range f.Secrets {
			data += s.Data
			largest = max(largest, s.Data)
		}
		if len(f.Secrets) == 0 {
			return "none"
		}
		return fmt.Sprintf("%s, %s of data (largest %s)", naming.Count(len(f.Secrets), "Secret"), byteSize(data), byteSize(largest))
	}))
	printf(tw, "total stored\t%s\t%s\n", byteSize(r.Inline.Total), ext(func(f *Form) string {
		return fmt.Sprintf("%s (%.1f%%)", byteSize(f.Total), r.StoredPercent)
	}))
	printf(tw, "largest request\t%s\t%s\n", byteSize(r.Inline.LargestRequest), ext(func(f *Form) string { return byteSize(f.LargestRequest) }))
	printf(tw, "last-applied annotation\t%s\t%s\n", byteSize(r.Inline.LastApplied), ext(func(f *Form) string { return byteSize(f.LastApplied) }))
	printf(tw, "client-side apply body\t%s\t%s\n", byteSize(r.Inline.ClientSideApply), ext(func(f *Form) string { return byteSize(f.ClientSideApply) }))
	printf(tw, "\nlimit\tbytes\tinline\texternalized\n")
	for _, c := range r.Checks {
		printf(tw, "%s\t%s\t%s\t%s\n", c.Limit, group(c.Bytes), c.Inline, c.Externalized)
	}
	if err == nil {
		err = tw.Flush()
	}
	if r.ExternalizeError != "" {
		printf(w, "\nCannot externalize: %s\n", r.ExternalizeError)
	}
	printf(w, "\nWebhook: %s.\nAdvice: %s\n", strings.TrimSuffix(r.Webhook, "."), r.Advice)
	return err
}

// byteSize prints a size with thousands separators and its unit.
func byteSize(n int) string { return group(n) + " B" }

// group prints n with thousands separators.
func group(n int) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return s
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
