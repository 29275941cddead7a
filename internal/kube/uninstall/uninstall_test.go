package uninstall

import (
	"errors"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"defaults":          {},
		"empty namespace":   {args: []string{"--namespace="}}, // found
		"empty deployment":  {args: []string{"--deployment="}, want: "--deployment: must not be empty"},
		"empty mutating":    {args: []string{"--mutating-webhook="}, want: "--mutating-webhook: must not be empty"},
		"empty validating":  {args: []string{"--validating-webhook="}, want: "--validating-webhook: must not be empty"},
		"no timeout":        {args: []string{"--timeout=0s"}, want: "--timeout: must be positive, got 0s"},
		"names and dry run": {args: []string{"--namespace=ns", "--deployment=d", "--dry-run", "--timeout=1m"}},
	} {
		t.Run(name, func(t *testing.T) {
			var o Options
			fs := flag.NewFlagSet("uninstall", flag.ContinueOnError)
			o.Bind(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			got := ""
			if err := o.Validate(); err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("Validate() = %q, want %q", got, tc.want)
			}
		})
	}
	var o Options
	o.Bind(flag.NewFlagSet("uninstall", flag.ContinueOnError))
	want := Options{Deployment: "cos-externalizer", MutatingWebhook: "cos-externalizer",
		ValidatingWebhook: "cos-externalizer", Timeout: 5 * time.Minute}
	if o != want {
		t.Errorf("defaults %+v, want %+v (the names config/ installs)", o, want)
	}
}

// TestLocate: which install uninstall acts on, from what it was asked and what it found, and its
// refusals with the way out.
func TestLocate(t *testing.T) {
	const deploy = "cos-externalizer"
	mgr := func(ns string, replicas int32) Manager {
		return Manager{Namespace: ns, Name: deploy, Replicas: replicas}
	}
	helm := []string{"cos-system/cos-externalizer-webhook"}
	for name, tc := range map[string]struct {
		namespace string
		found     Found
		want      Target
		// refused: the refusal's reason and way hold these.
		refused, way string
	}{
		"the webhooks name the install": {
			found: Found{WebhookServices: helm, Managers: []Manager{mgr("cos-system", 2)}},
			want:  Target{Namespace: "cos-system", Why: "the webhook configurations call Service cos-system/cos-externalizer-webhook"},
		},
		"asked for the install the webhooks call": {
			namespace: "cos-system", found: Found{WebhookServices: helm, Managers: []Manager{mgr("cos-system", 2)}},
			want: Target{Namespace: "cos-system", Why: "as asked; the webhook configurations call Service cos-system/cos-externalizer-webhook"},
		},
		"asked for another install than the webhooks call": {
			namespace: "olmv1-system", found: Found{WebhookServices: helm, Managers: []Manager{mgr("cos-system", 2)}},
			refused: "asked to uninstall the install in namespace olmv1-system, but the webhook configurations call Service cos-system/cos-externalizer-webhook",
			way:     "--namespace=cos-system (kubectl cos uninstall -n cos-system)",
		},
		"asked, the webhooks gone, the manager runs elsewhere": {
			namespace: "olmv1-system", found: Found{Managers: []Manager{mgr("cos-system", 2)}},
			refused: "but deployment cos-system/cos-externalizer (2 replicas) runs a manager as well",
			way:     "run it again with --namespace=cos-system; else scale it to 0 first (kubectl -n cos-system scale deployment cos-externalizer --replicas=0)",
		},
		"asked, the webhooks gone, the manager elsewhere scaled to 0": {
			namespace: "olmv1-system", found: Found{Managers: []Manager{mgr("cos-system", 0)}},
			want: Target{Namespace: "olmv1-system", Why: "as asked", Notes: []string{"deployment cos-system/cos-externalizer is scaled to 0: not touched"}},
		},
		"the webhooks gone: the one manager's namespace": {
			found: Found{Managers: []Manager{mgr("cos-system", 2)}},
			want:  Target{Namespace: "cos-system", Why: "the namespace of manager Deployment cos-system/cos-externalizer; the webhook configurations call no Service"},
		},
		"managers in two namespaces, nothing asked": {
			found:   Found{Managers: []Manager{mgr("a", 1), mgr("b", 0)}},
			refused: "manager Deployments are in 2 namespaces (a/cos-externalizer, b/cos-externalizer)",
			way:     "--namespace=a",
		},
		"the webhooks call two namespaces": {
			found:   Found{WebhookServices: []string{"a/s", "b/s"}},
			refused: "the webhook configurations call Services in 2 namespaces (a/s, b/s)",
			way:     "--namespace=a",
		},
		"the webhooks call two namespaces, one asked": {
			namespace: "b", found: Found{WebhookServices: []string{"a/s", "b/s"}},
			want: Target{Namespace: "b", Why: "as asked; the webhook configurations call Services a/s, b/s"},
		},
		"another install's manager runs": {
			found:   Found{WebhookServices: helm, Managers: []Manager{mgr("cos-system", 2), mgr("olmv1-system", 1)}},
			refused: "uninstalling deployment cos-system/cos-externalizer (namespace cos-system: the webhook configurations call Service cos-system/cos-externalizer-webhook), but deployment olmv1-system/cos-externalizer (1 replica) runs a manager as well: it would put the finalizers back",
			way:     "Scale it to 0 first (kubectl -n olmv1-system scale deployment cos-externalizer --replicas=0) and run uninstall again.",
		},
		"a renamed manager in the install's namespace": {
			found:   Found{WebhookServices: helm, Managers: []Manager{{Namespace: "cos-system", Name: "platform", Replicas: 2}}},
			refused: "but deployment cos-system/platform (2 replicas) runs a manager as well",
			way:     "run it again with --deployment=platform",
		},
		"nothing anywhere": {
			want: Target{Namespace: "olmv1-system", Why: "the default: no webhook configuration calls a Service, and no manager Deployment is in any namespace"},
		},
		"nothing readable": {
			found: Found{WebhooksUnreadable: "forbidden", ManagersUnlisted: "forbidden"},
			want: Target{Namespace: "olmv1-system", Why: "the default: no webhook configuration calls a Service", Notes: []string{
				"cannot read the webhook configurations (forbidden): the install is not checked against them",
				"cannot list Deployments in every namespace (forbidden): managers of other installs are not looked for",
			}},
		},
		"the hook: asked, managers not listable": {
			namespace: "cos-system", found: Found{WebhookServices: helm, ManagersUnlisted: "forbidden"},
			want: Target{Namespace: "cos-system", Why: "as asked; the webhook configurations call Service cos-system/cos-externalizer-webhook", Notes: []string{
				"cannot list Deployments in every namespace (forbidden): managers of other installs are not looked for",
			}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := Locate(tc.namespace, deploy, tc.found)
			if tc.refused != "" {
				var r *RefusedError
				if !errors.As(err, &r) || !strings.Contains(r.Reason, tc.refused) || !strings.Contains(r.Way, tc.way) {
					t.Fatalf("Locate = %+v, %v; want a refusal with %q, the way %q", got, err, tc.refused, tc.way)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Locate (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlural(t *testing.T) {
	for n, want := range map[int]string{0: "0 finalizers", 1: "1 finalizer", 2: "2 finalizers"} {
		if got := plural(n, "finalizer"); got != want {
			t.Errorf("plural(%d) = %q, want %q", n, got, want)
		}
	}
}
