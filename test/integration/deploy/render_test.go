package deploy_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cos-externalizer/cos-externalizer/internal/manifests"
	"github.com/cos-externalizer/cos-externalizer/test/controlplane"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// renderedManager is what a test reads of the manager's Deployment in a rendering.
type renderedManager struct {
	Image    string
	Args     []string // after the overlay's own
	Replicas int64
	CAVolume bool // the client CA's volume of components/webhook-client-ca
}

// TestRenderOverlay runs hack/render-overlay.sh, what make deploy applies and make release writes: the
// overlay with the manager's image set (a tag YAML would read as a number stays a string), the
// components added, the flags appended to the manager's arguments and the replicas set. A component
// or overlay that does not exist is refused with its path, and nothing is printed.
func TestRenderOverlay(t *testing.T) {
	kubectl, err := controlplane.Binary("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	digest := "reg.example/cos@sha256:" + strings.Repeat("a", 64)
	tests := map[string]struct {
		args    []string
		want    renderedManager
		wantErr string
	}{
		"a tag":                        {args: []string{"default", "reg.example/cos:v1.2.3"}, want: renderedManager{Image: "reg.example/cos:v1.2.3"}},
		"a tag that reads as a number": {args: []string{"default", "reg.example:5000/cos:1"}, want: renderedManager{Image: "reg.example:5000/cos:1"}},
		"no tag":                       {args: []string{"self-signed", "reg.example:5000/cos"}, want: renderedManager{Image: "reg.example:5000/cos:latest"}},
		"a digest":                     {args: []string{"webhook-only", digest}, want: renderedManager{Image: digest}},
		"components, flags and replicas": {
			args: []string{"-c", "components/webhook-client-ca", "-a", "--zap-log-level=debug", "-a", "--leader-elect=false", "-r", "3", "default", "x:1"},
			want: renderedManager{Image: "x:1", Replicas: 3, CAVolume: true, Args: []string{
				"--webhook-client-ca=/etc/cos-externalizer/webhook-client-ca/ca.crt", "--zap-log-level=debug", "--leader-elect=false"}}},
		"an unknown component": {args: []string{"-c", "components/nope", "default", "x:1"}, wantErr: "no component config/components/nope"},
		"an unknown overlay":   {args: []string{"nope", "x:1"}, wantErr: "no overlay config/nope"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			out, stderr, err := renderOverlay(t, kubectl, tc.args...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(stderr, tc.wantErr) || len(out) > 0 {
					t.Fatalf("err %v, stderr %q, %d bytes out; want an error %q and nothing out", err, stderr, len(out), tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v: %s", err, stderr)
			}
			overlay, _, _ := renderOverlay(t, kubectl, tc.args[len(tc.args)-2], "x")
			base := managerOf(t, overlay)
			got := managerOf(t, out)
			if !cmp.Equal(got.Args[:len(base.Args)], base.Args) {
				t.Fatalf("the overlay's own flags changed: %q, want %q first", got.Args, base.Args)
			}
			got.Args = got.Args[len(base.Args):]
			if len(got.Args) == 0 {
				got.Args = nil
			}
			if tc.want.Replicas == 0 {
				tc.want.Replicas = base.Replicas
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("rendered manager (-want +got):\n%s", d)
			}
		})
	}
}

func renderOverlay(t *testing.T, kubectl string, args ...string) (out []byte, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(testenv.RepoPath(t, "hack", "render-overlay.sh"), args...)
	cmd.Env = append(os.Environ(), "KUBECTL="+kubectl)
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err = cmd.Output()
	return out, errb.String(), err
}

// managerOf reads the manager's Deployment out of rendered manifests.
func managerOf(t *testing.T, rendered []byte) renderedManager {
	t.Helper()
	objs, err := manifests.Parse(rendered)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() != "Deployment" || o.GetName() != "cos-externalizer" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		if len(containers) == 0 {
			t.Fatal("the manager's Deployment has no container")
		}
		var m renderedManager
		c, _ := containers[0].(map[string]any)
		m.Image, _, _ = unstructured.NestedString(c, "image")
		m.Args, _, _ = unstructured.NestedStringSlice(c, "args")
		m.Replicas, _, _ = unstructured.NestedInt64(o.Object, "spec", "replicas")
		volumes, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "volumes")
		for _, v := range volumes {
			if vm, _ := v.(map[string]any); vm["name"] == "webhook-client-ca" {
				m.CAVolume = true
			}
		}
		return m
	}
	t.Fatal("no Deployment cos-externalizer rendered")
	return renderedManager{}
}
