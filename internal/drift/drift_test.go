package drift

import (
	"encoding/json"
	"testing"
)

// obj decodes a JSON object the way the API machinery does for unstructured objects (integers as
// int64, other numbers as float64).
func obj(t testing.TB, s string) map[string]any {
	t.Helper()
	var m map[string]any
	d := json.NewDecoder(stringsReader(s))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return normalize(m).(map[string]any)
}

const desired = `{"apiVersion":"apps/v1","kind":"Deployment",
 "metadata":{"name":"web","namespace":"shop","labels":{"app":"web","olm.operatorframework.io/owning-revision":"r1"},
  "annotations":{"team":"a"},"ownerReferences":[{"apiVersion":"olm.operatorframework.io/v1","kind":"ClusterObjectSet","name":"r1","uid":"u1","controller":true}]},
 "spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}},
  "template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"web","image":"nginx:1.27","resources":{"limits":{"cpu":"500m"}}}]}}}}`

// applied is desired as the API server returns it: defaults, server fields, status.
const applied = `{"apiVersion":"apps/v1","kind":"Deployment",
 "metadata":{"name":"web","namespace":"shop","uid":"d1","resourceVersion":"10","generation":1,"creationTimestamp":"2026-11-23T10:00:00Z",
  "labels":{"app":"web","olm.operatorframework.io/owning-revision":"r1"},"annotations":{"team":"a","deployment.kubernetes.io/revision":"1"},
  "ownerReferences":[{"apiVersion":"olm.operatorframework.io/v1","kind":"ClusterObjectSet","name":"r1","uid":"u1","controller":true}],
  "managedFields":[{"manager":"cos-externalizer","operation":"Apply"}]},
 "spec":{"replicas":2,"revisionHistoryLimit":10,"selector":{"matchLabels":{"app":"web"}},
  "template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"web","image":"nginx:1.27","terminationMessagePath":"/dev/termination-log","resources":{"limits":{"cpu":"500m"}}}],"restartPolicy":"Always"}}},
 "status":{"replicas":0}}`

func TestFingerprint(t *testing.T) {
	tests := map[string]struct {
		change func(live map[string]any)
		drift  bool
	}{
		"unchanged":                           {change: func(map[string]any) {}},
		"status changed":                      {change: func(l map[string]any) { l["status"] = map[string]any{"replicas": int64(2), "readyReplicas": int64(2)} }},
		"resourceVersion and managedFields":   {change: func(l map[string]any) { m := meta(l); m["resourceVersion"] = "11"; m["managedFields"] = []any{} }},
		"a label added by someone else":       {change: func(l map[string]any) { labels(l)["extra"] = "x" }},
		"an annotation added by someone else": {change: func(l map[string]any) { meta(l)["annotations"].(map[string]any)["other"] = "y" }},
		"a field we do not set changed":       {change: func(l map[string]any) { spec(l)["revisionHistoryLimit"] = int64(3) }},
		"our label removed":                   {change: func(l map[string]any) { delete(labels(l), "app") }, drift: true},
		"the owning-revision label removed":   {change: func(l map[string]any) { delete(labels(l), "olm.operatorframework.io/owning-revision") }, drift: true},
		"all labels removed":                  {change: func(l map[string]any) { delete(meta(l), "labels") }, drift: true},
		"our annotation changed":              {change: func(l map[string]any) { meta(l)["annotations"].(map[string]any)["team"] = "b" }, drift: true},
		"our spec field changed":              {change: func(l map[string]any) { spec(l)["replicas"] = int64(5) }, drift: true},
		"a field turned to another type":      {change: func(l map[string]any) { spec(l)["selector"] = "x" }, drift: true},
		"a container changed":                 {change: func(l map[string]any) { containers(l)[0].(map[string]any)["image"] = "nginx:1.28" }, drift: true},
		"a container added": {change: func(l map[string]any) {
			c := containers(l)
			spec(l)["template"].(map[string]any)["spec"].(map[string]any)["containers"] = append(c, map[string]any{"name": "sidecar"})
		}, drift: true},
		"owner reference replaced": {change: func(l map[string]any) {
			meta(l)["ownerReferences"] = []any{map[string]any{"uid": "u2", "controller": true}}
		}, drift: true},
		"int becomes float of same value": {change: func(l map[string]any) { spec(l)["replicas"] = float64(2) }, drift: true},
	}
	d := obj(t, desired)
	before, err := Fingerprint(d, obj(t, applied))
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			live := obj(t, applied)
			tc.change(live)
			after, err := Fingerprint(d, live)
			if err != nil {
				t.Fatal(err)
			}
			if got := after != before; got != tc.drift {
				t.Errorf("drift = %v, want %v", got, tc.drift)
			}
		})
	}
}

func TestFingerprintIgnoresServerNormalization(t *testing.T) {
	// The API server answers "0.5" CPU as "500m": desired and live differ, but the fingerprint is
	// taken of live both times, so the normalized value is stable.
	d := obj(t, `{"spec":{"cpu":"0.5","list":[{"a":1}]}}`)
	live := obj(t, `{"spec":{"cpu":"500m","list":[{"a":1,"default":true}]}}`)
	a, _ := Fingerprint(d, live)
	b, _ := Fingerprint(d, obj(t, `{"spec":{"cpu":"500m","list":[{"a":1,"default":true}]},"status":{"x":1}}`))
	if a != b {
		t.Error("the same live object gave two fingerprints")
	}
}

func TestFingerprintAbsentDiffersFromEveryValue(t *testing.T) {
	d := obj(t, `{"a":"x"}`)
	absent, _ := Fingerprint(d, map[string]any{})
	for _, v := range []any{nil, "", int64(0), float64(0), false, true, []any{}, map[string]any{}} {
		got, err := Fingerprint(d, map[string]any{"a": v})
		if err != nil {
			t.Fatal(err)
		}
		if got == absent {
			t.Errorf("value %#v fingerprints like an absent field", v)
		}
	}
}

func meta(l map[string]any) map[string]any   { return l["metadata"].(map[string]any) }
func labels(l map[string]any) map[string]any { return meta(l)["labels"].(map[string]any) }
func spec(l map[string]any) map[string]any   { return l["spec"].(map[string]any) }
func containers(l map[string]any) []any {
	return spec(l)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)
}
