package drift

import (
	"encoding/json"
	"testing"
)

// FuzzFingerprint: the fingerprint is deterministic, does not depend on what live holds outside the
// shape of desired, and changes when a field desired sets disappears from live.
func FuzzFingerprint(f *testing.F) {
	f.Add(`{"a":{"b":1,"c":[1,2]},"d":"x"}`, `{"a":{"b":1,"c":[1,2],"e":true},"d":"x","status":{}}`)
	f.Add(desired, applied)
	f.Add(`{"metadata":{"labels":{}}}`, `{"metadata":{"labels":{"a":"b"}}}`)
	f.Fuzz(func(t *testing.T, ds, ls string) {
		var d, l map[string]any
		if json.Unmarshal([]byte(ds), &d) != nil || json.Unmarshal([]byte(ls), &l) != nil || d == nil || l == nil {
			return
		}
		a, err := Fingerprint(d, l)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := Fingerprint(d, l)
		if a != b {
			t.Fatal("not deterministic")
		}
		// Keys outside desired's shape do not count.
		l["zz-not-in-desired"] = "x"
		if _, in := d["zz-not-in-desired"]; !in {
			if c, _ := Fingerprint(d, l); c != a {
				t.Fatal("a key outside the shape changed the fingerprint")
			}
		}
		delete(l, "zz-not-in-desired")
		// Removing a top-level field that desired sets (other than status) changes it.
		for k := range d {
			if k == "status" {
				continue
			}
			if _, in := l[k]; !in {
				continue
			}
			saved := l[k]
			delete(l, k)
			if c, _ := Fingerprint(d, l); c == a {
				t.Fatalf("removing %q did not change the fingerprint", k)
			}
			l[k] = saved
			break
		}
	})
}
