// Package imports checks the layering the layout promises (docs/design.md, "Packages"): every import
// between the module's packages points down, the pure packages reach no client, the API types import
// only apimachinery, and the drawn import graph in docs/design.md is the one the code has.
package imports

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/cos-externalizer/cos-externalizer"

var update = flag.Bool("update", false, "rewrite the import graph in docs/design.md")

// Layers, lowest first: a package may import its own layer's packages and lower ones only. Within the
// top product layer (webhook, controllers, certs/servingcert) no package imports another, but for
// the parts of a component in folders below it (webhook/server).
const (
	layerAPI = iota
	layerPure
	layerClient
	layerComponent
	layerCommand
	layerTest
)

var layerNames = []string{"api", "pure core", "client", "components", "commands", "tests"}

// layerOf places a package (path inside the module) in its layer.
func layerOf(pkg string) int {
	switch {
	case pkg == "api/v1":
		return layerAPI
	case pkg == "internal/shared/scheme", pkg == "objectdata", pkg == "internal/shared/objectdata":
		return layerClient
	case pkg == "certs", strings.HasPrefix(pkg, "internal/"):
		return layerPure
	case pkg == "webhook", strings.HasPrefix(pkg, "webhook/"), pkg == "controllers", strings.HasPrefix(pkg, "controllers/"), pkg == "certs/servingcert":
		return layerComponent
	case strings.HasPrefix(pkg, "cmd/"):
		return layerCommand
	default: // test/..., hack/...
		return layerTest
	}
}

// Wings of internal/, one per audience. A package belongs to the wing its path names; the components
// and commands that serve one audience belong to its wing too. A wing imports its own packages and the
// shared ground; the plugin also runs the admission pipeline in-process (kubectl cos apply), so it may
// import admission's wing. The shared ground imports no wing. Packages of no wing (the API, certs, the
// manager's composition in cmd/cos-externalizer, tests) are not held to a wing.
const (
	wingNone       = ""
	wingShared     = "shared"
	wingReconciler = "reconciler"
	wingAdmission  = "admission"
	wingPlugin     = "plugin"
)

// wingOf places a package (path inside the module) in its wing.
func wingOf(pkg string) string {
	switch {
	case pkg == "internal/shared" || strings.HasPrefix(pkg, "internal/shared/"):
		return wingShared
	case pkg == "internal/reconciler" || strings.HasPrefix(pkg, "internal/reconciler/"),
		pkg == "controllers" || strings.HasPrefix(pkg, "controllers/"):
		return wingReconciler
	case pkg == "internal/admission" || strings.HasPrefix(pkg, "internal/admission/"),
		pkg == "webhook" || strings.HasPrefix(pkg, "webhook/"):
		return wingAdmission
	case pkg == "internal/plugin" || strings.HasPrefix(pkg, "internal/plugin/"),
		pkg == "cmd/kubectl-cos" || strings.HasPrefix(pkg, "cmd/kubectl-cos/"):
		return wingPlugin
	case strings.HasPrefix(pkg, "internal/"):
		return "no"
	}
	return wingNone
}

// wingMayImport says which wings each wing may import besides its own.
var wingMayImport = map[string][]string{
	wingShared:     nil,
	wingReconciler: {wingShared},
	wingAdmission:  {wingShared},
	wingPlugin:     {wingShared, wingAdmission},
}

// crossWing lists every import from one wing into a wing it may not reach.
func crossWing(pkgs map[string]*listedPackage) []string {
	var out []string
	for name, p := range pkgs {
		from := wingOf(name)
		if from == wingNone {
			continue
		}
		allowed, known := wingMayImport[from]
		if !known {
			out = append(out, fmt.Sprintf("%s is under internal/ but in no wing (shared, reconciler, admission, plugin)", name))
			continue
		}
		for _, imp := range internalImports(p) {
			to := wingOf(imp)
			if to == wingNone || to == from || slices.Contains(allowed, to) {
				continue
			}
			out = append(out, fmt.Sprintf("%s (%s wing) imports %s (%s wing)", name, from, imp, to))
		}
	}
	slices.Sort(out)
	return out
}

func TestWingsKeepToThemselves(t *testing.T) {
	for _, v := range crossWing(list(t)) {
		t.Error(v)
	}
}

// TestCrossWing shows the wing check bites: each case adds one import to a small module.
func TestCrossWing(t *testing.T) {
	bites(t, crossWing, map[string]importCase{
		"reconciler to plugin":             {"internal/reconciler/rollout", "internal/plugin/inspect", 1},
		"reconciler to admission":          {"controllers", "internal/admission/validation", 1},
		"admission to reconciler":          {"webhook", "internal/reconciler/conditions", 1},
		"admission's server to reconciler": {"webhook/server", "internal/reconciler/conditions", 1},
		"admission to plugin":              {"internal/admission", "internal/plugin/bundle", 1},
		"shared to a wing":                 {"internal/shared/objectdata", "internal/admission", 1},
		"plugin to reconciler":             {"internal/plugin/inspect", "internal/reconciler/conditions", 1},
		"a package in no wing":             {"internal/helpers", "internal/shared/content", 1},
		"plugin to admission":              {"cmd/kubectl-cos/cos", "internal/admission", 0},
		"reconciler to shared":             {"internal/reconciler/rollout", "internal/shared/content", 0},
		"within a wing":                    {"internal/plugin/bundle", "internal/plugin/phasesort", 0},
		"the composition to all":           {"cmd/cos-externalizer/app", "internal/admission", 0},
		"tests to anything":                {"test/testenv", "internal/plugin/bundle", 0},
	})
}

// importCase is one import added to a small module, and how many violations it should make.
type importCase struct {
	from, to string
	want     int
}

// bites runs check over a module of one package per case, cases[name].from importing cases[name].to.
func bites(t *testing.T, check func(map[string]*listedPackage) []string, cases map[string]importCase) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pkgs := map[string]*listedPackage{tc.from: {Imports: []string{module + "/" + tc.to, "fmt"}}}
			if got := check(pkgs); len(got) != tc.want {
				t.Errorf("%s importing %s: %d violations %q, want %d", tc.from, tc.to, len(got), got, tc.want)
			}
		})
	}
}

// clientPrefixes are what a pure package must not reach, directly or not.
var clientPrefixes = []string{"sigs.k8s.io/controller-runtime", "k8s.io/client-go"}

type listedPackage struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// list runs go list over the module's non-test packages.
func list(t *testing.T) map[string]*listedPackage {
	t.Helper()
	root := moduleRoot(t)
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, stderr.String())
	}
	pkgs := map[string]*listedPackage{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		p := &listedPackage{}
		if err := dec.Decode(p); err != nil {
			t.Fatalf("decoding go list: %v", err)
		}
		if rel, ok := strings.CutPrefix(p.ImportPath, module+"/"); ok {
			pkgs[rel] = p
		}
	}
	return pkgs
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test")
		}
		dir = parent
	}
}

// internalImports are p's imports of the module's own packages, as paths inside the module.
func internalImports(p *listedPackage) []string {
	var out []string
	for _, imp := range p.Imports {
		if rel, ok := strings.CutPrefix(imp, module+"/"); ok {
			out = append(out, rel)
		}
	}
	return out
}

func TestImportsPointDown(t *testing.T) {
	for _, v := range upward(list(t)) {
		t.Error(v)
	}
}

// upward lists every import between the module's packages that breaks the layering.
func upward(pkgs map[string]*listedPackage) []string {
	var out []string
	for name, p := range pkgs {
		from := layerOf(name)
		for _, imp := range internalImports(p) {
			to := layerOf(imp)
			switch {
			case to > from:
				out = append(out, fmt.Sprintf("%s (%s) imports %s (%s): an arrow back up", name, layerNames[from], imp, layerNames[to]))
			case to == from && from == layerComponent && !strings.HasPrefix(imp, name+"/"):
				out = append(out, fmt.Sprintf("%s imports %s: components are siblings and share only what lies below them", name, imp))
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestUpward shows the check bites: each case adds one import to a small module.
func TestUpward(t *testing.T) {
	bites(t, upward, map[string]importCase{
		"pure core to client":       {"internal/admission", "internal/shared/objectdata", 1},
		"api to pure core":          {"api/v1", "internal/shared/content", 1},
		"component to component":    {"webhook", "controllers", 1},
		"component to its own part": {"webhook", "webhook/server", 0},
		"a part to its component":   {"webhook/server", "webhook", 1},
		"a part to another":         {"webhook/server", "controllers", 1},
		"client to command":         {"internal/shared/objectdata", "cmd/kubectl-cos/cos", 1},
		"pure core to pure core":    {"internal/admission", "internal/shared/content", 0},
		"component to client":       {"controllers", "internal/shared/objectdata", 0},
		"command to component":      {"cmd/cos-externalizer/app", "webhook", 0},
		"test to anything":          {"test/testenv", "cmd/cos-externalizer/app", 0},
		"servingcert to its parent": {"certs/servingcert", "certs", 0},
	})
}

func TestPureCoreReachesNoClient(t *testing.T) {
	for name, p := range list(t) {
		if l := layerOf(name); l != layerPure && l != layerAPI {
			continue
		}
		for _, dep := range p.Deps {
			for _, prefix := range clientPrefixes {
				if strings.HasPrefix(dep, prefix) {
					t.Errorf("%s is pure, but depends on %s", name, dep)
				}
			}
		}
	}
}

func TestAPIImportsOnlyApimachinery(t *testing.T) {
	p := list(t)["api/v1"]
	if p == nil {
		t.Fatal("api/v1 not listed")
	}
	for _, imp := range p.Imports {
		if strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") && !strings.HasPrefix(imp, "k8s.io/apimachinery/") {
			t.Errorf("api/v1 imports %s: the API types import only the standard library and k8s.io/apimachinery", imp)
		}
	}
}

// The graph in docs/design.md, between these markers: the module's packages but the tests', each
// edge drawn unless a longer path already implies it (transitive reduction), so it stays readable.
const (
	beginMarker = "<!-- import graph: generated by `go test ./test/imports -update`; do not edit -->"
	endMarker   = "<!-- end of import graph -->"
)

func TestDrawnGraphIsTheCodes(t *testing.T) {
	want := graph(list(t))
	path := filepath.Join(moduleRoot(t), "docs", "design.md")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	begin, end := bytes.Index(doc, []byte(beginMarker)), bytes.Index(doc, []byte(endMarker))
	if begin < 0 || end < begin {
		t.Fatalf("%s has no import graph between %q and %q", path, beginMarker, endMarker)
	}
	got := string(doc[begin+len(beginMarker) : end])
	if got == want {
		return
	}
	if *update {
		out := slices.Concat(doc[:begin+len(beginMarker)], []byte(want), doc[end:])
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("the import graph in docs/design.md is not the code's; run `go test ./test/imports -update` and review the diff. Want:\n%s", want)
}

// graph draws the module's product packages (not test/ or hack/) as a Mermaid flowchart, one
// subgraph per layer, with the transitive reduction of their imports.
func graph(pkgs map[string]*listedPackage) string {
	var names []string
	for name := range pkgs {
		if layerOf(name) < layerTest {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	edges := map[string][]string{}
	for _, name := range names {
		for _, imp := range internalImports(pkgs[name]) {
			if layerOf(imp) < layerTest {
				edges[name] = append(edges[name], imp)
			}
		}
	}
	// reach: is to reachable from the start without its direct edge to skip?
	reach := func(from, to, skip string) bool {
		seen := map[string]bool{}
		stack := []string{}
		for _, n := range edges[from] {
			if n != skip {
				stack = append(stack, n)
			}
		}
		for len(stack) > 0 {
			n := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if n == to {
				return true
			}
			if !seen[n] {
				seen[n] = true
				stack = append(stack, edges[n]...)
			}
		}
		return false
	}
	id := func(name string) string { return strings.NewReplacer("/", "_", "-", "_").Replace(name) }
	var b strings.Builder
	b.WriteString("\n```mermaid\nflowchart TD\n")
	for l := layerCommand; l >= layerAPI; l-- {
		fmt.Fprintf(&b, "  subgraph layer%d[%s]\n", l, layerNames[l])
		for _, name := range names {
			if layerOf(name) == l {
				fmt.Fprintf(&b, "    %s[%s]\n", id(name), name)
			}
		}
		b.WriteString("  end\n")
	}
	for _, name := range names {
		for _, to := range edges[name] {
			if !reach(name, to, to) {
				fmt.Fprintf(&b, "  %s --> %s\n", id(name), id(to))
			}
		}
	}
	b.WriteString("```\n")
	return b.String()
}
