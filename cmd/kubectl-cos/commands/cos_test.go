package commands

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/resource"

	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
)

func TestExplain(t *testing.T) {
	const call = `Internal error occurred: failed calling webhook "externalize.cos-externalizer.io": failed to call webhook: Post "https://127.0.0.1:4000/mutate?timeout=15s": `
	cos := schema.GroupResource{Group: "olm.operatorframework.io", Resource: "clusterobjectsets"}
	tests := map[string]struct {
		err  error
		want string
	}{
		"unknown authority": {errors.New(call + "tls: failed to verify certificate: x509: certificate signed by unknown authority"),
			"The API server does not trust the serving certificate of webhook externalize.cos-externalizer.io"},
		"client certificate missing": {errors.New(call + "remote error: tls: certificate required"),
			"Webhook externalize.cos-externalizer.io refused the API server's call for want of a client certificate"},
		"client certificate of an unknown CA": {errors.New(call + "remote error: tls: unknown certificate authority"),
			"Webhook externalize.cos-externalizer.io refused the client certificate the API server presented: no CA"},
		"connection refused": {errors.New(call + "dial tcp 127.0.0.1:4000: connect: connection refused"),
			"The API server cannot reach webhook externalize.cos-externalizer.io: the manager is not running or not ready"},
		"no endpoints": {errors.New(`Internal error occurred: failed calling webhook "validate.cos-externalizer.io": failed to call webhook: Post "https://svc.ns.svc:443/validate": no endpoints available for service "svc"`),
			"The API server cannot reach webhook validate.cos-externalizer.io"},
		"timeout": {errors.New(call + "context deadline exceeded"),
			"Webhook externalize.cos-externalizer.io did not answer in time"},
		"other webhook failure": {errors.New(call + "something else"),
			"The API server could not call webhook externalize.cos-externalizer.io: Post "},
		"forbidden":  {apierrors.NewForbidden(cos, "x", errors.New("no")), "You may not create ClusterObjectSets, not even as a dry run"},
		"not served": {apierrors.NewNotFound(cos, "x"), "The ClusterObjectSet API is not served"},
		"denied":     {errors.New(`admission webhook "other.example.com" denied the request: no`), "A webhook refused the test ClusterObjectSet: "},
		"other":      {errors.New("boom"), "The server-side dry run failed: boom"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := explain(tc.err, installMode{}); !strings.HasPrefix(got, tc.want) {
				t.Errorf("explain = %q, want it to start with %q", got, tc.want)
			}
		})
	}
}

func TestProgress(t *testing.T) {
	plan := &content.Plan{Secrets: []content.SecretOut{
		{Name: "a", Data: map[string][]byte{"k": make([]byte, 999)}},
		{Name: "b", Data: map[string][]byte{"k": make([]byte, 2999)}},
	}}
	for mode, want := range map[string][]string{
		"always": {"\rwriting [                              ] 0/2, 0.0 of 0.0 MB", "\rwriting [=======                       ] 1/2", "\rwriting [==============================] 2/2", "\r\033[K"},
		"never":  nil,
		"auto":   nil, // a buffer is not a terminal
	} {
		t.Run(mode, func(t *testing.T) {
			var out bytes.Buffer
			p := newProgress(&out, mode, plan, "writing")
			p.written(0, true)
			p.written(1, false)
			p.done()
			if want == nil && out.Len() > 0 {
				t.Errorf("printed %q", out.String())
			}
			for _, w := range want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("lacks %q in %q", w, out.String())
				}
			}
		})
	}
}

func TestReadFiles(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"b.yaml", "a.json", "c.yml", "notes.txt", "sub/z.yaml", "sub/deeper/y.yaml",
		"kust/kustomization.yaml", "kust/cm.yaml"} {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		data := f
		switch f {
		case "kust/kustomization.yaml":
			data = "resources: [cm.yaml]\nnamespace: ns\n"
		case "kust/cm.yaml":
			data = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n"
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "empty"), 0o700); err != nil {
		t.Fatal(err)
	}
	r := &root{IOStreams: genericiooptions.IOStreams{In: strings.NewReader("from stdin")}}
	in := func(p string) string { return filepath.Join(dir, p) }
	tests := map[string]struct {
		opts resource.FilenameOptions
		want []string
		err  string
	}{
		"folder":                 {opts: resource.FilenameOptions{Filenames: []string{dir}}, want: []string{"a.json", "b.yaml", "c.yml"}},
		"folder, recursive":      {opts: resource.FilenameOptions{Filenames: []string{in("sub")}, Recursive: true}, want: []string{"sub/deeper/y.yaml", "sub/z.yaml"}},
		"repeated -f, stdin":     {opts: resource.FilenameOptions{Filenames: []string{in("sub/z.yaml"), "-", in("c.yml")}}, want: []string{"sub/z.yaml", "-=from stdin", "c.yml"}},
		"a file of any name":     {opts: resource.FilenameOptions{Filenames: []string{in("notes.txt")}}, want: []string{"notes.txt"}},
		"glob":                   {opts: resource.FilenameOptions{Filenames: []string{in("*.y*ml")}}, want: []string{"b.yaml", "c.yml"}},
		"-k":                     {opts: resource.FilenameOptions{Kustomize: in("kust")}, want: []string{"kust=apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  namespace: ns\n"}},
		"missing":                {opts: resource.FilenameOptions{Filenames: []string{in("missing")}}, err: "does not exist"},
		"empty folder":           {opts: resource.FilenameOptions{Filenames: []string{in("empty")}}, err: "no .yaml, .yml or .json files"},
		"-f and -k":              {opts: resource.FilenameOptions{Filenames: []string{dir}, Kustomize: in("kust")}, err: "only one of -f or -k"},
		"-k and -R":              {opts: resource.FilenameOptions{Kustomize: in("kust"), Recursive: true}, err: "cannot be used with -R"},
		"a URL":                  {opts: resource.FilenameOptions{Filenames: []string{"https://example.com/x.yaml"}}, err: "URLs are not read"},
		"-k of no kustomization": {opts: resource.FilenameOptions{Kustomize: in("sub")}, err: "kustomize build"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r.In = strings.NewReader("from stdin")
			got, err := r.readFiles(tc.opts)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, i := range got {
				rel, _ := filepath.Rel(dir, i.name)
				switch {
				case i.name == "-":
					rel = "-=" + string(i.data)
				case rel == "kust":
					rel += "=" + string(i.data)
				}
				names = append(names, rel)
			}
			if diff := cmp.Diff(tc.want, names); diff != "" {
				t.Errorf("read (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWithLastApplied(t *testing.T) {
	tests := map[string]struct {
		annotations map[string]any
		// want is the annotation: the object as kubectl writes it, with its other annotations, an
		// empty map when there are none.
		want string
	}{
		"other annotations": {annotations: map[string]any{"a": "b", admission.LastAppliedAnnotation: "old"},
			want: `{"apiVersion":"v1","kind":"X","metadata":{"annotations":{"a":"b"},"name":"x"}}` + "\n"},
		"only the old one": {annotations: map[string]any{admission.LastAppliedAnnotation: "old"},
			want: `{"apiVersion":"v1","kind":"X","metadata":{"annotations":{},"name":"x"}}` + "\n"},
		"none": {want: `{"apiVersion":"v1","kind":"X","metadata":{"annotations":{},"name":"x"}}` + "\n"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			md := map[string]any{"name": "x"}
			if tc.annotations != nil {
				md["annotations"] = tc.annotations
			}
			u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "X", "metadata": md}}
			modified, err := withLastApplied(u)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, u.GetAnnotations()[admission.LastAppliedAnnotation]); diff != "" {
				t.Errorf("annotation (-want +got):\n%s", diff)
			}
			if !bytes.Contains(modified, []byte("last-applied-configuration")) {
				t.Errorf("modified: %s", modified)
			}
		})
	}
}

func TestVersionAndVerbosity(t *testing.T) {
	tests := map[string]struct {
		args []string
		want []string
	}{
		"plain":          {[]string{"version"}, []string{"Plugin Version: dev\n"}},
		"json":           {[]string{"version", "-o", "json"}, []string{`"pluginVersion": {`, `"gitVersion": "dev"`, `"platform": "`}},
		"yaml":           {[]string{"version", "-o", "yaml"}, []string{"pluginVersion:\n", "  gitVersion: dev\n"}},
		"--version":      {[]string{"--version"}, []string{"kubectl cos version dev"}},
		"-v is klog's":   {[]string{"-v=6", "version"}, []string{"Plugin Version: dev\n"}},
		"--v is klog's":  {[]string{"--v", "2", "version"}, []string{"Plugin Version: dev\n"}},
		"--vmodule too":  {[]string{"--vmodule=request=6", "version"}, []string{"Plugin Version: dev\n"}},
		"bad output":     {[]string{"version", "-o", "wide"}, nil},
		"-v needs level": {[]string{"-v", "version"}, nil},
	}
	// klog's flags are process-wide: leave them as found.
	defer func() {
		cmd := NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard})
		cmd.SetArgs([]string{"--v=0", "--vmodule=", "version"})
		if err := cmd.Execute(); err != nil {
			t.Error(err)
		}
	}()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			cmd := NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
			cmd.SetArgs(tc.args)
			err := cmd.Execute()
			if tc.want == nil {
				if err == nil {
					t.Fatalf("no error; printed %q", out.String())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("lacks %q in %q", w, out.String())
				}
			}
		})
	}
}

func TestFilenamesFlag(t *testing.T) {
	dir := t.TempDir()
	comma := filepath.Join(dir, "a,b")
	if err := os.Mkdir(comma, 0o700); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		values []string
		want   []string
	}{
		"repeated":                 {[]string{"x.yaml", "y.yaml"}, []string{"x.yaml", "y.yaml"}},
		"comma-separated":          {[]string{"x.yaml,y.yaml", "-"}, []string{"x.yaml", "y.yaml", "-"}},
		"an existing path, whole":  {[]string{comma}, []string{comma}},
		"a missing path, split":    {[]string{filepath.Join(dir, "c,d")}, []string{filepath.Join(dir, "c"), "d"}},
		"quoted, as kubectl's CSV": {[]string{`"e,f",g`}, []string{"e,f", "g"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var f filenames
			for _, v := range tc.values {
				if err := f.Set(v); err != nil {
					t.Fatal(err)
				}
			}
			if diff := cmp.Diff(tc.want, []string(f)); diff != "" {
				t.Errorf("-f (-want +got):\n%s", diff)
			}
		})
	}
}
