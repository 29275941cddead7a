package plugin_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/cmd/kubectl-cos/commands"
	"github.com/cos-externalizer/cos-externalizer/internal/manifests"
	"github.com/cos-externalizer/cos-externalizer/internal/secretdata"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// TestReadCommandsOnOLMsCRD: beside OLM the API server serves OLM's ClusterObjectSet CRD, not ours
// (no `cos` short name, other columns): on a control plane of its own with OLM's CRD, as its
// release renders it (internal/olmlayout/testdata), in place of ours, the read commands work:
// inspect resolves and verifies a ClusterObjectSet of refs to object-data Secrets, check finds the
// API served, and size reads the served CRD's limits.
func TestReadCommandsOnOLMsCRD(t *testing.T) {
	env := testenv.StartFor(t)
	c := env.Client

	t.Log("OLM's CRD in place of ours")
	ours := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "clusterobjectsets." + olmv1.GroupVersion.Group}}
	if err := c.Delete(ctx, ours); err != nil {
		t.Fatal(err)
	}
	framework.WaitGone(ctx, t, c, ours)
	objs, err := manifests.ReadFile(filepath.Join("..", "..", "..", "internal", "olmlayout", "testdata", "clusterobjectsets-crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	olmCRD := &apiextensionsv1.CustomResourceDefinition{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(objs[0].Object, olmCRD); err != nil {
		t.Fatal(err)
	}
	if len(olmCRD.Spec.Names.ShortNames) != 0 {
		t.Fatalf("OLM's CRD has short names %v: the test data is not what upstream renders", olmCRD.Spec.Names.ShortNames)
	}
	if err := c.Create(ctx, olmCRD); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(ctx, t, "OLM's CRD to be established", func(ctx context.Context) (bool, string) {
		got := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(olmCRD), got); err != nil {
			return false, err.Error()
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, ""
			}
		}
		return false, fmt.Sprint(got.Status.Conditions)
	})

	t.Log("a ClusterObjectSet of refs to object-data Secrets")
	const name = "olm-crd-1"
	env.EnsureNamespace(t, testenv.SystemNamespace)
	set, plan, err := testenv.StoredForm(builders.COS(name, builders.WithPhase("deploy", builders.InlineConfigMaps("default", name, 2)...)))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range plan.Secrets {
		if err := c.Create(ctx, secretdata.ObjectDataSecret(name, testenv.SystemNamespace, s)); err != nil {
			t.Fatal(err)
		}
	}
	framework.Eventually(ctx, t, "OLM's CRD to serve ClusterObjectSets", func(ctx context.Context) (bool, string) {
		err := c.Create(ctx, set.DeepCopy())
		return err == nil, fmt.Sprint(err)
	})

	run := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		cmd := commands.NewCommandWithHooks(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut}, commands.Hooks{})
		cmd.SetArgs(append([]string{"--kubeconfig=" + env.Kubeconfig}, args...))
		err := cmd.ExecuteContext(ctx)
		return squeeze(out.String() + errOut.String()), err
	}

	out, err := run("inspect", name)
	if err != nil {
		t.Fatalf("inspect: %v\n%s", err, out)
	}
	for _, s := range []string{"ConfigMap default/" + name + "-1", "digest verified;", "immutable, type " + olmv1.SecretTypeObjectData} {
		if !strings.Contains(out, s) {
			t.Errorf("inspect lacks %q:\n%s", s, out)
		}
	}

	// No manager runs here: check fails on the webhooks, but finds OLM's CRD serving the API.
	out, _ = run("check")
	if want := "[ok] The ClusterObjectSet API (" + olmv1.GroupVersion.String() + ") is served."; !strings.Contains(out, want) {
		t.Errorf("check lacks %q:\n%s", want, out)
	}

	file := writeFile(t, builders.COS("olm-crd-2", builders.WithPhase("deploy", builders.InlineConfigMaps("default", "olm-crd-2", 2)...)))
	out, err = run("size", "-f", file)
	if err != nil {
		t.Fatalf("size: %v\n%s", err, out)
	}
	if !strings.Contains(out, "olm-crd-2") {
		t.Errorf("size does not name the ClusterObjectSet:\n%s", out)
	}
	t.Logf("inspect, check and size on OLM's CRD:\n%s", out)
}
