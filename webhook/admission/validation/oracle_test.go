package validation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/common"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/test/corpus"
)

// oracle validates the spec of a ClusterObjectSet with the API server's own code
// (k8s.io/apiextensions-apiserver, the version of go.mod), driven by the generated CRD: the decoding
// steps (pruning, nulls dropped, embedded resources coerced), then what the custom resource strategy
// runs on the object: the OpenAPI validator with ratcheting, the checks of embedded resources and
// list-type=map lists, and the CEL rules with ratcheting and transition rules, skipped after a
// blocking error. The object's own metadata and status are out of the hand-written validator's scope
// and not validated here either. It is a test-only oracle (issue 12 measured it too slow and too
// heavy for the webhook; TestOracleStaysOutOfTheBinaries keeps it out of them).
type oracle struct {
	structural *structuralschema.Structural
	schema     apiservervalidation.SchemaValidator
	cel        *cel.Validator
}

func newOracle(crd *apiextensionsv1.CustomResourceDefinition) (*oracle, error) {
	for _, v := range crd.Spec.Versions {
		if v.Name != olmv1.GroupVersion.Version || v.Schema == nil {
			continue
		}
		internal := &apiextensions.CustomResourceValidation{}
		if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v.Schema, internal, nil); err != nil {
			return nil, fmt.Errorf("converting the schema: %w", err)
		}
		structural, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
		if err != nil {
			return nil, fmt.Errorf("the schema is not structural: %w", err)
		}
		schemaValidator, _, err := apiservervalidation.NewSchemaValidator(internal.OpenAPIV3Schema)
		if err != nil {
			return nil, fmt.Errorf("the OpenAPI validator: %w", err)
		}
		return &oracle{
			structural: structural,
			schema:     schemaValidator,
			cel:        cel.NewValidator(structural, true, celconfig.PerCallLimit),
		}, nil
	}
	return nil, fmt.Errorf("the CRD has no schema for %s", olmv1.GroupVersion.Version)
}

// generatedOracle is the oracle of the generated CRD, built once (CEL compilation takes ~20 ms).
var generatedOracle = sync.OnceValues(func() (*oracle, error) {
	crd, err := readGeneratedCRD()
	if err != nil {
		return nil, err
	}
	return newOracle(crd)
})

func mustOracle(t testing.TB) *oracle {
	t.Helper()
	o, err := generatedOracle()
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// validate validates obj; old nil is a create.
func (o *oracle) validate(old, obj *olmv1.ClusterObjectSet) field.ErrorList {
	if obj == nil {
		return field.ErrorList{field.InternalError(nil, errors.New("no ClusterObjectSet to validate"))}
	}
	ctx := context.Background()
	u, errs := o.decode(obj, true)
	if len(errs) > 0 {
		return errs
	}
	var oldU map[string]any
	var celOpts []cel.Option
	var schemaOpts []apiservervalidation.ValidationOption
	if old != nil {
		oldU, _ = o.decode(old, false)
		if oldU == nil {
			// As the hand-written validator does, an old object that cannot be encoded has no spec.
			oldU = o.head()
		}
		correlated := common.NewCorrelatedObject(u, oldU, &model.Structural{Structural: o.structural})
		schemaOpts = append(schemaOpts, apiservervalidation.WithRatcheting(correlated))
		celOpts = append(celOpts, cel.WithRatcheting(correlated))
	}

	if old == nil {
		errs = append(errs, apiservervalidation.ValidateCustomResource(nil, u, o.schema)...)
	} else {
		errs = append(errs, apiservervalidation.ValidateCustomResourceUpdate(nil, u, oldU, o.schema, schemaOpts...)...)
	}
	errs = append(errs, schemaobjectmeta.Validate(ctx, nil, u, o.structural, false)...)
	if old == nil || len(structurallisttype.ValidateListSetsAndMaps(nil, o.structural, oldU)) == 0 {
		errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, o.structural, u)...)
	}
	for _, e := range errs {
		// The custom resource strategy's hasBlockingErr.
		switch e.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return append(errs, field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"))
		}
	}
	var oldAny any
	if old != nil {
		oldAny = oldU
	}
	celErrs, _ := o.cel.Validate(ctx, nil, o.structural, u, oldAny, celconfig.RuntimeCELCostBudget, celOpts...)
	return append(errs, celErrs...)
}

// decode makes of obj what the API server decodes from a client's JSON: pruned, nulls of declared
// fields dropped, embedded resources coerced. For the new object (strict) a coercion failure is the
// 400 Bad Request the API server answers; for the old one, what does not decode is dropped, as when
// the API server reads a stored object.
func (o *oracle) decode(obj *olmv1.ClusterObjectSet, strict bool) (map[string]any, field.ErrorList) {
	data, err := json.Marshal(&olmv1.ClusterObjectSet{TypeMeta: obj.TypeMeta, Spec: obj.Spec})
	if err != nil {
		return nil, encodingErrors(&obj.Spec, err)
	}
	var u map[string]any
	if err := utiljson.Unmarshal(data, &u); err != nil {
		return nil, field.ErrorList{field.InternalError(specPath, err)}
	}
	for k, v := range o.head() {
		u[k] = v
	}
	delete(u, "status")
	structuralpruning.Prune(u, o.structural, true)
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(u, o.structural)
	if ferr := schemaobjectmeta.Coerce(nil, u, o.structural, false, !strict); ferr != nil {
		return nil, field.ErrorList{ferr}
	}
	structuraldefaulting.Default(u, o.structural)
	return u, nil
}

// head is the type and a fixed metadata: the object's own metadata is not in scope.
func (o *oracle) head() map[string]any {
	return map[string]any{
		"apiVersion": olmv1.GroupVersion.String(),
		"kind":       olmv1.ClusterObjectSetKind,
		"metadata":   map[string]any{"name": "x", "resourceVersion": "1"},
	}
}

// knownDifference is a way the hand-written validator (kube-apiserver v1.36's answers) and the
// oracle (apiextensions-apiserver of go.mod) may differ on the same input, and why.
type knownDifference struct {
	reason string
	// explains reports whether the difference of hand and oracle is this one.
	explains func(hand, oracle field.ErrorList) bool
}

// knownDifferences lists every accepted difference; docs/webhook.md lists them too. A difference
// that none explains fails the comparison.
var knownDifferences = map[string]knownDifference{
	"400 Bad Request: every coercion error or the first": {
		reason: "an inline object that cannot be decoded (apiVersion or kind not a string, metadata not an object) fails the request before validation; " +
			"the API server's message holds the first coercion error, the hand-written validator returns all of them: same verdict, the oracle's paths a subset",
		explains: func(hand, oracle field.ErrorList) bool {
			return len(hand) > 0 && len(oracle) == 1 && allCoercion(hand) && allCoercion(oracle) && subset(paths(oracle), paths(hand))
		},
	},
	"ownerReferences and managedFields of inline objects: v1.36, not v1.37": {
		reason: "apimachinery v0.37 (the oracle's, pinned by controller-runtime) changed the checks of metadata.ownerReferences and metadata.managedFields " +
			"(other error types, paths and messages); the hand-written validator answers as the API server the project runs against (v1.36.3, the differential test)",
		explains: func(hand, oracle field.ErrorList) bool {
			// Apart from those fields, the lists agree, but for the Skipped error and the CEL errors
			// that a blocking error of those fields adds or hides.
			h, o := withoutMeta(hand), withoutMeta(oracle)
			if metaErrors(hand)+metaErrors(oracle) == 0 {
				return false
			}
			return agreeOn(h, o) || skipped(hand) != skipped(oracle) && withoutCEL(h) == withoutCEL(o)
		},
	},
}

// difference is "" when hand and oracle agree (the same errors, as sorted path, type and message),
// else the paths, types or messages that differ, first of those.
func difference(hand, oracle field.ErrorList) string {
	if agreeOn(hand, oracle) {
		return ""
	}
	for _, k := range []struct {
		what string
		key  func(*field.Error) string
	}{
		{"paths", func(e *field.Error) string { return e.Field }},
		{"types", func(e *field.Error) string { return e.Field + " " + string(e.Type) }},
	} {
		if strings.Join(keys(hand, k.key), "\n") != strings.Join(keys(oracle, k.key), "\n") {
			return k.what
		}
	}
	return "messages"
}

// compareWithOracle validates with both on create (old nil) or update, and fails when they differ in
// a way knownDifferences does not explain: a different verdict always fails. It returns the known
// difference that explains a difference, "" when they agree.
func compareWithOracle(t *testing.T, o *oracle, old, obj *olmv1.ClusterObjectSet) string {
	t.Helper()
	var hand field.ErrorList
	if old == nil {
		hand = ValidateCreate(obj)
	} else {
		hand = ValidateUpdate(old, obj)
	}
	lib := o.validate(old, obj)
	if (len(hand) == 0) != (len(lib) == 0) {
		t.Fatalf("verdicts differ (update %t):\n  hand-written: %s\n  oracle:       %s", old != nil,
			strings.Join(typed(hand), "\n                "), strings.Join(typed(lib), "\n                "))
	}
	d := difference(hand, lib)
	if d == "" {
		return ""
	}
	for name, k := range knownDifferences {
		if k.explains(hand, lib) {
			if debugOracle {
				t.Logf("%s (%s):\n  hand-written: %s\n  oracle:       %s", name, k.reason, strings.Join(typed(hand), "\n                "), strings.Join(typed(lib), "\n                "))
			}
			return name
		}
	}
	t.Fatalf("%s differ, and no known difference explains it (update %t):\n  hand-written: %s\n  oracle:       %s", d, old != nil,
		strings.Join(typed(hand), "\n                "), strings.Join(typed(lib), "\n                "))
	return ""
}

// debugOracle (ORACLE_DEBUG=1) logs every difference a known difference explains.
var debugOracle = os.Getenv("ORACLE_DEBUG") != ""

// typed renders errors with their path, type and body, sorted.
func typed(errs field.ErrorList) []string {
	return keys(errs, func(e *field.Error) string { return fmt.Sprintf("%s | %s | %s", e.Field, e.Type, e.ErrorBody()) })
}

func keys(errs field.ErrorList, key func(*field.Error) string) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, key(e))
	}
	sort.Strings(out)
	return out
}

func agreeOn(a, b field.ErrorList) bool {
	return strings.Join(typed(a), "\n") == strings.Join(typed(b), "\n")
}

func paths(errs field.ErrorList) []string {
	return keys(errs, func(e *field.Error) string { return e.Field })
}

func subset(a, b []string) bool {
	in := map[string]bool{}
	for _, s := range b {
		in[s] = true
	}
	for _, s := range a {
		if !in[s] {
			return false
		}
	}
	return true
}

// allCoercion: every error is one of decoding an embedded resource.
func allCoercion(errs field.ErrorList) bool {
	for _, e := range errs {
		if !strings.Contains(e.Detail, "must be a string") && !strings.Contains(e.Detail, "cannot unmarshal") {
			return false
		}
	}
	return true
}

func skipped(errs field.ErrorList) bool {
	for _, e := range errs {
		if e.Detail == SkippedMessage {
			return true
		}
	}
	return false
}

func isMeta(e *field.Error) bool {
	return strings.Contains(e.Field, ".metadata.ownerReferences") || strings.Contains(e.Field, ".metadata.managedFields")
}

func metaErrors(errs field.ErrorList) int {
	n := 0
	for _, e := range errs {
		if isMeta(e) {
			n++
		}
	}
	return n
}

// withoutMeta drops the errors of ownerReferences and managedFields, and the Skipped error.
func withoutMeta(errs field.ErrorList) field.ErrorList {
	var out field.ErrorList
	for _, e := range errs {
		if !isMeta(e) && e.Detail != SkippedMessage {
			out = append(out, e)
		}
	}
	return out
}

// withoutCEL renders the errors that are not CEL rules' (no Invalid error with a rule's message).
func withoutCEL(errs field.ErrorList) string {
	var out field.ErrorList
	for _, e := range errs {
		if e.Type != field.ErrorTypeInvalid || !ruleMessages[e.Detail] && !strings.Contains(e.Detail, "evaluating rule") {
			out = append(out, e)
		}
	}
	return strings.Join(typed(out), "\n")
}

// ruleMessages are the messages of every rule of specSchema.
var ruleMessages = func() map[string]bool {
	m := map[string]bool{}
	var walk func(s *schema)
	walk = func(s *schema) {
		if s == nil {
			return
		}
		for _, r := range s.Rules {
			m[r.Message] = true
		}
		for _, p := range s.Properties {
			walk(p)
		}
		walk(s.Items)
		walk(s.AdditionalProperties)
	}
	walk(specSchema)
	return m
}()

// oracleCases: the corpus, the edge cases and decode errors of validation_test.go, the fixtures, the
// fuzz seeds, and n inputs of FuzzValidate's generator from a fixed seed.
func oracleCases(t *testing.T, n int) map[string]struct{ old, obj *olmv1.ClusterObjectSet } {
	all := map[string]struct{ old, obj *olmv1.ClusterObjectSet }{}
	add := func(name string, old, obj *olmv1.ClusterObjectSet) {
		all[name] = struct{ old, obj *olmv1.ClusterObjectSet }{old, obj}
	}
	for name, tc := range corpus.Cases() {
		add("corpus: "+name, tc.Old, tc.New)
	}
	for name, tc := range edgeCases() {
		add("edge: "+name, tc.Old, tc.New)
	}
	for name, obj := range fixtures(t) {
		archived := obj.DeepCopy()
		archived.Spec.LifecycleState = olmv1.LifecycleStateArchived
		add("fixture: "+name, obj, archived)
	}
	for i, seed := range fuzzSeeds() {
		if old, obj, ok := fuzzObjects(seed); ok {
			add(fmt.Sprintf("fuzz seed %d", i), old, obj)
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
			add(fmt.Sprintf("fuzz generated %d", i), old, obj)
		}
	}
	return all
}

// TestOracle compares the hand-written validator with the API server's code over oracleCases, on
// create and on update: the same verdict, and the same errors (path, type, message) but for
// knownDifferences. Every known difference must still occur, so that the list stays the list of
// what differs.
func TestOracle(t *testing.T) {
	o := mustOracle(t)
	seen := map[string]int{}
	compared := 0
	for name, tc := range oracleCases(t, 300) {
		t.Run(name, func(t *testing.T) {
			seen[compareWithOracle(t, o, nil, tc.obj)]++
			compared++
			if tc.old != nil {
				seen[compareWithOracle(t, o, tc.old, tc.obj)]++
				compared++
			}
		})
	}
	t.Logf("%d comparisons: %d agree; known differences: %v", compared, seen[""], seen)
	for name, k := range knownDifferences {
		if seen[name] == 0 {
			t.Errorf("known difference %q (%s) never occurred: remove it from knownDifferences and docs/webhook.md", name, k.reason)
		}
	}
}

// TestOracleStaysOutOfTheBinaries: the shipped binaries import the CRD's API types of
// apiextensions-apiserver (BoundsFromCRD reads the served CRD), and through other libraries cel-go and
// k8s.io/apiserver/pkg/cel, but none of the oracle's own packages: the API server's structural schema,
// OpenAPI validator and CEL validator, the ratcheting correlation, kube-openapi's validator. Only this
// package's tests import them.
func TestOracleStaysOutOfTheBinaries(t *testing.T) {
	oraclePrefixes := []string{
		"k8s.io/apiextensions-apiserver/pkg/apiserver",
		"k8s.io/apiextensions-apiserver/pkg/registry",
		"k8s.io/apiserver/pkg/cel/common",
		"k8s.io/kube-openapi/pkg/validation/validate",
	}
	binaries := goListDeps(t, "../../../cmd/cos-externalizer", "../../../cmd/kubectl-cos")
	if !binaries["k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"] {
		t.Error("the binaries no longer import apiextensions/v1: is the package list right?")
	}
	for pkg := range binaries {
		for _, prefix := range oraclePrefixes {
			if pkg == prefix || strings.HasPrefix(pkg, prefix+"/") {
				t.Errorf("a binary imports %s, a package of the test-only oracle", pkg)
			}
		}
	}
	tests := goListDeps(t, "-test", ".")
	for _, pkg := range []string{"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel", "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"} {
		if !tests[pkg] {
			t.Errorf("the tests of this package do not import %s: the check above checks nothing", pkg)
		}
	}
}

// goListDeps returns the packages `go list -deps args...` lists.
func goListDeps(t *testing.T, args ...string) map[string]bool {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the binaries' dependencies: %v", err)
	}
	out, err := exec.Command(goCmd, append([]string{"list", "-deps"}, args...)...).Output()
	if err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			t.Fatalf("go list -deps %s: %v\n%s", strings.Join(args, " "), err, exitErr.Stderr)
		}
		t.Fatalf("go list -deps %s: %v", strings.Join(args, " "), err)
	}
	pkgs := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkgs[line] = true
	}
	return pkgs
}
