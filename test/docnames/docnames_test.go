// Package docnames checks the documentation against the repository:
//
//   - the maintainer docs (docs/design.md, CONTRIBUTING.md, docs/adversarial.md, the benchmark index)
//     and the comments of the Go files name only code that exists: every test, benchmark, fuzz target
//     or example, and every `pkg.Name` or `Type.Member` they cite, is declared in the repository;
//   - the user docs name no code of this repository at all (they say what the product does; the code
//     and the tests that hold it are design.md's);
//   - every relative link between Markdown files resolves, to a file and, with a #fragment, to one of
//     its headings.
//
// The dated result files under docs/benchmarks/ record the code of their day and are not checked for
// citations, only for links.
package docnames

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/google/go-cmp/cmp"
)

// elsewhere matches the end of the text before a citation that names another project as its owner:
// "upstream's TestX", "operator-controller's boxcutter.New", "in controller-runtime, TestX".
var elsewhere = regexp.MustCompile(`(?i)\b(?:upstream|operator-controller|boxcutter|kube-apiserver|kubernetes|apiextensions-apiserver|apimachinery|controller-runtime|client-go|cert-manager|cluster api|kueue|kube-openapi|cel-go|argo cd|prometheus-operator)(?:'s)?[ ,:(]+(?:[a-z-]+ ){0,3}[` + "`" + `\[*]*$`)

var (
	// testName is a test, benchmark, fuzz target or example, cited plain or in backticks.
	testName = regexp.MustCompile(`\b(?:Test|Benchmark|Fuzz|Example)[A-Z0-9_][A-Za-z0-9_]*\b`)
	// qualified is pkg.Name, Type.Member or pkg.Type.Member, in backticks or as a Go doc link
	// ([pkg.Name]), optionally called: `pkg.Name()`, `pkg.Name(x)`.
	qualified = regexp.MustCompile("(?:`|\\[)\\*?([A-Za-z_][A-Za-z0-9_]*(?:\\.[A-Za-z_][A-Za-z0-9_]*)+)(?:\\([^`\\]]*\\))?(?:`|\\])")
	// plainQualified is pkg.Name or Type.Member without quotes, in Go comments: resolved only when
	// the qualifier is a package or type of this repository and Name is exported.
	plainQualified = regexp.MustCompile(`(?:^|[\s(])\*?([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Z][A-Za-z0-9_]*)+)\b`)
)

// decls is what the repository declares.
type decls struct {
	funcs    map[string]bool            // every top-level function name, of every package
	packages map[string]map[string]bool // package name -> its top-level names
	members  map[string]map[string]bool // type name -> its methods and fields, over every type of that name
	embeds   map[string][]string        // type name -> the names of its embedded types
	aliases  map[string]map[string]bool // import alias or package name -> package names of this module it may mean
	external map[string]bool            // import names that refer to other modules' packages

	checked int // citations resolved
}

// fileExtensions end citations that are file names, not Go names.
var fileExtensions = map[string]bool{"go": true, "md": true, "mod": true, "sum": true, "yaml": true, "yml": true, "json": true, "txt": true, "sh": true}

func TestCitedNamesExist(t *testing.T) {
	d, comments, texts := repoDocs(t, maintainerDoc)
	texts = append(texts, comments...)

	var missing []string
	for _, tx := range texts {
		for _, m := range d.check(tx) {
			missing = append(missing, fmt.Sprintf("%s:%d: %s", tx.file, tx.line, m))
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Error(m)
	}
	// The patterns must keep finding citations: design.md and the Go comments cite hundreds.
	if d.checked < 200 {
		t.Errorf("only %d citations resolved: are the patterns right?", d.checked)
	}
	t.Logf("%d citations checked in %d lines", d.checked, len(texts))
}

// TestUserDocsCiteNoCode checks that the user docs name no test and no `pkg.Name` of this
// repository: such a citation belongs in docs/design.md.
func TestUserDocsCiteNoCode(t *testing.T) {
	d, _, texts := repoDocs(t, userDoc)
	for _, tx := range texts {
		for _, c := range d.cited(tx) {
			t.Errorf("%s:%d: a user doc names code of this repository (%s): say what it does, and cite it in docs/design.md", tx.file, tx.line, c)
		}
	}
}

// repoDocs collects the repository's declarations and Go comments (collect) and the lines of the
// Markdown files keep selects (markdownLines), failing t when either cannot be read.
func repoDocs(t *testing.T, keep func(string) bool) (*decls, []text, []text) {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	d, comments, err := collect(root)
	if err != nil {
		t.Fatal(err)
	}
	texts, err := markdownLines(root, keep)
	if err != nil {
		t.Fatal(err)
	}
	return d, comments, texts
}

// TestLinksResolve checks every relative link of every Markdown file: the file it points at exists,
// and a #fragment names one of the headings of the Markdown file it points at.
func TestLinksResolve(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	mds, err := markdownFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]map[string]bool{} // Markdown file -> its heading anchors
	texts := map[string]string{}
	for _, p := range mds {
		raw, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		texts[p] = string(raw)
		anchors[p] = headingAnchors(string(raw))
	}
	links := 0
	for _, p := range mds {
		for _, l := range markdownLinks(texts[p]) {
			if problem := checkLink(root, p, l.target, anchors); problem != "" {
				t.Errorf("%s:%d: link %s: %s", p, l.line, l.target, problem)
			}
			links++
		}
	}
	if links < 100 {
		t.Errorf("only %d links found: is the pattern right?", links)
	}
	t.Logf("%d links checked in %d files", links, len(mds))
}

type link struct {
	line   int
	target string
}

var (
	// mdLink is an inline link or image: [text](target "title").
	mdLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)
	// codeSpan is inline code, whose brackets are not links.
	codeSpan = regexp.MustCompile("`[^`]*`")
)

// markdownLinks returns the relative links of a Markdown text, outside code blocks and code spans.
func markdownLinks(md string) []link {
	var out []link
	fenced := false
	for i, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		line = codeSpan.ReplaceAllString(line, "")
		for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			out = append(out, link{line: i + 1, target: target})
		}
	}
	return out
}

// checkLink returns what is wrong with a relative link of the Markdown file from, or "".
func checkLink(root, from, target string, anchors map[string]map[string]bool) string {
	path, fragment, _ := strings.Cut(target, "#")
	file := from
	if path != "" {
		file = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(from), path)))
		if strings.HasPrefix(file, "../") {
			return "points outside the repository"
		}
		if _, err := os.Stat(filepath.Join(root, file)); err != nil {
			return "no such file"
		}
	}
	if fragment == "" {
		return ""
	}
	heads, ok := anchors[file]
	if !ok {
		return "a #fragment of a file that is not Markdown"
	}
	if !heads[fragment] {
		return "no heading of " + file + " has the anchor #" + fragment
	}
	return ""
}

// headingAnchors returns the anchors GitHub gives the headings of a Markdown text: lower case,
// punctuation but hyphens and underscores dropped, spaces to hyphens, and -1, -2, ... after repeats.
func headingAnchors(md string) map[string]bool {
	out := map[string]bool{}
	fenced := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		for i := 1; out[a]; i++ {
			a = fmt.Sprintf("%s-%d", b.String(), i)
		}
		out[a] = true
	}
	return out
}

// maintainerDoc reports the Markdown files whose citations of code are checked.
func maintainerDoc(p string) bool {
	switch p {
	case "CONTRIBUTING.md", "docs/design.md", "docs/adversarial.md", "docs/benchmarks/README.md":
		return true
	}
	return false
}

// userDoc reports the Markdown files that must cite no code: the README, SECURITY.md and the
// guides of docs/ (generated references included), but not the maintainer docs, the changelog,
// the release and CI docs and the dated benchmark results.
func userDoc(p string) bool {
	switch {
	case maintainerDoc(p), p == "CHANGELOG.md", p == "docs/release.md", p == "docs/ci.md", strings.HasPrefix(p, "docs/benchmarks/"):
		return false
	case p == "README.md", p == "SECURITY.md", strings.HasPrefix(p, "docs/"):
		return true
	}
	return false
}

// markdownLines returns the lines of the Markdown files that keep selects.
func markdownLines(root string, keep func(string) bool) ([]text, error) {
	mds, err := markdownFiles(root)
	if err != nil {
		return nil, err
	}
	var texts []text
	for _, p := range mds {
		if !keep(p) {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			return nil, err
		}
		for i, line := range strings.Split(string(raw), "\n") {
			texts = append(texts, text{file: p, line: i + 1, s: line})
		}
	}
	return texts, nil
}

// text is one line of documentation.
type text struct {
	file string
	line int
	s    string
	goc  bool // a Go comment: plain pkg.Name forms are checked too
}

// check returns the names cited in tx that are not declared.
func (d *decls) check(tx text) []string {
	var out []string
	seen := map[string]bool{}
	report := func(name, why string) {
		if seen[name] {
			return
		}
		seen[name] = true
		out = append(out, fmt.Sprintf("%s %s", name, why))
	}
	for _, loc := range testName.FindAllStringIndex(tx.s, -1) {
		name := tx.s[loc[0]:loc[1]]
		if elsewhere.MatchString(tx.s[:loc[0]]) {
			continue
		}
		d.checked++
		if !d.funcs[name] {
			report(name, "is not a function of this repository")
		}
	}
	cands := qualified.FindAllStringSubmatchIndex(tx.s, -1)
	if tx.goc {
		cands = append(cands, plainQualified.FindAllStringSubmatchIndex(tx.s, -1)...)
	}
	for _, loc := range cands {
		if elsewhere.MatchString(tx.s[:loc[2]]) {
			continue
		}
		cited := tx.s[loc[2]:loc[3]]
		parts := strings.Split(cited, ".")
		if fileExtensions[parts[len(parts)-1]] {
			continue // a file name: schema.go
		}
		ok, resolvable := d.resolve(parts)
		if resolvable {
			d.checked++
		}
		if resolvable && !ok {
			report(cited, "is not declared in this repository")
		}
	}
	return out
}

// cited returns the names of this repository that tx cites: tests, benchmarks, fuzz targets and
// examples, and `pkg.Name` forms that this repository declares.
func (d *decls) cited(tx text) []string {
	var out []string
	for _, loc := range testName.FindAllStringIndex(tx.s, -1) {
		if !elsewhere.MatchString(tx.s[:loc[0]]) {
			out = append(out, tx.s[loc[0]:loc[1]])
		}
	}
	for _, loc := range qualified.FindAllStringSubmatchIndex(tx.s, -1) {
		if elsewhere.MatchString(tx.s[:loc[2]]) {
			continue
		}
		cited := tx.s[loc[2]:loc[3]]
		parts := strings.Split(cited, ".")
		if fileExtensions[parts[len(parts)-1]] {
			continue
		}
		// Only a declared name: a Helm value whose first part is the name of a package is not code.
		if ok, resolvable := d.resolve(parts); ok && resolvable {
			out = append(out, cited)
		}
	}
	return out
}

// resolve looks parts up: pkg.Name, pkg.Type.Member or Type.Member. resolvable is false when the
// qualifier is not a package or type of this repository (another project's, or a field path).
func (d *decls) resolve(parts []string) (ok, resolvable bool) {
	if len(parts) < 2 || len(parts) > 3 {
		return false, false
	}
	if pkgs, isPkg := d.aliases[parts[0]]; isPkg {
		for pkg := range pkgs {
			if !d.packages[pkg][parts[1]] {
				continue
			}
			if len(parts) == 2 {
				return true, true
			}
			if found, res := d.member(parts[1], parts[2], 0); found || !res {
				return true, true
			}
		}
		// A name that is another module's package too (validation, v1) may cite that one.
		return false, !d.external[parts[0]]
	}
	if len(parts) != 2 {
		return false, false
	}
	if _, isType := d.members[parts[0]]; !isType {
		return false, false
	}
	found, res := d.member(parts[0], parts[1], 0)
	return found, res
}

// member looks up a method or field of a type, through the embedded types of this repository;
// resolvable is false when an embedded type is another project's (the member may be promoted from it).
func (d *decls) member(typ, name string, depth int) (found, resolvable bool) {
	if d.members[typ][name] {
		return true, true
	}
	if depth > 3 {
		return false, false
	}
	resolvable = true
	for _, e := range d.embeds[typ] {
		if _, ours := d.members[e]; !ours {
			resolvable = false
			continue
		}
		f, r := d.member(e, name, depth+1)
		if f {
			return true, true
		}
		resolvable = resolvable && r
	}
	return false, resolvable
}

// collect parses every Go file of the repository (with its tests, without bin/ and .local/) and
// returns what they declare and the lines of their comments.
func collect(root string) (*decls, []text, error) {
	d := &decls{
		funcs:    map[string]bool{},
		packages: map[string]map[string]bool{},
		members:  map[string]map[string]bool{},
		embeds:   map[string][]string{},
		aliases:  map[string]map[string]bool{},
		external: map[string]bool{},
	}
	module, err := modulePath(root)
	if err != nil {
		return nil, nil, err
	}
	files, err := goFiles(root)
	if err != nil {
		return nil, nil, err
	}
	fset := token.NewFileSet()
	dirPackage := map[string]string{} // import path -> package name
	type imp struct{ name, path string }
	var imports []imp
	var comments []text
	for _, rel := range files {
		f, err := parser.ParseFile(fset, filepath.Join(root, rel), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, nil, err
		}
		pkg := strings.TrimSuffix(f.Name.Name, "_test")
		if !strings.HasSuffix(f.Name.Name, "_test") {
			dirPackage[module+"/"+filepath.ToSlash(filepath.Dir(rel))] = pkg
		}
		names := d.packages[pkg]
		if names == nil {
			names = map[string]bool{}
			d.packages[pkg] = names
		}
		d.declare(f, names)
		for _, is := range f.Imports {
			p, _ := strconv.Unquote(is.Path.Value)
			name := ""
			if is.Name != nil {
				name = is.Name.Name
			}
			imports = append(imports, imp{name, p})
		}
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				start := fset.Position(c.Pos()).Line
				for i, line := range strings.Split(c.Text, "\n") {
					comments = append(comments, text{file: filepath.ToSlash(rel), line: start + i, s: line, goc: true})
				}
			}
		}
	}
	for _, pkg := range dirPackage {
		add(d.aliases, pkg, pkg)
	}
	for _, im := range imports {
		pkg, ours := dirPackage[im.path]
		name := im.name
		if name == "" || name == "_" || name == "." {
			if !ours {
				d.external[lastElem(im.path)] = true
				continue
			}
			name = pkg
		}
		if ours {
			add(d.aliases, name, pkg)
		} else {
			d.external[name] = true
		}
	}
	return d, comments, nil
}

// declare records the top-level names of f, and the methods and fields of its types.
func (d *decls) declare(f *ast.File, names map[string]bool) {
	for _, decl := range f.Decls {
		switch x := decl.(type) {
		case *ast.FuncDecl:
			if x.Recv == nil {
				names[x.Name.Name] = true
				d.funcs[x.Name.Name] = true
				continue
			}
			if typ := recvType(x.Recv.List[0].Type); typ != "" {
				add(d.members, typ, x.Name.Name)
			}
		case *ast.GenDecl:
			for _, spec := range x.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					names[s.Name.Name] = true
					if d.members[s.Name.Name] == nil {
						d.members[s.Name.Name] = map[string]bool{}
					}
					d.declareMembers(s.Name.Name, s.Type)
				case *ast.ValueSpec:
					for _, n := range s.Names {
						names[n.Name] = true
					}
				}
			}
		}
	}
}

func (d *decls) declareMembers(typ string, e ast.Expr) {
	switch t := e.(type) {
	case *ast.StructType:
		for _, fl := range t.Fields.List {
			if len(fl.Names) == 0 {
				name := typeName(fl.Type)
				add(d.members, typ, name)
				d.embeds[typ] = append(d.embeds[typ], name)
			}
			for _, n := range fl.Names {
				add(d.members, typ, n.Name)
			}
		}
	case *ast.InterfaceType:
		for _, m := range t.Methods.List {
			for _, n := range m.Names {
				add(d.members, typ, n.Name)
			}
			if len(m.Names) == 0 {
				d.embeds[typ] = append(d.embeds[typ], typeName(m.Type))
			}
		}
	}
}

func recvType(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return recvType(t.X)
	case *ast.IndexExpr:
		return recvType(t.X)
	case *ast.IndexListExpr:
		return recvType(t.X)
	case *ast.Ident:
		return t.Name
	}
	return ""
}

// typeName is the name of an embedded type (its selector's name for another package's).
func typeName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return typeName(t.X)
	case *ast.SelectorExpr:
		return t.Sel.Name
	case *ast.Ident:
		return t.Name
	case *ast.IndexExpr:
		return typeName(t.X)
	}
	return ""
}

func add(m map[string]map[string]bool, k, v string) {
	if m[k] == nil {
		m[k] = map[string]bool{}
	}
	m[k][v] = true
}

func lastElem(path string) string {
	elem := path[strings.LastIndex(path, "/")+1:]
	// A major version suffix is not the package name (k8s.io/.../v1 is, gopkg.in/yaml.v3 is not).
	if i := strings.Index(elem, ".v"); i > 0 {
		elem = elem[:i]
	}
	return elem
}

// skipDir: the control plane's binaries and downloads, local state, git.
func skipDir(rel string) bool {
	switch rel {
	case "bin", ".local", ".git":
		return true
	}
	return strings.HasPrefix(filepath.Base(rel), ".") && rel != "."
}

// goFiles lists the repository's Go files, outside testdata folders (repoFiles).
func goFiles(root string) ([]string, error) {
	return repoFiles(root, ".go", "testdata")
}

// markdownFiles lists the repository's Markdown files (repoFiles).
func markdownFiles(root string) ([]string, error) {
	return repoFiles(root, ".md", "")
}

// repoFiles lists, relative to root and slash-separated, the files whose name ends in suffix, outside
// the folders skipDir leaves out and those named also (none when empty).
func repoFiles(root, suffix, also string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if e.IsDir() {
			if skipDir(rel) || also != "" && e.Name() == also {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, suffix) {
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	return out, err
}

// repoRoot is the folder of go.mod above the working directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

func modulePath(root string) (string, error) {
	raw, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "module "); ok {
			return strings.TrimSpace(rest), nil
		}
	}
	return "", fmt.Errorf("go.mod names no module")
}

// TestCheck runs the checker on a small module of its own.
func TestCheck(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/m\n\ngo 1.26.0\n",
		"guard/guard.go": `package guard

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Policy decides.
type Policy struct {
	Limit int
}

// Meta is metadata.
type Meta struct{ metav1.TypeMeta }

// Decide decides.
func (p *Policy) Decide() bool { return true }

// Env wraps Policy.
type Env struct{ *Policy }

func New() *Policy { return nil }
`,
		"guard/guard_test.go": "package guard\n\nimport \"testing\"\n\nfunc TestGuard(t *testing.T) {}\n\nfunc FuzzGuard(f *testing.F) {}\n",
		"other/other.go":      "package other\n\nimport gv \"example.com/m/guard\"\n\nvar _ = gv.New\n",
	}
	writeTree(t, root, files)
	d, _, err := collect(root)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		line string
		goc  bool
		want []string
	}{
		"a test that exists":                  {line: "guarded by TestGuard and `FuzzGuard`"},
		"a test that does not":                {line: "guarded by `TestGuardian`", want: []string{"TestGuardian is not a function of this repository"}},
		"a test of upstream":                  {line: "as upstream's TestGuardian does"},
		"a test named after its project":      {line: "operator-controller's `TestGuardian`"},
		"pkg.Func":                            {line: "`guard.New` and [guard.Policy]"},
		"pkg.Func missing":                    {line: "`guard.Old()`", want: []string{"guard.Old is not declared in this repository"}},
		"an import alias":                     {line: "`gv.New`"},
		"pkg.Type.Method":                     {line: "`guard.Policy.Decide`"},
		"pkg.Type.Method missing":             {line: "`guard.Policy.Undo`", want: []string{"guard.Policy.Undo is not declared in this repository"}},
		"Type.Method and Type.Field":          {line: "`Policy.Decide` sets `Policy.Limit`"},
		"Type.Method missing":                 {line: "`Policy.Undo`", want: []string{"Policy.Undo is not declared in this repository"}},
		"promoted from a type of ours":        {line: "`Env.Decide`"},
		"not promoted from a type of ours":    {line: "`Env.Undo`", want: []string{"Env.Undo is not declared in this repository"}},
		"maybe promoted from another project": {line: "`Meta.GetObjectKind`"},
		"another project's package":           {line: "`metav1.Nothing` and `ctrl.LoggerFrom`"},
		"a file name":                         {line: "see `guard.go`"},
		"a field path":                        {line: "`spec.phases` and `self.type`"},
		"plain in a Go comment":               {line: "guard.Old is gone", goc: true, want: []string{"guard.Old is not declared in this repository"}},
		"plain in Markdown is prose":          {line: "guard.Old is gone"},
		"plain lower case in a Go comment":    {line: "guard.old is not a citation", goc: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := d.check(text{file: "x", line: 1, s: tc.line, goc: tc.goc})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("check(%q) (-want +got):\n%s", tc.line, diff)
			}
		})
	}
}

// writeTree writes files, by their path below root, with their folders.
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLinkChecks runs the link checker on a few files of its own.
func TestLinkChecks(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"README.md":     "# Title\n\n## Beside OLM v1 (`config/webhook-only`)\n\n## Beside OLM v1 (`config/webhook-only`)\n",
		"docs/guide.md": "# Guide\n\n```\n# not a heading\n```\n",
		"docs/x.yaml":   "a: b\n",
	}
	writeTree(t, root, files)
	anchors := map[string]map[string]bool{}
	for name, content := range files {
		if strings.HasSuffix(name, ".md") {
			anchors[name] = headingAnchors(content)
		}
	}
	cases := map[string]struct {
		from, target, want string
	}{
		"a file":                     {"docs/guide.md", "../README.md", ""},
		"a heading":                  {"docs/guide.md", "../README.md#beside-olm-v1-configwebhook-only", ""},
		"a repeated heading":         {"docs/guide.md", "../README.md#beside-olm-v1-configwebhook-only-1", ""},
		"a heading of the same file": {"README.md", "#title", ""},
		"no such file":               {"README.md", "docs/gone.md", "no such file"},
		"no such heading":            {"README.md", "docs/guide.md#not-a-heading", "no heading of docs/guide.md has the anchor #not-a-heading"},
		"a fragment of another file": {"README.md", "docs/x.yaml#a", "a #fragment of a file that is not Markdown"},
		"outside the repository":     {"README.md", "../elsewhere.md", "points outside the repository"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := checkLink(root, tc.from, tc.target, anchors); got != tc.want {
				t.Errorf("checkLink(%s, %s) = %q, want %q", tc.from, tc.target, got, tc.want)
			}
		})
	}
	got := markdownLinks("[a](a.md) `[b](b.md)` [c](https://x.io/c) ![d](d.png \"t\")\n```\n[e](e.md)\n```\n")
	want := []link{{1, "a.md"}, {1, "d.png"}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(link{})); diff != "" {
		t.Errorf("markdownLinks (-want +got):\n%s", diff)
	}
}
