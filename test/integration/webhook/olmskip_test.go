package webhook_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/controllers"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
	"github.com/cos-externalizer/cos-externalizer/webhook"
)

// TestCheckRefsSkipsOLM: with no manager answering, a refs-only ClusterObjectSet created as either
// of OLM's ServiceAccounts (operator-controller, and object-controller of OLM's newer layout) never
// reaches the check-refs webhook, whose matchCondition excludes it, so OLM never waits on its
// timeout; created as anyone else it is sent to check-refs, which fails open. Told by the API
// server's own counters of the webhook's calls and of its matchCondition exclusions, not by time.
func TestCheckRefsSkipsOLM(t *testing.T) {
	ctx := context.Background()
	stopManager(t)
	for i, tc := range []struct {
		user string
		want hookCounts // the change the create makes
	}{
		{webhook.OperatorControllerUser, hookCounts{Excluded: 1}},
		{webhook.ObjectControllerUser, hookCounts{Excluded: 1}},
		{"system:serviceaccount:default:operator-controller-controller-manager", hookCounts{Calls: 1}},
		{"alice", hookCounts{Calls: 1}},
	} {
		t.Run(tc.user, func(t *testing.T) {
			as, err := testenv.Env.As(tc.user)
			if err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("olm-skip-%d", i)
			cos := builders.COS(name, builders.WithPhase("deploy", builders.Ref(name+"-0123456789abcdef", testenv.SystemNamespace, "k")))
			before := countHook(t, checkRefsHook, "CREATE")
			if err := as.Create(ctx, cos); err != nil {
				t.Fatalf("a refs-only create with no manager answering: %v", err)
			}
			testenv.Env.RemoveAfter(t, name)
			if diff := cmp.Diff(tc.want, countHook(t, checkRefsHook, "CREATE").minus(before)); diff != "" {
				t.Errorf("check-refs for a create as %s (-want +got):\n%s", tc.user, diff)
			}
		})
	}
}

// TestObjectControllerWrites: what OLM's object-controller (its newer layout) writes to the
// ClusterObjectSets operator-controller created, as its ServiceAccount, with no manager answering:
// its teardown finalizer (a merge patch with the resourceVersion), status, and the archiving merge
// patch of an older revision. Each goes through and reaches none of our webhooks: their
// matchConditions keep updates that leave the phases alone from them. object-controller writes no
// Secret (its RBAC on Secrets is get, list, watch), so the Secret guard has nothing of it to allow.
func TestObjectControllerWrites(t *testing.T) {
	ctx := context.Background()
	stopManager(t)
	olm, err := testenv.Env.As(webhook.OperatorControllerUser)
	if err != nil {
		t.Fatal(err)
	}
	oc, err := testenv.Env.As(webhook.ObjectControllerUser)
	if err != nil {
		t.Fatal(err)
	}
	const name = "olm-object-controller"
	cos := builders.COS(name, builders.WithPhase("deploy", builders.Ref(name+"-0123456789abcdef", testenv.SystemNamespace, "k")))
	if err := olm.Create(ctx, cos); err != nil {
		t.Fatal(err)
	}
	testenv.Env.RemoveAfter(t, name)
	before := map[string]hookCounts{}
	for _, h := range ourHooks {
		before[h] = countHook(t, h, "UPDATE")
	}

	patch := fmt.Sprintf(`{"metadata":{"resourceVersion":%q,"finalizers":[%q]}}`, cos.ResourceVersion, controllers.Finalizer)
	if err := oc.Patch(ctx, cos, client.RawPatch(types.MergePatchType, []byte(patch)), client.FieldOwner("object-controller")); err != nil {
		t.Fatalf("object-controller's finalizer: %v", err)
	}
	apimeta.SetStatusCondition(&cos.Status.Conditions, metav1.Condition{Type: "Progressing", Status: metav1.ConditionTrue, Reason: "RollingOut", Message: "Revision is rolling out."})
	if err := oc.Status().Update(ctx, cos); err != nil {
		t.Fatalf("object-controller's status: %v", err)
	}
	if err := oc.Patch(ctx, cos, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"lifecycleState":"Archived"}}`))); err != nil {
		t.Fatalf("object-controller archiving the revision: %v", err)
	}
	if err := oc.Patch(ctx, cos, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))); err != nil {
		t.Fatalf("object-controller removing its finalizer: %v", err)
	}
	got := &olmv1.ClusterObjectSet{}
	if err := testenv.Env.Client.Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.LifecycleState != olmv1.LifecycleStateArchived || len(got.Spec.Phases) != 1 {
		t.Errorf("stored: lifecycleState %q, %d phases; want Archived, the one phase", got.Spec.LifecycleState, len(got.Spec.Phases))
	}
	// Each update of the resource itself (three at least: the status may count too) reached the
	// webhook's matchConditions, which kept it from the webhook.
	for _, h := range ourHooks {
		if got := countHook(t, h, "UPDATE").minus(before[h]); got.Calls != 0 || got.Excluded < 3 {
			t.Errorf("%s for object-controller's updates: %+v, want no call, at least 3 exclusions", h, got)
		}
	}
}

const checkRefsHook = "check-refs.cos-externalizer.io"

// ourHooks are the webhooks of ClusterObjectSets.
var ourHooks = []string{"externalize.cos-externalizer.io", checkRefsHook, "validate.cos-externalizer.io"}

// hookCounts are the API server's counters of one webhook for one operation.
type hookCounts struct {
	// Calls: requests sent to it (answered or not).
	Calls float64
	// Excluded: requests a matchCondition kept from it.
	Excluded float64
}

func (c hookCounts) minus(o hookCounts) hookCounts {
	return hookCounts{Calls: c.Calls - o.Calls, Excluded: c.Excluded - o.Excluded}
}

// countHook reads the API server's counters of webhook name for operation.
func countHook(t *testing.T, name, operation string) hookCounts {
	t.Helper()
	text, err := testenv.Env.APIServerMetrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sum := func(metric string) float64 {
		v, err := testenv.SumMetric(strings.NewReader(text), metric+"{", `name="`+name+`"`, `operation="`+operation+`"`)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	return hookCounts{
		Calls:    sum("apiserver_admission_webhook_request_total"),
		Excluded: sum("apiserver_admission_match_condition_exclusions_total"),
	}
}
