//go:build gitops_e2e

package argocd_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/argoproj/argo-cd/gitops-engine/v3/pkg/cache"
	gitopssync "github.com/argoproj/argo-cd/gitops-engine/v3/pkg/sync"
	"github.com/argoproj/argo-cd/gitops-engine/v3/pkg/sync/common"
	"github.com/argoproj/argo-cd/gitops-engine/v3/pkg/utils/kube"
	"github.com/argoproj/argo-cd/gitops-engine/v3/pkg/utils/tracing"
	"github.com/argoproj/argo-cd/v3/util/lua"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/cmd/cos-externalizer/app"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// shiftedClock runs the reconciler 15 minutes ahead: a 10-minute progress deadline has passed for
// every ClusterObjectSet at its creation.
type shiftedClock struct{ clock.RealClock }

func (shiftedClock) Now() time.Time { return time.Now().Add(15 * time.Minute) }

const (
	wavesNamespace = "waves"
	syncWave       = "argocd.argoproj.io/sync-wave"
	syncOptions    = "argocd.argoproj.io/sync-options"
)

var widgetGVR = schema.GroupVersionResource{Group: "waves.example.com", Version: "v1", Resource: "widgets"}

// TestSyncWaves syncs two waves with gitops-engine's sync (the engine of Argo CD's application
// controller, driven as the controller drives it: runSync) and the health check of docs/gitops.md's argocd-cm, against the local control plane
// and the manager with its webhooks: wave 0 a ClusterObjectSet that installs a CRD and waits on a
// PersistentVolumeClaim until the test creates its volume, wave 1 a custom resource of that CRD.
// The sync moves to wave 1 only once the set has Succeeded (checked when the engine changes waves),
// and a set whose progress deadline passes stops the sync, failed, with its message.
func TestSyncWaves(t *testing.T) {
	env := testenv.StartFor(t)
	ctx := context.Background()
	mgr, err := env.StartManagerWith(ctx, func(o *app.Options) { o.Clock = shiftedClock{} })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mgr.Stop() })
	env.EnsureNamespace(t, wavesNamespace)
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}

	overrides := docsOverrides(t)
	log := testr.NewWithOptions(t, testr.Options{Verbosity: 0})
	clusterCache := cache.NewClusterCache(env.Config, cache.SetLogr(log))
	if err := clusterCache.EnsureSynced(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { clusterCache.Invalidate() })

	t.Run("wave 1 waits for the set to succeed", func(t *testing.T) {
		set := toUnstructured(t, builders.COS("waves-operator", builders.WithAnnotations(map[string]string{syncWave: "0"}),
			builders.WithPhase("crds", builders.Inline(builders.CRD("waves.example.com", "Widget"))),
			builders.WithPhase("storage", builders.Inline(pvc(wavesNamespace, "gate", "waves-pv")))))
		widget := widgetObject("my-widget")

		var mu sync.Mutex
		var atWaves []string // the set's Progressing and Succeeded when the engine had applied each wave
		hook := func(_ common.SyncPhase, wave int, _ bool) error {
			cos := &olmv1.ClusterObjectSet{}
			if err := env.Client.Get(ctx, client.ObjectKey{Name: set.GetName()}, cos); err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			atWaves = append(atWaves, fmt.Sprintf("wave %d: %s", wave, summary(cos)))
			return nil
		}
		progress := &syncProgress{}
		done := runSync(ctx, t, clusterCache, env.Config, log, overrides, hook, progress, set, widget)

		// The set rolls out, and waits on the claim; the engine says it waits for the set's health,
		// and has applied nothing of wave 1.
		env.WaitForCondition(t, set.GetName(), olmv1.ConditionAvailable, metav1.ConditionFalse, olmv1.ReasonProbeFailure)
		waiting := "waiting for healthy state of olm.operatorframework.io/ClusterObjectSet/" + set.GetName()
		framework.Eventually(ctx, t, "the sync waiting for the set's health", func(context.Context) (bool, string) {
			m := progress.get()
			return m == waiting, m
		})
		if _, err := dyn.Resource(widgetGVR).Namespace(wavesNamespace).Get(ctx, widget.GetName(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("the wave-1 Widget while the set rolls out: %v, want not found", err)
		}
		select {
		case r := <-done:
			t.Fatalf("the sync ended while the set rolls out: %+v", r)
		default:
		}

		createVolume(ctx, t, env.Clientset, "waves-pv")
		r := wait(t, done)
		if r.phase != common.OperationSucceeded {
			t.Errorf("the sync ended %s: %s", r.phase, r.message)
		}
		for _, res := range r.results {
			if res.Status != common.ResultCodeSynced || res.HookPhase == common.OperationFailed || res.HookPhase == common.OperationError {
				t.Errorf("%s: %s %s %q", res.ResourceKey, res.Status, res.HookPhase, res.Message)
			}
		}
		if _, err := dyn.Resource(widgetGVR).Namespace(wavesNamespace).Get(ctx, widget.GetName(), metav1.GetOptions{}); err != nil {
			t.Errorf("the wave-1 Widget after the sync: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		// The engine calls the hook once it has applied a wave: the call for wave 1 sees the set
		// Succeeded, as it must have been for the engine to move on.
		var wave1 []string
		for _, w := range atWaves {
			if strings.HasPrefix(w, "wave 1: ") {
				wave1 = append(wave1, w)
			}
		}
		if len(wave1) == 0 {
			t.Fatalf("the engine never started wave 1 (wave hook calls: %q)", atWaves)
		}
		if !strings.Contains(wave1[0], "Succeeded=True") {
			t.Errorf("the engine started wave 1 with the set %q, want it Succeeded (all: %q)", wave1[0], atWaves)
		}
		t.Logf("wave hook calls: %q", atWaves)
	})

	t.Run("a failed set stops the sync, Degraded", func(t *testing.T) {
		set := toUnstructured(t, builders.COS("waves-failing", builders.WithProgressDeadline(10),
			builders.WithAnnotations(map[string]string{syncWave: "0", olmv1.AnnotationBundleVersion: "2.0.0"}),
			builders.WithPhase("storage", builders.Inline(pvc(wavesNamespace, "never", "no-such-pv")))))
		widget := widgetObject("never-created")
		r := wait(t, runSync(ctx, t, clusterCache, env.Config, log, overrides, nil, nil, set, widget))
		if r.phase != common.OperationFailed {
			t.Errorf("the sync ended %s (%s), want %s", r.phase, r.message, common.OperationFailed)
		}
		t.Logf("the sync ended %s: %s", r.phase, r.message)
		var found bool
		for _, res := range r.results {
			switch res.ResourceKey.Kind {
			case olmv1.ClusterObjectSetKind:
				found = true
				want := "Revision has not rolled out for 10 minute(s). Last status: Revision 2.0.0 is rolling out."
				if res.HookPhase != common.OperationFailed || !strings.HasPrefix(res.Message, want) {
					t.Errorf("the set's result: %s %q, want %s %q...", res.HookPhase, res.Message, common.OperationFailed, want)
				}
			case "Widget":
				if res.HookPhase != "" || res.Status == common.ResultCodeSynced {
					t.Errorf("the wave-1 Widget was synced after a failed wave 0: %s %s %q", res.Status, res.HookPhase, res.Message)
				}
			}
		}
		if !found {
			t.Errorf("no result for the set in %+v", r.results)
		}
		if _, err := dyn.Resource(widgetGVR).Namespace(wavesNamespace).Get(ctx, widget.GetName(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the wave-1 Widget after a failed wave 0: %v, want not found", err)
		}
	})
}

// syncProgress is the operation's state after the last round, for the test to wait on.
type syncProgress struct {
	mu      sync.Mutex
	message string
}

func (p *syncProgress) set(m string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.message = m
}

func (p *syncProgress) get() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.message
}

type syncResult struct {
	phase   common.OperationPhase
	message string
	results []common.ResourceSyncResult
	err     error
}

// runSync syncs targets in the background as the application controller runs an Application's sync
// operation: each round reads the live objects from the cluster cache, reconciles them with the
// targets, and runs a sync context made afresh, started from the operation's state so far (the
// controller's WithInitialState), until the operation completes. Server-side apply, the health
// overrides of argocd-cm, only the targets managed. (gitops-engine's own engine.Sync keeps one sync
// context, whose tasks never see the objects they created, so it cannot wait on their health.)
func runSync(ctx context.Context, t *testing.T, clusterCache cache.ClusterCache, config *rest.Config, log logr.Logger,
	overrides lua.ResourceHealthOverrides, hook common.SyncWaveHook, progress *syncProgress, targets ...*unstructured.Unstructured) <-chan syncResult {
	t.Helper()
	keys := map[string]bool{}
	for _, o := range targets {
		keys[o.GroupVersionKind().GroupKind().String()+"/"+o.GetNamespace()+"/"+o.GetName()] = true
	}
	isManaged := func(r *cache.Resource) bool {
		k := r.ResourceKey()
		return keys[schema.GroupKind{Group: k.Group, Kind: k.Kind}.String()+"/"+k.Namespace+"/"+k.Name]
	}
	kubectl := &kube.KubectlCmd{Log: log, Tracer: tracing.NopTracer{}}
	opts := []gitopssync.SyncOpt{gitopssync.WithHealthOverride(overrides), gitopssync.WithServerSideApply(true),
		gitopssync.WithServerSideApplyManager("argocd-controller"), gitopssync.WithLogr(log)}
	if hook != nil {
		opts = append(opts, gitopssync.WithSyncWaveHook(hook))
	}
	syncCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	done := make(chan syncResult, 1)
	go func() {
		defer cancel()
		var r syncResult
		started := metav1.Now()
		tick := time.NewTicker(time.Second) // the controller's requeue of a running operation
		defer tick.Stop()
		for {
			copies := make([]*unstructured.Unstructured, len(targets))
			for i, o := range targets {
				copies[i] = o.DeepCopy()
			}
			live, err := clusterCache.GetManagedLiveObjs(copies, isManaged)
			if err != nil {
				done <- syncResult{err: err}
				return
			}
			reconciled := gitopssync.Reconcile(copies, live, wavesNamespace, clusterCache)
			o := opts
			if r.phase != "" {
				o = append(append([]gitopssync.SyncOpt{}, opts...), gitopssync.WithInitialState(r.phase, r.message, r.results, started))
			}
			sc, cleanup, err := gitopssync.NewSyncContext("rev", reconciled, config, config, kubectl, wavesNamespace, o...)
			if err != nil {
				done <- syncResult{err: err}
				return
			}
			sc.Sync(syncCtx)
			r.phase, r.message, r.results = sc.GetState()
			cleanup()
			if progress != nil {
				progress.set(r.message)
			}
			if r.phase.Completed() {
				done <- r
				return
			}
			select {
			case <-syncCtx.Done():
				done <- syncResult{phase: r.phase, message: r.message, results: r.results, err: syncCtx.Err()}
				return
			case <-tick.C:
			}
		}
	}()
	return done
}

func wait(t *testing.T, done <-chan syncResult) syncResult {
	t.Helper()
	r := <-done
	if r.err != nil {
		t.Fatalf("sync: %v", r.err)
	}
	return r
}

// docsOverrides are the resource overrides of docs/gitops.md's argocd-cm, read by Argo CD's
// settings manager.
func docsOverrides(t *testing.T) lua.ResourceHealthOverrides {
	t.Helper()
	return lua.ResourceHealthOverrides(readOverrides(t))
}

func toUnstructured(t *testing.T, cos *olmv1.ClusterObjectSet) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cos)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(olmv1.GroupVersion.String())
	u.SetKind(olmv1.ClusterObjectSetKind)
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	return u
}

// pvc is a claim of a named volume: Bound once that volume exists, and the set's built-in probe
// waits until then.
func pvc(ns, name, volume string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "PersistentVolumeClaim",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{"accessModes": []any{"ReadWriteOnce"}, "storageClassName": "", "volumeName": volume,
			"resources": map[string]any{"requests": map[string]any{"storage": "1Mi"}}},
	}}
	return u
}

// createVolume creates the volume a claim of pvc names (the persistent volume binder binds them).
func createVolume(ctx context.Context, t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + name}},
		},
	}
	if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().PersistentVolumes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

func widgetObject(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "waves.example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": name, "namespace": wavesNamespace,
			"annotations": map[string]any{syncWave: "1", syncOptions: "SkipDryRunOnMissingResource=true"}},
		"spec": map[string]any{"size": "small"},
	}}
	return u
}

func summary(cos *olmv1.ClusterObjectSet) string {
	var parts []string
	for _, ct := range []string{olmv1.ConditionProgressing, olmv1.ConditionSucceeded} {
		if c := apimeta.FindStatusCondition(cos.Status.Conditions, ct); c != nil {
			parts = append(parts, ct+"="+string(c.Status)+"/"+c.Reason)
		}
	}
	return strings.Join(parts, " ")
}
