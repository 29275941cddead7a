package olmlayout

import (
	"strings"
	"testing"
)

func TestDecide(t *testing.T) {
	foreign := []string{"ext-1 (operator-controller)"}
	tests := map[string]struct {
		obs  Observations
		want bool
		// layout is the layout decided; empty: LayoutNone where want, else LayoutOperatorController.
		layout Layout
		// errs: the error names each of these; empty means no error.
		errs []string
		// why names each of these.
		why []string
	}{
		"nothing OLM, our CRD": {
			obs:  Observations{ClusterObjectSetCRD: CRDOther},
			want: true, why: []string{"ClusterExtension API is not served", "not OLM's"},
		},
		"nothing OLM, CRD not readable": {
			obs:  Observations{Unreadable: []string{"CRD x (forbidden)"}},
			want: true, why: []string{"ClusterExtension API is not served"},
		},
		"standard OLM, no ClusterObjectSet CRD": {
			obs:  Observations{ClusterExtensionServed: true, FeatureSet: "standard", ClusterObjectSetCRD: CRDAbsent},
			want: true, why: []string{"standard feature set", "no ClusterObjectSet CRD"},
		},
		"standard OLM, our CRD": {
			obs:  Observations{ClusterExtensionServed: true, FeatureSet: "standard", ClusterObjectSetCRD: CRDOther},
			want: true, why: []string{"standard feature set", "not OLM's"},
		},
		"standard OLM, gate off": {
			obs:  Observations{ClusterExtensionServed: true, FeatureSet: "standard", ClusterObjectSetCRD: CRDOther, Gate: GateOff},
			want: true, why: []string{"BoxcutterRuntime off"},
		},
		"OLM with its ClusterObjectSet CRD": {
			obs:  Observations{ClusterExtensionServed: true, FeatureSet: "experimental", ClusterObjectSetCRD: CRDOLM},
			want: false, why: []string{"CRD is OLM's", "--rollout=true"},
		},
		"OLM's CRD, gate on, its finalizers": {
			obs:  Observations{ClusterExtensionServed: true, FeatureSet: "experimental", ClusterObjectSetCRD: CRDOLM, Gate: GateOn, ForeignFinalizers: foreign},
			want: false, why: []string{"CRD is OLM's", "BoxcutterRuntime on", "ext-1 (operator-controller)"},
		},
		"experimental OLM, our CRD over OLM's, gate on": {
			obs:  Observations{ClusterExtensionServed: true, FeatureSet: "experimental", ClusterObjectSetCRD: CRDOther, Gate: GateOn},
			errs: []string{"disagree", "BoxcutterRuntime on", "not OLM's", "--rollout=true", "--rollout=false"},
		},
		"standard OLM, another controller's finalizer": {
			obs:  Observations{ClusterExtensionServed: true, FeatureSet: "standard", ClusterObjectSetCRD: CRDOther, ForeignFinalizers: foreign},
			errs: []string{"disagree", "ext-1 (operator-controller)", "standard feature set"},
		},
		"no OLM, another controller's finalizer": {
			obs:  Observations{ClusterObjectSetCRD: CRDOther, ForeignFinalizers: foreign},
			errs: []string{"disagree", "ClusterExtension API is not served", "teardown"},
		},
		"OLM's CRD, gate off": {
			obs:  Observations{ClusterExtensionServed: true, FeatureSet: "experimental", ClusterObjectSetCRD: CRDOLM, Gate: GateOff},
			errs: []string{"disagree", "CRD is OLM's", "BoxcutterRuntime off"},
		},
		"object-controller beside operator-controller (OLM's newer layout)": {
			obs: Observations{ClusterExtensionServed: true, FeatureSet: "experimental", ClusterObjectSetCRD: CRDOLM, Gate: GateOn,
				ObjectController: Present, ForeignFinalizers: []string{"ext-1 (object-controller)"}},
			want: false, layout: LayoutObjectController, why: []string{"object-controller's Deployment olmv1-system/object-controller-controller-manager exists", "CRD is OLM's"},
		},
		"object-controller alone, no ClusterExtension API": {
			obs:  Observations{ClusterObjectSetCRD: CRDOLM, ObjectController: Present},
			want: false, layout: LayoutObjectController, why: []string{"object-controller"},
		},
		"object-controller, operator-controller's gate off": {
			obs:  Observations{ClusterExtensionServed: true, FeatureSet: "experimental", ClusterObjectSetCRD: CRDOLM, Gate: GateOff, ObjectController: Present},
			want: false, layout: LayoutObjectController, why: []string{"object-controller"},
		},
		"object-controller, our CRD over OLM's": {
			obs:  Observations{ClusterExtensionServed: true, FeatureSet: "experimental", ClusterObjectSetCRD: CRDOther, ObjectController: Present},
			errs: []string{"disagree", "object-controller's Deployment", "not OLM's"},
		},
		"object-controller absent, OLM's CRD": {
			obs:  Observations{ClusterExtensionServed: true, FeatureSet: "experimental", ClusterObjectSetCRD: CRDOLM, ObjectController: Absent},
			want: false, why: []string{"CRD is OLM's"},
		},
		"ClusterExtension served, nothing else readable": {
			obs:  Observations{ClusterExtensionServed: true, Unreadable: []string{"CRD clusterobjectsets.olm.operatorframework.io (forbidden)"}},
			errs: []string{"nothing tells", "not readable: CRD clusterobjectsets.olm.operatorframework.io (forbidden)", "--rollout=true", "--rollout=false"},
		},
		"experimental OLM, CRD unknown": {
			obs:  Observations{ClusterExtensionServed: true, FeatureSet: "experimental"},
			errs: []string{"nothing tells", `feature set "experimental"`},
		},
		"many finalizers are counted": {
			obs: Observations{ClusterExtensionServed: true, ClusterObjectSetCRD: CRDOLM,
				ForeignFinalizers: []string{"a (m)", "b (m)", "c (m)", "d (m)", "e (m)"}},
			want: false, why: []string{"a (m), b (m), c (m) and 2 more"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d, ok := decide(t, tc.obs, tc.errs)
			if !ok {
				return
			}
			got, why := d.RollOut, d.Why
			if got != tc.want {
				t.Errorf("Decide = %t, want %t (%s)", got, tc.want, why)
			}
			layout := tc.layout
			switch {
			case layout != "":
			case tc.want:
				layout = LayoutNone
			default:
				layout = LayoutOperatorController
			}
			if d.Layout != layout {
				t.Errorf("Decide: layout %q, want %q", d.Layout, layout)
			}
			for _, s := range tc.why {
				if !strings.Contains(why, s) {
					t.Errorf("the reason does not name %q: %s", s, why)
				}
			}
		})
	}
}

func TestGateFromArgs(t *testing.T) {
	tests := map[string]struct {
		args []string
		want Gate
	}{
		"none":                 {args: []string{"--leader-elect"}, want: GateUnknown},
		"OLM's standard chart": {args: []string{"--feature-gates=WebhookProviderCertManager=true", "--feature-gates=BoxcutterRuntime=false", "--feature-gates=DeploymentConfig=false"}, want: GateOff},
		"OLM's experimental":   {args: []string{"--feature-gates=BoxcutterRuntime=true", "--feature-gates=BundleReleaseSupport=true"}, want: GateOn},
		"one list":             {args: []string{"--feature-gates=A=true,BoxcutterRuntime=true,B=false"}, want: GateOn},
		"separate value":       {args: []string{"--feature-gates", "BoxcutterRuntime=true"}, want: GateOn},
		"single dash":          {args: []string{"-feature-gates=BoxcutterRuntime=true"}, want: GateOn},
		"last wins":            {args: []string{"--feature-gates=BoxcutterRuntime=true", "--feature-gates=BoxcutterRuntime=false"}, want: GateOff},
		"spaces":               {args: []string{"--feature-gates= BoxcutterRuntime = True "}, want: GateOn},
		"not a bool":           {args: []string{"--feature-gates=BoxcutterRuntime=yes"}, want: GateUnknown},
		"other gate only":      {args: []string{"--feature-gates=BoxcutterRuntimeX=true"}, want: GateUnknown},
		"dangling flag":        {args: []string{"--feature-gates"}, want: GateUnknown},
		"not the flag":         {args: []string{"--feature-gates-file=BoxcutterRuntime=true"}, want: GateUnknown},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := GateFromArgs(tc.args, BoxcutterRuntimeGate); got != tc.want {
				t.Errorf("GateFromArgs = %q, want %q", got, tc.want)
			}
		})
	}
}

func FuzzGateFromArgs(f *testing.F) {
	f.Add("--feature-gates=BoxcutterRuntime=true", "")
	f.Add("--feature-gates", "A=false,BoxcutterRuntime=false")
	f.Fuzz(func(t *testing.T, a, b string) {
		got := GateFromArgs([]string{a, b}, BoxcutterRuntimeGate)
		if got != GateUnknown && got != GateOn && got != GateOff {
			t.Fatalf("GateFromArgs = %q", got)
		}
		if !strings.Contains(a+b, BoxcutterRuntimeGate) && got != GateUnknown {
			t.Fatalf("GateFromArgs(%q, %q) = %q without the gate's name", a, b, got)
		}
	})
}

// decide decides o; with errs, it wants an error naming each of them and returns false, else it wants
// no error.
func decide(t *testing.T, o Observations, errs []string) (Decision, bool) {
	t.Helper()
	d, err := Decide(o)
	if len(errs) == 0 {
		if err != nil {
			t.Fatal(err)
		}
		return d, true
	}
	if err == nil {
		t.Fatalf("Decide = %+v, want an error", d)
	}
	for _, s := range errs {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("the error does not name %q: %v", s, err)
		}
	}
	return d, false
}
