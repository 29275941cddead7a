package uninstall

import (
	"fmt"
	"slices"
	"strings"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// Found is what uninstall saw of the installs in the cluster before it changes anything.
type Found struct {
	// WebhookServices are the Services ("namespace/name") the webhooks of the two configurations call,
	// sorted and without repeats; empty when the configurations are gone or call URLs.
	WebhookServices []string
	// WebhooksUnreadable says why the configurations could not be read (e.g. forbidden); empty when
	// they were.
	WebhooksUnreadable string
	// Managers are the manager Deployments found in any namespace: by the name asked for, and by the
	// labels every install gives its manager (ManagerLabels).
	Managers []Manager
	// ManagersUnlisted says why Deployments could not be listed in every namespace (e.g. forbidden);
	// empty when they were.
	ManagersUnlisted string
}

// Manager is one manager Deployment found.
type Manager struct {
	Namespace, Name string
	// Replicas is its spec.replicas: 0 once scaled down, when it puts no finalizer back.
	Replicas int32
}

func (m Manager) String() string { return m.Namespace + "/" + m.Name }

// ManagerLabels select the manager's Deployment of every install (the overlays' and the chart's,
// whatever its fullnameOverride).
var ManagerLabels = map[string]string{"app.kubernetes.io/part-of": "cos-externalizer", "app.kubernetes.io/component": "manager"}

// Target is the install uninstall acts on.
type Target struct {
	// Namespace is the manager's, the object-data Secrets'.
	Namespace string
	// Why says how Namespace was chosen, for the report.
	Why string
	// Notes are what the report says besides.
	Notes []string
}

// RefusedError is a refusal to act on what was asked: Way says how to go on.
type RefusedError struct{ Reason, Way string }

func (e *RefusedError) Error() string { return e.Reason + ". " + e.Way }

// Locate decides which install to uninstall from what was asked (namespace, empty to find it;
// deployment, the manager's name) and what was found, or refuses, before anything is changed:
//
//   - the webhook configurations call the Service of the install they belong to: that namespace is
//     the install's. Asked for another, it refuses (deleting the webhooks would leave that install's
//     manager running without them, and it would put the finalizers back);
//   - without them, the one namespace with a manager Deployment is the install's; several are
//     ambiguous; none at all, the namespace asked for, else the default one: nothing runs;
//   - a manager that runs (replicas above 0) anywhere else than the target would put the finalizers
//     back: it refuses, naming it and how to stop it.
func Locate(namespace, deployment string, f Found) (Target, error) {
	t, err := chooseNamespace(namespace, f)
	if err != nil {
		return t, err
	}
	target := Manager{Namespace: t.Namespace, Name: deployment}.String()
	var others []Manager
	var listed []string
	for _, m := range f.Managers {
		switch {
		case m.String() == target:
		case m.Replicas > 0:
			others = append(others, m)
			listed = append(listed, fmt.Sprintf("%s (%s)", m, plural(int(m.Replicas), "replica")))
		default:
			t.Notes = append(t.Notes, fmt.Sprintf("deployment %s is scaled to 0: not touched", m))
		}
	}
	if len(others) > 0 {
		m := others[0]
		way := fmt.Sprintf("Scale it to 0 first (kubectl -n %s scale deployment %s --replicas=0) and run uninstall again.", m.Namespace, m.Name)
		switch {
		case m.Namespace == t.Namespace:
			way = fmt.Sprintf("If it is this install's manager, renamed, run it again with --deployment=%s; else scale it to 0 first (kubectl -n %s scale deployment %s --replicas=0).", m.Name, m.Namespace, m.Name)
		case len(f.WebhookServices) == 0 && namespace != "":
			way = fmt.Sprintf("If it is the install to uninstall, run it again with --namespace=%s; else scale it to 0 first (kubectl -n %s scale deployment %s --replicas=0).", m.Namespace, m.Namespace, m.Name)
		}
		runs := "runs a manager as well: it would"
		if len(others) > 1 {
			runs = "run managers as well: they would"
		}
		return t, &RefusedError{
			Reason: fmt.Sprintf("uninstalling deployment %s (namespace %s: %s), but %s %s put the finalizers back and keep reconciling", target, t.Namespace, t.Why, phrase("deployment", listed), runs),
			Way:    way,
		}
	}
	if f.WebhooksUnreadable != "" {
		t.Notes = append(t.Notes, "cannot read the webhook configurations ("+f.WebhooksUnreadable+"): the install is not checked against them")
	}
	if f.ManagersUnlisted != "" {
		t.Notes = append(t.Notes, "cannot list Deployments in every namespace ("+f.ManagersUnlisted+"): managers of other installs are not looked for")
	}
	return t, nil
}

// chooseNamespace is the namespace Locate acts on, and why, or its refusal: the one asked for, if
// the webhook configurations call it (or none); else theirs, else the one namespace with manager
// Deployments, else the default.
func chooseNamespace(namespace string, f Found) (Target, error) {
	var t Target
	webhookNS := namespaces(f.WebhookServices)
	switch {
	case namespace != "" && len(webhookNS) > 0 && !slices.Contains(webhookNS, namespace):
		return t, &RefusedError{
			Reason: fmt.Sprintf("asked to uninstall the install in namespace %s, but the webhook configurations call %s: that is the install they belong to, and deleting them would leave its manager running without webhooks", namespace, phrase("Service", f.WebhookServices)),
			Way:    fmt.Sprintf("Run it again with --namespace=%s (kubectl cos uninstall -n %s), or without --namespace to let it find the install.", webhookNS[0], webhookNS[0]),
		}
	case namespace != "":
		t.Namespace, t.Why = namespace, "as asked"
		if len(webhookNS) > 0 {
			t.Why = "as asked; the webhook configurations call " + phrase("Service", f.WebhookServices)
		}
	case len(webhookNS) > 1:
		return t, &RefusedError{
			Reason: fmt.Sprintf("the webhook configurations call Services in %d namespaces (%s): which install to uninstall is not clear", len(webhookNS), strings.Join(f.WebhookServices, ", ")),
			Way:    fmt.Sprintf("Say which with --namespace (e.g. --namespace=%s).", webhookNS[0]),
		}
	case len(webhookNS) == 1:
		t.Namespace, t.Why = webhookNS[0], "the webhook configurations call "+phrase("Service", f.WebhookServices)
	default:
		managerNS := namespaces(managerNames(f.Managers))
		switch len(managerNS) {
		case 0:
			t.Namespace, t.Why = olmv1.DefaultSystemNamespace, "the default: no webhook configuration calls a Service"
			if f.ManagersUnlisted == "" {
				t.Why += ", and no manager Deployment is in any namespace"
			}
		case 1:
			t.Namespace, t.Why = managerNS[0], "the namespace of "+phrase("manager Deployment", managerNames(f.Managers))+"; the webhook configurations call no Service"
		default:
			return t, &RefusedError{
				Reason: fmt.Sprintf("no webhook configuration calls a Service, and manager Deployments are in %d namespaces (%s): which install to uninstall is not clear", len(managerNS), strings.Join(managerNames(f.Managers), ", ")),
				Way:    fmt.Sprintf("Say which with --namespace (e.g. --namespace=%s).", managerNS[0]),
			}
		}
	}
	return t, nil
}

// namespaces are the namespaces of "namespace/name" keys, sorted, without repeats.
func namespaces(keys []string) []string {
	var out []string
	for _, k := range keys {
		ns, _, _ := strings.Cut(k, "/")
		out = append(out, ns)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func managerNames(ms []Manager) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.String())
	}
	return out
}

// phrase is "Service a/b", or "Services a/b, c/d".
func phrase(noun string, items []string) string {
	if len(items) == 1 {
		return noun + " " + items[0]
	}
	return noun + "s " + strings.Join(items, ", ")
}

// plural is "1 finalizer", "2 finalizers".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
