package sizes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/webhook"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
)

func TestStoredLimitIsTheValidatingWebhooks(t *testing.T) {
	if StoredLimit != webhook.DefaultMaxStoredBytes {
		t.Errorf("StoredLimit %d, the validating webhook's default %d", StoredLimit, webhook.DefaultMaxStoredBytes)
	}
}

// cos returns a ClusterObjectSet of n ConfigMaps of about size bytes each: random words (which
// compress about 2x) when random, else one repeated letter (which compresses to almost nothing).
func cos(n, size int, random bool, annotations map[string]string) *olmv1.ClusterObjectSet {
	r := rand.New(rand.NewPCG(1, 2))
	c := &olmv1.ClusterObjectSet{}
	c.APIVersion, c.Kind, c.Name, c.Annotations = olmv1.GroupVersion.String(), olmv1.ClusterObjectSetKind, "sized", annotations
	c.Spec = olmv1.ClusterObjectSetSpec{LifecycleState: olmv1.LifecycleStateActive, Revision: 1, CollisionProtection: olmv1.CollisionProtectionPrevent}
	var objs []olmv1.ClusterObjectSetObject
	for i := range n {
		var data string
		if random {
			var b strings.Builder
			for b.Len() < size {
				fmt.Fprintf(&b, "%x ", r.Uint64())
			}
			data = b.String()
		} else {
			data = strings.Repeat("a", size)
		}
		objs = append(objs, olmv1.ClusterObjectSetObject{Object: unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": fmt.Sprintf("cm-%d", i), "namespace": "ns"},
			"data":     map[string]any{"blob": data},
		}}})
	}
	for start := 0; start < len(objs); start += 50 {
		c.Spec.Phases = append(c.Spec.Phases, olmv1.ClusterObjectSetPhase{Name: fmt.Sprintf("p%d", start/50), Objects: objs[start:min(start+50, len(objs))]})
	}
	return c
}

func compute(t *testing.T, c *olmv1.ClusterObjectSet) *Report {
	t.Helper()
	raw, err := marshalSent(c)
	if err != nil {
		t.Fatal(err)
	}
	decoded, specSize, err := admission.DecodeCOS(raw)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Compute(decoded, raw, specSize, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestCompute(t *testing.T) {
	type verdicts struct{ Inline, Externalized []string }
	tests := map[string]struct {
		cos      *olmv1.ClusterObjectSet
		verdicts verdicts
		webhook  string
		advice   string
		// clientSide: the advice warns that client-side kubectl apply's body is over 3 MiB.
		clientSide bool
		secrets    int
	}{
		"small: fits everywhere, stays inline": {
			cos:      cos(3, 1000, true, nil),
			verdicts: verdicts{[]string{ok, ok, ok, ok, na}, []string{ok, ok, ok, ok, ok}},
			webhook:  "stores it as written: spec is ",
			advice:   "Apply it inline (kubectl apply --server-side, or kubectl apply): it fits every limit.",
			secrets:  1,
		},
		"small with the always annotation": {
			cos:      cos(3, 1000, true, map[string]string{admission.Annotation: "always"}),
			verdicts: verdicts{[]string{ok, ok, ok, ok, na}, []string{ok, ok, ok, ok, ok}},
			webhook:  "externalizes it: externalization is set to always",
			advice:   "Either works:",
			secrets:  1,
		},
		"300 KB: over the annotation limit, the webhook externalizes": {
			cos:      cos(30, 10_000, true, nil),
			verdicts: verdicts{[]string{ok, ok, ok, over, na}, []string{ok, ok, ok, ok, ok}},
			webhook:  "externalizes it: spec is ",
			advice:   "Either works: kubectl apply --server-side stores it externalized through the webhook; kubectl cos apply does the same on the client and sends less. Without the webhook, client-side kubectl apply fails on its annotation: use --server-side.",
			secrets:  1,
		},
		"1.2 MB: client-side apply's body fits": {
			cos:      cos(24, 50_000, true, nil),
			verdicts: verdicts{[]string{ok, ok, ok, over, na}, []string{ok, ok, ok, ok, ok}},
			webhook:  "externalizes it",
			advice:   "Either works:",
			secrets:  1,
		},
		"2 MB: too large to store inline, client-side apply refused": {
			cos:        cos(40, 50_000, true, nil),
			verdicts:   verdicts{[]string{ok, over, over, over, na}, []string{ok, ok, ok, ok, ok}},
			webhook:    "externalizes it",
			advice:     "Use kubectl cos apply, or kubectl apply --server-side with the webhook installed",
			clientSide: true,
			secrets:    2,
		},
		"4 MB: over the request limit": {
			cos:      cos(80, 50_000, true, nil),
			verdicts: verdicts{[]string{over, over, over, over, na}, []string{ok, ok, ok, ok, ok}},
			webhook:  "externalizes it",
			advice:   "Use kubectl cos apply: the inline form is over the API server's 3 MiB request limit",
			secrets:  3,
		},
		"never annotation: the webhook stores it as written": {
			cos:        cos(40, 50_000, false, map[string]string{admission.Annotation: "never"}),
			verdicts:   verdicts{[]string{ok, over, over, over, na}, []string{ok, ok, ok, ok, ok}},
			webhook:    "stores it as written: externalization is set to never",
			advice:     "Use kubectl cos apply, or kubectl apply --server-side with the webhook installed",
			clientSide: true,
			secrets:    1,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := compute(t, tc.cos)
			var got verdicts
			for _, c := range r.Checks {
				got.Inline = append(got.Inline, c.Inline)
				got.Externalized = append(got.Externalized, c.Externalized)
			}
			if diff := cmp.Diff(tc.verdicts, got); diff != "" {
				t.Errorf("verdicts (-want +got):\n%s", diff)
			}
			if !strings.HasPrefix(r.Webhook, tc.webhook) {
				t.Errorf("webhook: %q, want it to start with %q", r.Webhook, tc.webhook)
			}
			if !strings.HasPrefix(r.Advice, tc.advice) {
				t.Errorf("advice: %q, want it to start with %q", r.Advice, tc.advice)
			}
			const clientSide = "Warning: client-side kubectl apply (Argo CD's default) sends "
			if strings.Contains(r.Advice, clientSide) != tc.clientSide {
				t.Errorf("advice: %q; warns of client-side apply: %v, want %v", r.Advice, !tc.clientSide, tc.clientSide)
			}
			if tc.clientSide && !strings.Contains(r.Advice, byteSize(r.Inline.ClientSideApply)+", the object and its last-applied annotation") {
				t.Errorf("advice: %q does not give the body's size %d", r.Advice, r.Inline.ClientSideApply)
			}
			if least := 2*r.Inline.ClusterObjectSet + len(admission.LastAppliedAnnotation); r.Inline.ClientSideApply < least {
				t.Errorf("client-side apply body %d, want at least twice the object and the annotation's key, %d", r.Inline.ClientSideApply, least)
			}
			if r.Externalized == nil || len(r.Externalized.Secrets) != tc.secrets {
				t.Fatalf("externalized: %+v, want %d Secrets", r.Externalized, tc.secrets)
			}
			if r.Objects != r.InlineObjects || r.Externalized.Total <= r.Externalized.ClusterObjectSet {
				t.Errorf("counts: %+v", r)
			}
			var out bytes.Buffer
			if err := Render(&out, r); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"ClusterObjectSet sized:", "API server request body (3 MiB)", "Advice: " + tc.advice} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("rendered report lacks %q:\n%s", want, out.String())
				}
			}
			if strings.Contains(out.String(), "aaaa") {
				t.Error("the report quotes content")
			}
			if _, err := json.Marshal(r); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestComputeTooLarge(t *testing.T) {
	// 1.2 MB of random hex does not fit a Secret even compressed.
	c := cos(1, 1_900_000, true, nil)
	r := compute(t, c)
	if r.Externalized != nil || !strings.Contains(r.ExternalizeError, "spec.phases[0].objects[0]") ||
		!strings.HasPrefix(r.Advice, "It cannot be stored in any form: ") {
		t.Errorf("report: %+v", r)
	}
	if r.Checks[4].Externalized != na {
		t.Errorf("checks: %+v", r.Checks)
	}
}

func TestGroup(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 3145728: "3,145,728", -5: "-5"} {
		if got := group(n); got != want {
			t.Errorf("group(%d) = %q, want %q", n, got, want)
		}
	}
}
