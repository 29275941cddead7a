package deploy_test

import (
	"net/netip"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// olmDenyAll is OLM's release's default-deny-all-traffic in olmv1-system: every Pod, Ingress and
// Egress.
var olmDenyAll = networkingv1.NetworkPolicy{
	ObjectMeta: metav1.ObjectMeta{Namespace: systemNamespace, Name: "default-deny-all-traffic"},
	Spec: networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
	},
}

// TestOverlaysNetworkPolicies renders every install overlay, adds OLM's deny-all beside it (and
// not), and asks of the NetworkPolicies' semantics (allowed) what the manager's Pods need: the API
// server reaches the webhook port, the monitoring namespace the metrics port, the Pods the API server;
// and nothing else. The ports are the Deployment's named ports, so a port that moves is noticed.
func TestOverlaysNetworkPolicies(t *testing.T) {
	apiServer := peer{ip: "172.18.0.2"} // a node's address: not a Pod
	monitoring := peer{pod: true, namespace: "monitoring", podLabels: map[string]string{"app.kubernetes.io/name": "prometheus"}}
	otherPod := peer{pod: true, namespace: "default", podLabels: map[string]string{"app": "x"}}
	olmPod := map[string]string{"app.kubernetes.io/name": "operator-controller", "control-plane": "operator-controller-controller-manager"}
	for _, o := range overlays {
		if !o.install {
			continue
		}
		for _, denyAll := range []bool{false, true} {
			name := o.name
			if denyAll {
				name += "/beside OLM's deny-all"
			}
			t.Run(name, func(t *testing.T) {
				objs := parse(t, render(t, o.name))
				var policies []networkingv1.NetworkPolicy
				for _, u := range ofKind(objs, "NetworkPolicy") {
					np := networkingv1.NetworkPolicy{}
					convert(t, u, &np)
					policies = append(policies, np)
				}
				if denyAll {
					policies = append(policies, olmDenyAll)
				}
				deploy := &appsv1.Deployment{}
				convert(t, find(objs, "Deployment", deploymentName), deploy)
				manager := pod{namespace: deploy.Namespace, labels: deploy.Spec.Template.Labels, ports: deploy.Spec.Template.Spec.Containers[0].Ports}
				port := func(name string) int32 { return containerPort(deploy.Spec.Template.Spec.Containers[0], name) }
				webhook, metrics, health := port("webhook-server"), port("metrics"), port("health")

				tests := map[string]struct {
					ingress bool
					to      pod
					peer    peer
					port    int32
					proto   corev1.Protocol
					want    bool
				}{
					"API server to the webhooks":           {ingress: true, to: manager, peer: apiServer, port: webhook, want: true},
					"any Pod to the webhooks":              {ingress: true, to: manager, peer: otherPod, port: webhook, want: true},
					"monitoring to the metrics":            {ingress: true, to: manager, peer: monitoring, port: metrics, want: true},
					"another namespace to the metrics":     {ingress: true, to: manager, peer: otherPod, port: metrics},
					"an address to the metrics":            {ingress: true, to: manager, peer: apiServer, port: metrics},
					"a Pod to the probes":                  {ingress: true, to: manager, peer: otherPod, port: health},
					"the webhook port over UDP":            {ingress: true, to: manager, peer: apiServer, port: webhook, proto: corev1.ProtocolUDP},
					"manager to the API server (443)":      {to: manager, peer: apiServer, port: 443, want: true},
					"manager to the API server (6443)":     {to: manager, peer: apiServer, port: 6443, want: true},
					"manager to DNS":                       {to: manager, peer: otherPod, port: 53, proto: corev1.ProtocolUDP},
					"manager to anything else":             {to: manager, peer: otherPod, port: 80},
					"OLM's Pod: our policies open none":    {ingress: true, to: pod{namespace: systemNamespace, labels: olmPod}, peer: apiServer, port: webhook, want: !denyAll},
					"OLM's Pod: no egress through ours":    {to: pod{namespace: systemNamespace, labels: olmPod}, peer: apiServer, port: 443, want: !denyAll},
					"another Pod of the namespace to ours": {ingress: true, to: manager, peer: peer{pod: true, namespace: systemNamespace, podLabels: olmPod}, port: metrics},
				}
				for name, tc := range tests {
					proto := tc.proto
					if proto == "" {
						proto = corev1.ProtocolTCP
					}
					if got := allowed(t, policies, tc.ingress, tc.to, tc.peer, tc.port, proto); got != tc.want {
						t.Errorf("%s (port %d/%s): allowed %t, want %t", name, tc.port, proto, got, tc.want)
					}
				}
			})
		}
	}
}

// pod is the Pod a policy may select.
type pod struct {
	namespace string
	labels    map[string]string
	ports     []corev1.ContainerPort
}

// peer is the other end: a Pod (in a namespace whose only label is kubernetes.io/metadata.name, as
// the API server sets it) or an address outside every Pod (a node, the API server).
type peer struct {
	pod       bool
	namespace string
	podLabels map[string]string
	ip        string
}

// allowed evaluates NetworkPolicy semantics (networking.k8s.io/v1) for traffic to (ingress) or from
// (egress) p: a Pod that no policy of its direction selects is not isolated; an isolated Pod admits
// what at least one rule of a policy selecting it allows.
func allowed(t *testing.T, policies []networkingv1.NetworkPolicy, ingress bool, p pod, other peer, port int32, proto corev1.Protocol) bool {
	t.Helper()
	isolated := false
	for _, np := range policies {
		if np.Namespace != p.namespace || !matches(t, &np.Spec.PodSelector, p.labels) || !hasType(np.Spec, ingress) {
			continue
		}
		isolated = true
		if ingress {
			for _, r := range np.Spec.Ingress {
				if portMatches(r.Ports, p, port, proto) && peerMatches(t, r.From, np.Namespace, other) {
					return true
				}
			}
		} else {
			for _, r := range np.Spec.Egress {
				if portMatches(r.Ports, p, port, proto) && peerMatches(t, r.To, np.Namespace, other) {
					return true
				}
			}
		}
	}
	return !isolated
}

// hasType: policyTypes, or when unset Ingress always and Egress when it has egress rules.
func hasType(spec networkingv1.NetworkPolicySpec, ingress bool) bool {
	want := networkingv1.PolicyTypeEgress
	if ingress {
		want = networkingv1.PolicyTypeIngress
	}
	if len(spec.PolicyTypes) == 0 {
		return ingress || len(spec.Egress) > 0
	}
	return slices.Contains(spec.PolicyTypes, want)
}

// portMatches: no ports means every port; a named port is the selected Pod's (ingress); endPort
// makes a range.
func portMatches(ports []networkingv1.NetworkPolicyPort, p pod, port int32, proto corev1.Protocol) bool {
	if len(ports) == 0 {
		return true
	}
	for _, pp := range ports {
		if ptr.Deref(pp.Protocol, corev1.ProtocolTCP) != proto {
			continue
		}
		if pp.Port == nil {
			return true
		}
		n := pp.Port.IntVal
		if pp.Port.Type == intstr.String {
			n = 0
			for _, cp := range p.ports {
				cpProto := cp.Protocol
				if cpProto == "" {
					cpProto = corev1.ProtocolTCP
				}
				if cp.Name == pp.Port.StrVal && cpProto == proto {
					n = cp.ContainerPort
				}
			}
		}
		if port == n || (pp.EndPort != nil && port >= n && port <= *pp.EndPort) {
			return true
		}
	}
	return false
}

// peerMatches: no peers means every source or destination; a namespaceSelector and a podSelector of
// one peer must both match (a missing podSelector: every Pod; a missing namespaceSelector: the
// policy's namespace); an ipBlock matches addresses outside Pods.
func peerMatches(t *testing.T, peers []networkingv1.NetworkPolicyPeer, policyNamespace string, other peer) bool {
	if len(peers) == 0 {
		return true
	}
	for _, pp := range peers {
		if pp.IPBlock != nil {
			if other.pod || other.ip == "" {
				continue
			}
			addr := netip.MustParseAddr(other.ip)
			if !netip.MustParsePrefix(pp.IPBlock.CIDR).Contains(addr) {
				continue
			}
			if slices.ContainsFunc(pp.IPBlock.Except, func(c string) bool { return netip.MustParsePrefix(c).Contains(addr) }) {
				continue
			}
			return true
		}
		if !other.pod {
			continue
		}
		nsOK := other.namespace == policyNamespace
		if pp.NamespaceSelector != nil {
			nsOK = matches(t, pp.NamespaceSelector, map[string]string{"kubernetes.io/metadata.name": other.namespace})
		}
		if nsOK && (pp.PodSelector == nil || matches(t, pp.PodSelector, other.podLabels)) {
			return true
		}
	}
	return false
}

func matches(t *testing.T, sel *metav1.LabelSelector, l map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatal(err)
	}
	return s.Matches(labels.Set(l))
}

// TestNetworkPolicyEvaluator checks the evaluator itself on policies of known meaning.
func TestNetworkPolicyEvaluator(t *testing.T) {
	ns := "a"
	web := pod{namespace: ns, labels: map[string]string{"app": "web"}, ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}
	fromB := peer{pod: true, namespace: "b", podLabels: map[string]string{"role": "client"}}
	fromA := peer{pod: true, namespace: ns, podLabels: map[string]string{"role": "client"}}
	addr := peer{ip: "10.1.2.3"}
	np := func(spec networkingv1.NetworkPolicySpec) []networkingv1.NetworkPolicy {
		return []networkingv1.NetworkPolicy{{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"}, Spec: spec}}
	}
	webSel := metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	tests := map[string]struct {
		policies []networkingv1.NetworkPolicy
		ingress  bool
		peer     peer
		port     int32
		want     bool
	}{
		"no policy":           {ingress: true, peer: fromB, port: 1, want: true},
		"other namespace's":   {policies: []networkingv1.NetworkPolicy{{ObjectMeta: metav1.ObjectMeta{Namespace: "z"}}}, ingress: true, peer: fromB, port: 1, want: true},
		"deny all ingress":    {policies: np(networkingv1.NetworkPolicySpec{}), ingress: true, peer: fromB, port: 1},
		"ingress-only policy": {policies: np(networkingv1.NetworkPolicySpec{}), peer: fromB, port: 1, want: true},
		"allow all ingress":   {policies: np(networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{}}}), ingress: true, peer: addr, port: 1, want: true},
		"named port": {policies: np(networkingv1.NetworkPolicySpec{PodSelector: webSel, Ingress: []networkingv1.NetworkPolicyIngressRule{{
			Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromString("http"))}}}}}), ingress: true, peer: fromB, port: 8080, want: true},
		"port range": {policies: np(networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
			Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromInt32(8000)), EndPort: ptr.To[int32](8100)}}}}}), ingress: true, peer: fromB, port: 8080, want: true},
		"podSelector alone is the policy's namespace": {policies: np(networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}}}}}}}), ingress: true, peer: fromB, port: 1},
		"podSelector alone, same namespace": {policies: np(networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}}}}}}}), ingress: true, peer: fromA, port: 1, want: true},
		"namespaceSelector and podSelector": {policies: np(networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "b"}},
				PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "server"}}}}}}}), ingress: true, peer: fromB, port: 1},
		"namespaceSelector is not an address": {policies: np(networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}}}}}), ingress: true, peer: addr, port: 1},
		"ipBlock except": {policies: np(networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.1.0.0/16"}}}}}}}), ingress: true, peer: addr, port: 1},
		"egress by rules, no policyTypes": {policies: np(networkingv1.NetworkPolicySpec{Egress: []networkingv1.NetworkPolicyEgressRule{{
			Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromInt32(443))}}}}}), peer: addr, port: 80},
		"two policies add up": {policies: append(np(networkingv1.NetworkPolicySpec{}), networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "q"},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: webSel, Ingress: []networkingv1.NetworkPolicyIngressRule{{}}}}), ingress: true, peer: fromB, port: 1, want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := allowed(t, tc.policies, tc.ingress, web, tc.peer, tc.port, corev1.ProtocolTCP); got != tc.want {
				t.Errorf("allowed = %t, want %t", got, tc.want)
			}
		})
	}
}
