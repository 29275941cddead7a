package validation

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/test/corpus"
)

func generatedLibrary(t testing.TB) *Library {
	t.Helper()
	crd := generatedCRD(t)
	l, err := NewLibrary(crd)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// typed renders errors with their type, path and body, sorted.
func typed(errs field.ErrorList) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, fmt.Sprintf("%s | %s | %s", e.Field, e.Type, e.ErrorBody()))
	}
	sort.Strings(out)
	return out
}

// difference classifies how two error lists differ: "" when they agree, else "paths" when the
// sets of field paths differ, "types" when the paths agree but not the error types, "messages"
// when only the messages differ.
func difference(a, b field.ErrorList) string {
	ta, tb := typed(a), typed(b)
	if strings.Join(ta, "\n") == strings.Join(tb, "\n") {
		return ""
	}
	key := func(errs field.ErrorList, withType bool) string {
		var out []string
		for _, e := range errs {
			k := e.Field
			if withType {
				k += " " + string(e.Type)
			}
			out = append(out, k)
		}
		sort.Strings(out)
		return strings.Join(out, "\n")
	}
	switch {
	case key(a, false) != key(b, false):
		return "paths"
	case key(a, true) != key(b, true):
		return "types"
	default:
		return "messages"
	}
}

// cause names why two error lists differ, from the errors only one side has:
//   - "400": the request fails at decoding; the hand-written validator lists every coercion error,
//     the library (as the API server's message) the first one it meets;
//   - "meta": checks of inline objects' ownerReferences and managedFields, which changed in
//     apimachinery v0.37 (the library's) after kube-apiserver v1.36 (the hand-written one's), and the
//     Skipped error or CEL errors their Required and NotSupported errors add or hide;
//   - "cel-eval": a CEL rule fails to evaluate ("no such key"), an error the API server does not
//     ratchet and the hand-written validator does not produce;
//   - "other".
func cause(hand, library field.ErrorList) string {
	in := func(errs field.ErrorList) map[string]bool {
		m := map[string]bool{}
		for _, l := range typed(errs) {
			m[l] = true
		}
		return m
	}
	h, l := in(hand), in(library)
	var only []string
	for k := range h {
		if !l[k] {
			only = append(only, k)
		}
	}
	for k := range l {
		if !h[k] {
			only = append(only, k)
		}
	}
	decode, meta, eval := true, false, false
	for _, k := range only {
		if l[k] || !(strings.Contains(k, "must be a string") || strings.Contains(k, "cannot unmarshal")) {
			decode = false
		}
		if strings.Contains(k, "ownerReferences") || strings.Contains(k, "managedFields") {
			meta = true
		}
		if strings.Contains(k, "evaluating rule") {
			eval = true
		}
	}
	switch {
	case decode:
		return "400"
	case eval:
		return "cel-eval"
	case meta:
		return "meta"
	default:
		return "other"
	}
}

type agreementCase struct {
	old, new *olmv1.ClusterObjectSet
	set      string
}

// agreementCases: every case of validation_test.go, the differential test's extra and ratcheting
// cases, the fuzz seeds, and n inputs of the fuzz generator from a fixed random seed.
func agreementCases(n int) map[string]agreementCase {
	all := map[string]agreementCase{}
	for name, tc := range corpus.Cases() {
		all["corpus: "+name] = agreementCase{tc.Old, tc.New, "validation_test"}
	}
	for name, tc := range edgeCases() {
		all["edge: "+name] = agreementCase{tc.Old, tc.New, "validation_test"}
	}
	for name, tc := range extraCases() {
		all["extra: "+name] = agreementCase{tc.Old, tc.New, "differential"}
	}
	for name, tc := range ratchetCases() {
		all["ratchet: "+name] = agreementCase{tc.Old, tc.New, "differential"}
	}
	for i, seed := range fuzzSeeds() {
		if old, obj, ok := fuzzObjects(seed); ok {
			all[fmt.Sprintf("fuzz seed %d", i)] = agreementCase{old, obj, "fuzz"}
		}
	}
	r := rand.New(rand.NewPCG(12, 12))
	for i := range n {
		data := make([]byte, 64+r.IntN(192))
		for j := range data {
			data[j] = byte(r.Uint32())
		}
		data[0] &^= 1 // the generator, not JSON
		if old, obj, ok := fuzzObjects(data); ok {
			all[fmt.Sprintf("fuzz generated %d", i)] = agreementCase{old, obj, "fuzz generated"}
		}
	}
	return all
}

// TestLibraryAgreement runs the hand-written validator and the library one over the same cases, on
// create and on update, and counts where field paths, error types or messages differ. It reports;
// it fails only when asked to (-run TestLibraryAgreement -v shows the figures and differences).
func TestLibraryAgreement(t *testing.T) {
	lib := generatedLibrary(t)
	type count struct {
		total, paths, types, messages int
		causes                        map[string]int
	}
	counts := map[string]*count{}
	var lines []string
	for name, tc := range agreementCases(2000) {
		for _, op := range []string{"create", "update"} {
			if op == "update" && tc.old == nil {
				continue
			}
			var hand, library field.ErrorList
			if op == "create" {
				if tc.old != nil && !strings.HasPrefix(tc.set, "fuzz") {
					continue // a case of an update
				}
				hand, library = ValidateCreate(tc.new), lib.ValidateCreate(tc.new)
			} else {
				hand, library = ValidateUpdate(tc.old, tc.new), lib.ValidateUpdate(tc.old, tc.new)
			}
			key := tc.set + " " + op
			c := counts[key]
			if c == nil {
				c = &count{causes: map[string]int{}}
				counts[key] = c
			}
			c.total++
			switch d := difference(hand, library); d {
			case "paths":
				c.paths++
			case "types":
				c.types++
			case "messages":
				c.messages++
			}
			if difference(hand, library) != "" {
				c.causes[cause(hand, library)]++
			}
			if d := difference(hand, library); d != "" && (os.Getenv("AGREEMENT_ALL") != "" || !strings.HasPrefix(tc.set, "fuzz generated")) {
				lines = append(lines, fmt.Sprintf("%s (%s, %s, %s):\n  hand:    %s\n  library: %s", name, op, d, cause(hand, library),
					strings.Join(typed(hand), "\n           "), strings.Join(typed(library), "\n           ")))
			}
		}
	}
	sort.Strings(lines)
	for _, l := range lines {
		t.Log(l)
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		c := counts[k]
		t.Logf("%-28s cases %5d  differ: paths %4d  types %4d  messages %4d  causes %v", k, c.total, c.paths, c.types, c.messages, c.causes)
	}
}
