package webhook_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

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
	counts := func(t *testing.T) checkRefsCounts {
		t.Helper()
		text, err := testenv.Env.APIServerMetrics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sum := func(metric string) float64 {
			v, err := testenv.SumMetric(strings.NewReader(text), metric+"{", `name="check-refs.cos-externalizer.io"`, `operation="CREATE"`)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		return checkRefsCounts{
			Calls:    sum("apiserver_admission_webhook_request_total"),
			Excluded: sum("apiserver_admission_match_condition_exclusions_total"),
		}
	}
	for i, tc := range []struct {
		user string
		want checkRefsCounts // the change the create makes
	}{
		{webhook.OperatorControllerUser, checkRefsCounts{Excluded: 1}},
		{webhook.ObjectControllerUser, checkRefsCounts{Excluded: 1}},
		{"system:serviceaccount:default:operator-controller-controller-manager", checkRefsCounts{Calls: 1}},
		{"alice", checkRefsCounts{Calls: 1}},
	} {
		t.Run(tc.user, func(t *testing.T) {
			as, err := testenv.Env.As(tc.user)
			if err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("olm-skip-%d", i)
			cos := builders.COS(name, builders.WithPhase("deploy", builders.Ref(name+"-0123456789abcdef", testenv.SystemNamespace, "k")))
			before := counts(t)
			if err := as.Create(ctx, cos); err != nil {
				t.Fatalf("a refs-only create with no manager answering: %v", err)
			}
			testenv.Env.RemoveAfter(t, name)
			after := counts(t)
			got := checkRefsCounts{Calls: after.Calls - before.Calls, Excluded: after.Excluded - before.Excluded}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("check-refs for a create as %s (-want +got):\n%s", tc.user, diff)
			}
		})
	}
}

// checkRefsCounts are the API server's counters for the check-refs webhook on CREATE.
type checkRefsCounts struct {
	// Calls: requests sent to it (answered or not).
	Calls float64
	// Excluded: requests a matchCondition kept from it.
	Excluded float64
}
