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
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/cos-externalizer/cos-externalizer"

var update = flag.Bool("update", false, "rewrite the import graph in docs/design.md")

// Layers, lowest first: a package may import its own layer's packages and lower ones only. Within the
// component layer (webhook, controllers, certs/servingcert) no package imports another, but for the
// parts of a component in folders below it (webhook/server).
const (
	layerAPI = iota
	layerPure
	layerClient
	layerComponent
	layerCommand
	layerTest
)

var layerNames = []string{"api", "pure core", "client", "components", "commands", "tests"}

// Wings, one per audience, each one folder under its front door. A wing imports its own packages and
// the shared ground; the plugin also runs the admission pipeline in-process (kubectl cos apply), so it
// may import admission's wing. The shared ground imports no wing. Packages of no wing (the API, certs,
// the manager's composition in cmd/cos-externalizer, tests) are not held to a wing.
const (
	wingNone       = ""
	wingShared     = "shared"
	wingReconciler = "reconciler"
	wingAdmission  = "admission"
	wingPlugin     = "plugin"
)

// place is where a folder puts the packages below it: their wing and their layer.
type place struct {
	wing  string
	layer int
}

// folders is the layout, one line per folder that starts a wing or a layer; a package takes the place
// of the longest folder that holds it, and is a test's (test/, hack/) when none does. Each wing is its
// front door, whose packages may use a client, with its pure core in the folder named for the wing:
// webhook/ and webhook/admission/, controllers/ and controllers/reconciler/, cmd/kubectl-cos/ and
// cmd/kubectl-cos/plugin/. The shared ground is pure, internal/, with its client layer in
// internal/kube/.
var folders = map[string]place{
	"api":                    {wingNone, layerAPI},
	"certs":                  {wingNone, layerPure},
	"certs/servingcert":      {wingNone, layerComponent},
	"internal":               {wingShared, layerPure},
	"internal/kube":          {wingShared, layerClient},
	"webhook":                {wingAdmission, layerComponent},
	"webhook/admission":      {wingAdmission, layerPure},
	"controllers":            {wingReconciler, layerComponent},
	"controllers/reconciler": {wingReconciler, layerPure},
	"cmd":                    {wingNone, layerCommand},
	"cmd/kubectl-cos":        {wingPlugin, layerCommand},
	"cmd/kubectl-cos/plugin": {wingPlugin, layerPure},
}

// placeOf places a package (path inside the module) by its path alone.
func placeOf(pkg string) place {
	for dir := pkg; dir != "."; dir = path.Dir(dir) {
		if p, ok := folders[dir]; ok {
			return p
		}
	}
	return place{wingNone, layerTest}
}

func layerOf(pkg string) int   { return placeOf(pkg).layer }
func wingOf(pkg string) string { return placeOf(pkg).wing }

// TestPlaceOf shows where the layout puts today's packages and a newcomer's helpers.
func TestPlaceOf(t *testing.T) {
	for pkg, want := range map[string]place{
		"api/v1":                            {wingNone, layerAPI},
		"certs":                             {wingNone, layerPure},
		"certs/servingcert":                 {wingNone, layerComponent},
		"internal/content":                  {wingShared, layerPure},
		"internal/newhelper":                {wingShared, layerPure},
		"internal/kube/objectdata":          {wingShared, layerClient},
		"internal/kube/newclient":           {wingShared, layerClient},
		"webhook":                           {wingAdmission, layerComponent},
		"webhook/server":                    {wingAdmission, layerComponent},
		"webhook/admission":                 {wingAdmission, layerPure},
		"webhook/admission/validation":      {wingAdmission, layerPure},
		"controllers":                       {wingReconciler, layerComponent},
		"controllers/rolloutrbac":           {wingReconciler, layerComponent},
		"controllers/reconciler/rollout":    {wingReconciler, layerPure},
		"cmd/cos-externalizer/app":          {wingNone, layerCommand},
		"cmd/kubectl-cos":                   {wingPlugin, layerCommand},
		"cmd/kubectl-cos/commands":          {wingPlugin, layerCommand},
		"cmd/kubectl-cos/plugin/bundle":     {wingPlugin, layerPure},
		"cmd/kubectl_complete-cos":          {wingNone, layerCommand},
		"test/testenv":                      {wingNone, layerTest},
		"hack/gen/helmgen":                  {wingNone, layerTest},
		"webhookish":                        {wingNone, layerTest},
		"controllers/reconcilerhelper/deep": {wingReconciler, layerComponent},
	} {
		if got := placeOf(pkg); got != want {
			t.Errorf("placeOf(%q) = %+v, want %+v", pkg, got, want)
		}
	}
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
		allowed := wingMayImport[from]
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
		"reconciler to plugin":             {"controllers/reconciler/rollout", "cmd/kubectl-cos/plugin/inspect", 1},
		"reconciler to admission":          {"controllers", "webhook/admission/validation", 1},
		"admission to reconciler":          {"webhook", "controllers/reconciler/conditions", 1},
		"admission's server to reconciler": {"webhook/server", "controllers/reconciler/conditions", 1},
		"admission to plugin":              {"webhook/admission", "cmd/kubectl-cos/plugin/bundle", 1},
		"shared to a wing":                 {"internal/kube/objectdata", "webhook/admission", 1},
		"shared's core to a wing's door":   {"internal/content", "controllers", 1},
		"plugin to reconciler":             {"cmd/kubectl-cos/plugin/inspect", "controllers/reconciler/conditions", 1},
		"plugin to admission":              {"cmd/kubectl-cos/commands", "webhook/admission", 0},
		"reconciler to shared":             {"controllers/reconciler/rollout", "internal/content", 0},
		"within a wing":                    {"cmd/kubectl-cos/plugin/bundle", "cmd/kubectl-cos/plugin/phasesort", 0},
		"the composition to all":           {"cmd/cos-externalizer/app", "webhook/admission", 0},
		"tests to anything":                {"test/testenv", "cmd/kubectl-cos/plugin/bundle", 0},
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
		"pure core to client":               {"webhook/admission", "internal/kube/objectdata", 1},
		"api to pure core":                  {"api/v1", "internal/content", 1},
		"component to component":            {"webhook", "controllers", 1},
		"component to its own part":         {"webhook", "webhook/server", 0},
		"a part to its component":           {"webhook/server", "webhook", 1},
		"a part to another":                 {"webhook/server", "controllers", 1},
		"client to command":                 {"internal/kube/objectdata", "cmd/kubectl-cos/commands", 1},
		"pure core to pure core":            {"webhook/admission", "internal/content", 0},
		"component to client":               {"controllers", "internal/kube/objectdata", 0},
		"command to component":              {"cmd/cos-externalizer/app", "webhook", 0},
		"test to anything":                  {"test/testenv", "cmd/cos-externalizer/app", 0},
		"servingcert to its parent":         {"certs/servingcert", "certs", 0},
		"a wing's core to its door":         {"controllers/reconciler/rollout", "controllers", 1},
		"the plugin's core to its commands": {"cmd/kubectl-cos/plugin/bundle", "cmd/kubectl-cos/commands", 1},
		"a door to its core":                {"controllers", "controllers/reconciler/rollout", 0},
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
