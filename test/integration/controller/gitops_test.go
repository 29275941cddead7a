package controller_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// gitopsTestdata is where the statuses of real rollouts are kept for the GitOps health checks: the
// Argo CD health check's catalogue testdata (hack/argocd), which the Flux health expressions' test
// (hack/flux) reads too. Both run in the tool modules hack/tools/argocd and hack/tools/flux (make
// test-gitops), against Argo CD's and Flux's own code.
var gitopsTestdata = []string{"hack", "argocd", "resource_customizations", "olm.operatorframework.io", "ClusterObjectSet", "testdata"}

// recordEnv, set to 1, rewrites the recorded files instead of comparing with them.
const recordEnv = "COS_RECORD_GITOPS_TESTDATA"

// TestGitOpsHealthTestdataIsWhatTheReconcilerWrites drives a ClusterObjectSet into each state the
// GitOps health checks tell apart, with the real reconciler, and compares each object (times and
// server-set identities fixed) with the file the health checks are tested on: a change in what the
// reconciler writes shows here, and is recorded with COS_RECORD_GITOPS_TESTDATA=1.
func TestGitOpsHealthTestdataIsWhatTheReconcilerWrites(t *testing.T) {
	ns := "gitops-health"
	testenv.Env.EnsureNamespace(t, ns)
	pvc := func(name string) *unstructured.Unstructured {
		return object(t, fmt.Sprintf(`{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":%q,"namespace":%q},
			"spec":{"accessModes":["ReadWriteOnce"],"storageClassName":"","volumeName":"no-such-pv","resources":{"requests":{"storage":"1Mi"}}}}`, name, ns))
	}
	version := func(v string) builders.Option {
		return builders.WithAnnotations(map[string]string{olmv1.AnnotationBundleVersion: v})
	}
	configMapSecret := func(t *testing.T, name string, immutable bool) olmv1.ClusterObjectSetObject {
		data, err := content.Canonical(builders.ConfigMap(ns, name, map[string]string{"key": "value"}).Object)
		if err != nil {
			t.Fatal(err)
		}
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-data"},
			Type: olmv1.SecretTypeObjectData, Immutable: ptr.To(immutable), Data: map[string][]byte{"configmap": data}}
		if err := c().Create(ctx, sec); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { deleteSecret(t, client.ObjectKeyFromObject(sec)) })
		return builders.Ref(sec.Name, ns, "configmap")
	}
	type state struct {
		setup func(t *testing.T, name string) *olmv1.ClusterObjectSet
		// then runs once the first wait is over (nil: none), before the second wait.
		then                     func(t *testing.T, name string)
		condType, reason         string
		status                   metav1.ConditionStatus
		thenCondType, thenReason string
		thenStatus               metav1.ConditionStatus
	}
	archive := func(t *testing.T, name string) {
		patch := []byte(`{"spec":{"lifecycleState":"Archived"}}`)
		if err := c().Patch(ctx, &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Fatal(err)
		}
	}
	states := map[string]state{
		"rolling-out": {
			setup: func(t *testing.T, name string) *olmv1.ClusterObjectSet {
				return builders.COS(name, version("1.0.2"), builders.WithPhase("storage", builders.Inline(pvc(name))))
			},
			condType: olmv1.ConditionAvailable, status: metav1.ConditionFalse, reason: olmv1.ReasonProbeFailure,
		},
		"succeeded": {
			setup: func(t *testing.T, name string) *olmv1.ClusterObjectSet {
				return builders.COS(name, version("1.0.0"), builders.WithPhase("configuration", builders.InlineConfigMaps(ns, name, 1)...))
			},
			condType: olmv1.ConditionSucceeded, status: metav1.ConditionTrue, reason: olmv1.ReasonSucceeded,
		},
		"deadline-exceeded": {
			setup: func(t *testing.T, name string) *olmv1.ClusterObjectSet {
				return builders.COS(name, version("1.0.2"), builders.WithProgressDeadline(10), builders.WithPhase("storage", builders.Inline(pvc(name))))
			},
			condType: olmv1.ConditionProgressing, status: metav1.ConditionFalse, reason: olmv1.ReasonProgressDeadlineExceeded,
		},
		"blocked": {
			setup: func(t *testing.T, name string) *olmv1.ClusterObjectSet {
				return builders.COS(name, builders.WithPhase("configuration", configMapSecret(t, name, false)))
			},
			condType: olmv1.ConditionProgressing, status: metav1.ConditionFalse, reason: olmv1.ReasonBlocked,
		},
		"retrying": {
			setup: func(t *testing.T, name string) *olmv1.ClusterObjectSet {
				return builders.COS(name, builders.WithPhase("configuration", builders.Ref(name+"-data", ns, "configmap")))
			},
			condType: olmv1.ConditionProgressing, status: metav1.ConditionTrue, reason: olmv1.ReasonRetrying,
		},
		"empty": {
			setup: func(t *testing.T, name string) *olmv1.ClusterObjectSet {
				return builders.COS(name, version("1.0.3"))
			},
			condType: olmv1.ConditionProgressing, status: metav1.ConditionTrue, reason: olmv1.ReasonRollingOut,
		},
		"archived": {
			setup: func(t *testing.T, name string) *olmv1.ClusterObjectSet {
				return builders.COS(name, version("0.9.0"), builders.WithPhase("configuration", builders.InlineConfigMaps(ns, name, 1)...))
			},
			condType: olmv1.ConditionSucceeded, status: metav1.ConditionTrue, reason: olmv1.ReasonSucceeded,
			then: archive, thenCondType: olmv1.ConditionProgressing, thenStatus: metav1.ConditionFalse, thenReason: olmv1.ReasonArchived,
		},
	}
	for name, tc := range states {
		t.Run(name, func(t *testing.T) {
			cosName := "gitops-" + name
			create(t, tc.setup(t, cosName))
			testenv.Env.RemoveAfter(t, cosName)
			got := testenv.Env.WaitForCondition(t, cosName, tc.condType, tc.status, tc.reason)
			if tc.then != nil {
				tc.then(t, cosName)
				got = testenv.Env.WaitForCondition(t, cosName, tc.thenCondType, tc.thenStatus, tc.thenReason)
			}
			b, err := recordable(got)
			if err != nil {
				t.Fatal(err)
			}
			path := testenv.RepoPath(t, append(gitopsTestdata, "rollout-"+name+".yaml")...)
			if os.Getenv(recordEnv) == "1" {
				if err := os.WriteFile(path, b, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (record it with %s=1)", err, recordEnv)
			}
			if diff := cmp.Diff(string(want), string(b)); diff != "" {
				t.Errorf("%s is not what the reconciler writes now (record it again with %s=1; -file +now):\n%s", filepath.Base(path), recordEnv, diff)
			}
		})
	}
}

// recordedTime replaces every time the API server or the reconciler stamps.
const recordedTime = "2026-01-01T00:00:00Z"

// recordable renders cos as the health checks' testdata: apiVersion and kind set, the fields the
// API server assigns (uid, resourceVersion, managedFields) dropped and every time fixed, so that the
// file depends only on what the reconciler decides.
func recordable(cos *olmv1.ClusterObjectSet) ([]byte, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cos)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(olmv1.GroupVersion.String())
	u.SetKind(olmv1.ClusterObjectSetKind)
	for _, f := range []string{"uid", "resourceVersion", "managedFields"} {
		unstructured.RemoveNestedField(u.Object, "metadata", f)
	}
	if err := unstructured.SetNestedField(u.Object, recordedTime, "metadata", "creationTimestamp"); err != nil {
		return nil, err
	}
	for _, list := range [][]string{{"status", "conditions"}, {"status", "observedPhases"}} {
		items, _, err := unstructured.NestedSlice(u.Object, list...)
		if err != nil {
			return nil, err
		}
		for _, item := range items {
			entry := item.(map[string]any)
			for _, f := range []string{"lastTransitionTime", "completedAt"} {
				if _, ok := entry[f]; ok {
					entry[f] = recordedTime
				}
			}
		}
		if items != nil {
			if err := unstructured.SetNestedSlice(u.Object, items, list...); err != nil {
				return nil, err
			}
		}
	}
	b, err := yaml.Marshal(u.Object)
	if err != nil {
		return nil, err
	}
	header := []byte("# Recorded from a real rollout by test/integration/controller (TestGitOpsHealthTestdataIsWhatTheReconcilerWrites);\n# times fixed. Do not edit: record again with COS_RECORD_GITOPS_TESTDATA=1.\n")
	return bytes.Join([][]byte{header, b}, nil), nil
}
