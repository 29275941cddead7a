package content

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// layout renders a plan as, for each object, the index of the Secret holding it (-1 for a ref not in
// the plan's Secrets), and checks what holds for every plan: refs resolve to the input objects, keys
// are content keys, no Secret is empty or over budget.
func layout(t testing.TB, in Input, p *Plan, budget int) [][]int {
	t.Helper()
	index := map[string]int{}
	for i, s := range p.Secrets {
		index[s.Name] = i
		size := 0
		for k, v := range s.Data {
			size += len(k) + len(v)
		}
		if len(s.Data) == 0 || size > budget {
			t.Errorf("Secret %d holds %d entries, %d bytes: budget %d", i, len(s.Data), size, budget)
		}
	}
	if len(p.Refs) != len(in.Phases) {
		t.Fatalf("%d phases of refs, want %d", len(p.Refs), len(in.Phases))
	}
	out := make([][]int, len(in.Phases))
	for i, ph := range in.Phases {
		if len(p.Refs[i]) != len(ph.Objects) {
			t.Fatalf("phase %d: %d refs, want %d", i, len(p.Refs[i]), len(ph.Objects))
		}
		for j, o := range ph.Objects {
			ref := p.Refs[i][j]
			s, ok := index[ref.SecretName]
			if !ok {
				out[i] = append(out[i], -1)
				continue
			}
			out[i] = append(out[i], s)
			if o.Object == nil {
				t.Errorf("phase %d object %d: a kept ref points into the plan", i, j)
				continue
			}
			got, err := Resolve(p.Secrets[s].Data[ref.Key], ref.Key, 0)
			if err != nil {
				t.Fatalf("phase %d object %d: %v", i, j, err)
			}
			if !cmp.Equal(o.Object, got) {
				t.Errorf("phase %d object %d resolves differently (-input +resolved):\n%s", i, j, cmp.Diff(o.Object, got))
			}
		}
	}
	return out
}

func TestPlanForPacking(t *testing.T) {
	// Entries of objects of canonical size n take KeyLength+n bytes. Compression is off (-1) unless forced.
	e := func(n int) int { return KeyLength + n }
	tests := map[string]struct {
		budget    int
		in        Input
		want      [][]int
		wantStats Stats
	}{
		"one object exactly at the budget": {
			budget:    e(100),
			in:        phases(inline(sized(100, 1, false))),
			want:      [][]int{{0}},
			wantStats: Stats{Objects: 1, Entries: 1, Secrets: 1, InlineBytes: 100, StoredBytes: 100},
		},
		"two objects exactly at the budget": {
			budget:    2 * e(100),
			in:        phases(inline(sized(100, 1, false), sized(100, 2, false))),
			want:      [][]int{{0, 0}},
			wantStats: Stats{Objects: 2, Entries: 2, Secrets: 1, InlineBytes: 200, StoredBytes: 200},
		},
		"one byte over starts a new Secret": {
			budget:    2*e(100) - 1,
			in:        phases(inline(sized(100, 1, false), sized(100, 2, false))),
			want:      [][]int{{0, 1}},
			wantStats: Stats{Objects: 2, Entries: 2, Secrets: 2, InlineBytes: 200, StoredBytes: 200},
		},
		"phases share Secrets": {
			budget:    3 * e(100),
			in:        phases(inline(sized(100, 1, false), sized(100, 2, false)), inline(sized(100, 3, false), sized(100, 4, false))),
			want:      [][]int{{0, 0}, {0, 1}},
			wantStats: Stats{Objects: 4, Entries: 4, Secrets: 2, InlineBytes: 400, StoredBytes: 400},
		},
		"a full Secret is closed: no going back to fill it": {
			budget:    e(100) + e(60),
			in:        phases(inline(sized(100, 1, false), sized(100, 2, false), sized(60, 3, false), sized(60, 4, false))),
			want:      [][]int{{0, 1, 1, 2}},
			wantStats: Stats{Objects: 4, Entries: 4, Secrets: 3, InlineBytes: 320, StoredBytes: 320},
		},
		"empty phases": {
			budget:    e(100),
			in:        phases(nil, inline(sized(100, 1, false)), nil),
			want:      [][]int{nil, {0}, nil},
			wantStats: Stats{Objects: 1, Entries: 1, Secrets: 1, InlineBytes: 100, StoredBytes: 100},
		},
		"no phases": {
			budget: e(100),
			in:     Input{},
			want:   [][]int{},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p, err := PlanFor("cos", tc.in, Options{Budget: tc.budget, CompressAbove: -1})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, layout(t, tc.in, p, tc.budget)); diff != "" {
				t.Errorf("layout (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantStats, p.Stats); diff != "" {
				t.Errorf("stats (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlanForDedupe(t *testing.T) {
	a, b := object("ConfigMap", "ns", "a"), object("ConfigMap", "ns", "b")
	aAgain := map[string]any{"metadata": map[string]any{"namespace": "ns", "name": "a"}, "kind": "ConfigMap", "apiVersion": "v1"}
	in := phases(inline(a, b, a), inline(aAgain))
	p, err := PlanFor("cos", in, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([][]int{{0, 0, 0}, {0}}, layout(t, in, p, DefaultBudget)); diff != "" {
		t.Errorf("layout (-want +got):\n%s", diff)
	}
	refA := p.Refs[0][0]
	if diff := cmp.Diff([]RefOut{refA, refA}, []RefOut{p.Refs[0][2], p.Refs[1][0]}); diff != "" {
		t.Errorf("equal objects have different refs (-want +got):\n%s", diff)
	}
	if refA == p.Refs[0][1] {
		t.Errorf("different objects share the ref %v", refA)
	}
	ca, cb := mustCanonical(t, a), mustCanonical(t, b)
	want := Stats{Objects: 4, Entries: 2, Secrets: 1, InlineBytes: int64(3*len(ca) + len(cb)), StoredBytes: int64(len(ca) + len(cb))}
	if diff := cmp.Diff(want, p.Stats); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}
}

// TestPlanForDedupeAcrossSecrets checks that a duplicate points at the Secret holding the first copy,
// even when that Secret is already closed.
func TestPlanForDedupeAcrossSecrets(t *testing.T) {
	x, y := sized(100, 1, false), sized(100, 2, false)
	in := phases(inline(x, y, x))
	budget := KeyLength + 100
	p, err := PlanFor("cos", in, Options{Budget: budget, CompressAbove: -1})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([][]int{{0, 1, 0}}, layout(t, in, p, budget)); diff != "" {
		t.Errorf("layout (-want +got):\n%s", diff)
	}
}

func TestPlanForKeep(t *testing.T) {
	kept1 := &RefOut{SecretName: "hand-made", Key: "deployment"}
	kept2 := &RefOut{SecretName: "cos-0123456789abcdef", Key: Key([]byte("{}"))}
	tests := map[string]struct {
		in          Input
		wantLayout  [][]int
		wantSecrets int
	}{
		"only kept refs": {
			in:         phases([]ObjectInput{{Keep: kept1}}, []ObjectInput{{Keep: kept2}}),
			wantLayout: [][]int{{-1}, {-1}},
		},
		"mixed": {
			in:          phases([]ObjectInput{{Keep: kept1}, {Object: object("ServiceAccount", "ns", "sa")}}, []ObjectInput{{Keep: kept2}}),
			wantLayout:  [][]int{{-1, 0}, {-1}},
			wantSecrets: 1,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p, err := PlanFor("cos", tc.in, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantLayout, layout(t, tc.in, p, DefaultBudget)); diff != "" {
				t.Errorf("layout (-want +got):\n%s", diff)
			}
			if len(p.Secrets) != tc.wantSecrets {
				t.Errorf("%d Secrets, want %d", len(p.Secrets), tc.wantSecrets)
			}
			for i, ph := range tc.in.Phases {
				for j, o := range ph.Objects {
					if o.Keep != nil {
						if diff := cmp.Diff(*o.Keep, p.Refs[i][j]); diff != "" {
							t.Errorf("phase %d object %d: kept ref changed (-want +got):\n%s", i, j, diff)
						}
					}
				}
			}
		})
	}
}

func TestPlanForCompression(t *testing.T) {
	tests := map[string]struct {
		compressAbove int
		budget        int
		obj           map[string]any
		want          bool // stored compressed
	}{
		"default: small object stays plain":      {0, 0, sized(DefaultCompressAbove-1, 1, true), false},
		"default: object at the threshold":       {0, 0, sized(DefaultCompressAbove, 1, true), true},
		"default: random base64 still pays":      {0, 0, sized(4096, 1, false), true},
		"threshold 1: tiny object does not pay":  {1, 0, object("ConfigMap", "", "c"), false},
		"off: large object stays plain":          {-1, 0, sized(100_000, 1, true), false},
		"off: over the budget is compressed":     {-1, 1000, sized(2000, 1, true), true},
		"off: at the budget stays plain":         {-1, 1000, sized(1000-KeyLength, 1, true), false},
		"over the budget, compression is forced": {1 << 30, 1000, sized(2000, 1, true), true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in := phases(inline(tc.obj))
			p, err := PlanFor("cos", in, Options{Budget: tc.budget, CompressAbove: tc.compressAbove})
			if err != nil {
				t.Fatal(err)
			}
			budget := tc.budget
			if budget == 0 {
				budget = DefaultBudget
			}
			layout(t, in, p, budget)
			ref := p.Refs[0][0]
			stored := p.Secrets[0].Data[ref.Key]
			if got := IsGzip(stored); got != tc.want {
				t.Errorf("stored compressed = %v, want %v (%d bytes)", got, tc.want, len(stored))
			}
			if got := p.Stats.Compressed == 1; got != tc.want {
				t.Errorf("Stats.Compressed = %d", p.Stats.Compressed)
			}
			if tc.want {
				if diff := cmp.Diff(Gzip(mustCanonical(t, tc.obj)), stored); diff != "" {
					t.Errorf("stored bytes are not Gzip(Canonical):\n%s", diff)
				}
			}
		})
	}
}

func TestPlanForErrors(t *testing.T) {
	big := map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "big", "namespace": "ns"},
		"data":     map[string]any{"x": secretMarker + sized(3000, 7, false)["d"].(string)},
	}
	bigC := mustCanonical(t, big)
	clusterBig := map[string]any{"kind": "Namespace", "metadata": map[string]any{"name": "huge"}, "x": sized(3000, 8, false)["d"]}
	clusterBigC := mustCanonical(t, clusterBig)
	ok := object("ServiceAccount", "ns", "sa")
	tests := map[string]struct {
		cosName string
		in      Input
		opts    Options
		want    error
	}{
		"both object and keep": {
			cosName: "cos",
			in:      phases(inline(ok), []ObjectInput{{Object: ok, Keep: &RefOut{SecretName: "s", Key: "k"}}}),
			want:    &ObjectError{Phase: "p1", PhaseIndex: 1, Index: 0, Err: ErrNotExactlyOne},
		},
		"neither object nor keep": {
			cosName: "cos",
			in:      phases(inline(ok, ok), []ObjectInput{{Keep: &RefOut{}}, {}}),
			want:    &ObjectError{Phase: "p1", PhaseIndex: 1, Index: 1, Err: ErrNotExactlyOne},
		},
		"too large, namespaced": {
			cosName: "cos",
			in:      phases(inline(ok), inline(ok, ok, big)),
			opts:    Options{Budget: 1000},
			want: &TooLargeError{Phase: "p1", PhaseIndex: 1, Index: 2, Kind: "ConfigMap", Namespace: "ns", Name: "big",
				Size: len(bigC), CompressedSize: len(Gzip(bigC)), Budget: 1000},
		},
		"too large, cluster-scoped": {
			cosName: "cos",
			in:      phases(inline(clusterBig)),
			opts:    Options{Budget: 2000, CompressAbove: -1},
			want: &TooLargeError{Phase: "p0", Kind: "Namespace", Name: "huge",
				Size: len(clusterBigC), CompressedSize: len(Gzip(clusterBigC)), Budget: 2000},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p, err := PlanFor(tc.cosName, tc.in, tc.opts)
			if err == nil {
				t.Fatalf("PlanFor = %d Secrets, want an error", len(p.Secrets))
			}
			switch want := tc.want.(type) {
			case *TooLargeError:
				var got *TooLargeError
				if !errors.As(err, &got) {
					t.Fatalf("error %v, want a *TooLargeError", err)
				}
				if diff := cmp.Diff(*want, *got); diff != "" {
					t.Errorf("error (-want +got):\n%s", diff)
				}
			case *ObjectError:
				var got *ObjectError
				if !errors.As(err, &got) {
					t.Fatalf("error %v, want an *ObjectError", err)
				}
				if diff := cmp.Diff(*want, *got, cmpopts.EquateErrors()); diff != "" {
					t.Errorf("error (-want +got):\n%s", diff)
				}
			}
			if strings.Contains(err.Error(), secretMarker) {
				t.Errorf("error contains content: %v", err)
			}
		})
	}
}

func TestPlanForErrorMessages(t *testing.T) {
	tests := map[string]struct {
		err  error
		want string
	}{
		"too large": {
			&TooLargeError{Phase: "crds", PhaseIndex: 5, Index: 2, Kind: "CustomResourceDefinition", Name: "x.example.com", Size: 5_000_000, CompressedSize: 1_000_000, Budget: DefaultBudget},
			`phase "crds" object 2 (CustomResourceDefinition x.example.com) is too large to store: 5000000 bytes of JSON, 1000000 gzip-compressed; one Secret holds at most 921557 bytes of object, 921600 with its key`,
		},
		"too large, namespaced": {
			&TooLargeError{Phase: "deploy", Kind: "ConfigMap", Namespace: "ns", Name: "c", Size: 3, CompressedSize: 2, Budget: 45},
			`phase "deploy" object 0 (ConfigMap ns/c) is too large to store: 3 bytes of JSON, 2 gzip-compressed; one Secret holds at most 2 bytes of object, 45 with its key`,
		},
		"object": {
			&ObjectError{Phase: "deploy", Index: 4, Err: ErrNotExactlyOne},
			`phase "deploy" object 4: exactly one of object or keep must be set`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.err.Error()); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlanForInvalid(t *testing.T) {
	in := phases(inline(object("ServiceAccount", "ns", "sa")))
	tests := map[string]struct {
		cosName string
		in      Input
		opts    Options
	}{
		"empty name":      {"", in, Options{}},
		"negative budget": {"cos", in, Options{Budget: -1}},
		"budget too big":  {"cos", in, Options{Budget: MaxBudget + 1}},
		"NaN":             {"cos", phases(inline(map[string]any{"f": math.NaN()})), Options{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if p, err := PlanFor(tc.cosName, tc.in, tc.opts); err == nil {
				t.Errorf("PlanFor = %d Secrets, want an error", len(p.Secrets))
			}
		})
	}
	_, err := PlanFor("cos", phases(inline(map[string]any{"f": math.Inf(1)})), Options{})
	var oe *ObjectError
	if !errors.As(err, &oe) || oe.PhaseIndex != 0 || oe.Index != 0 {
		t.Errorf("unencodable object: error %v, want an ObjectError at phase 0 object 0", err)
	}
}

// TestPlanForDeterministic plans the same input twice, the second time from separately built maps.
func TestPlanForDeterministic(t *testing.T) {
	build := func() Input {
		return phases(
			inline(object("Namespace", "", "ns"), sized(5000, 1, true), sized(700, 2, false)),
			[]ObjectInput{{Keep: &RefOut{SecretName: "s", Key: "k"}}, {Object: sized(3000, 3, false)}, {Object: object("Namespace", "", "ns")}},
			inline(sized(2500, 4, true), sized(1200, 5, false)),
		)
	}
	opts := Options{Budget: 4000}
	first, err := PlanFor("cos", build(), opts)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		again, err := PlanFor("cos", build(), opts)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(first, again); diff != "" {
			t.Fatalf("plans differ (-first +again):\n%s", diff)
		}
	}
	layout(t, build(), first, opts.Budget)
	if first.Stats.Secrets < 2 || first.Stats.Compressed == 0 {
		t.Errorf("input does not exercise packing and compression: %+v", first.Stats)
	}
}

// TestPlanForGolden pins keys and names of a small plan: plain JSON, gzip of repetitive text, gzip of
// generated manifests (matches and dynamic Huffman blocks), and the Huffman-only retry for random
// base64. Refs are compared by resolved content, so other bytes would not break a re-apply; but they
// would give newly written Secrets other keys, so a change must be deliberate: the canonical JSON, the
// compressor's level or an upgrade of github.com/klauspost/compress.
func TestPlanForGolden(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 11))
	manifests := map[string]any{"items": generateObjects(r, 8, 50_000)}
	in := phases(inline(object("ConfigMap", "ns", "c"), sized(2000, 1, true)), inline(manifests, sized(3000, 9, false)))
	p, err := PlanFor("golden", in, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]RefOut{{
		{SecretName: "golden-c905e4ded3c66e67", Key: "tGtO6y_ldZ4yzAcC7FwvOUoIzE98pQkZrsxmaMMInV8"}, // plain JSON
		{SecretName: "golden-c905e4ded3c66e67", Key: "6As_K22s9RfNVhzo3XRVnHLg602Ug4JNMgoN4_vaS1E"}, // gzip
	}, {
		{SecretName: "golden-c905e4ded3c66e67", Key: "f0b0wABryGYfplTB_TyBX931AloGF0jhLGgRUuDwpQI"}, // gzip
		{SecretName: "golden-c905e4ded3c66e67", Key: "5P3RA54yzvFXOYAponl-rNQGlK7cIlkY7aCQ4BRgwis"}, // gzip, Huffman only
	}}
	if diff := cmp.Diff(want, p.Refs); diff != "" {
		t.Errorf("refs (-want +got):\n%s", diff)
	}
	if p.Stats.Compressed != 3 {
		t.Errorf("%d entries compressed, want 3", p.Stats.Compressed)
	}
}

// TestPlanForContextStops: a plan whose context has ended encodes nothing more and says why (its
// cause); one whose context is live is PlanFor's.
func TestPlanForContextStops(t *testing.T) {
	in := Input{Phases: []PhaseInput{{Name: "p", Objects: []ObjectInput{
		{Object: map[string]any{"kind": "ConfigMap", "data": map[string]any{"k": strings.Repeat("v", 4096)}}},
		{Object: map[string]any{"kind": "Secret"}},
	}}}}
	gone := errors.New("the caller has gone")
	tests := map[string]struct {
		end       bool
		wantCause error
	}{
		"live":  {},
		"ended": {end: true, wantCause: gone},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			if tc.end {
				cancel(gone)
			}
			got, err := PlanForContext(ctx, "app", in, Options{})
			if tc.wantCause != nil {
				if !errors.Is(err, tc.wantCause) || got != nil {
					t.Fatalf("PlanForContext = %v, %v; want no plan and an error wrapping %v", got, err, tc.wantCause)
				}
				return
			}
			want, err2 := PlanFor("app", in, Options{})
			if err != nil || err2 != nil {
				t.Fatalf("errors %v, %v", err, err2)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-PlanFor +PlanForContext):\n%s", diff)
			}
		})
	}
}
