package admission

import (
	"testing"
)

func TestStaleUpdate(t *testing.T) {
	const stored = `{"metadata":{"name":"x","resourceVersion":"42"},"spec":{"revision":1}}`
	tests := map[string]struct {
		op       Operation
		old, new string
		want     bool
	}{
		"same resourceVersion":           {op: Update, old: stored, new: `{"metadata":{"resourceVersion":"42"}}`},
		"older resourceVersion":          {op: Update, old: stored, new: `{"metadata":{"resourceVersion":"41"}}`, want: true},
		"newer resourceVersion":          {op: Update, old: stored, new: `{"metadata":{"resourceVersion":"43"}}`, want: true},
		"leading zero, same number":      {op: Update, old: stored, new: `{"metadata":{"resourceVersion":"042"}}`},
		"leading zero, other number":     {op: Update, old: stored, new: `{"metadata":{"resourceVersion":"041"}}`, want: true},
		"unset: Invalid, not Conflict":   {op: Update, old: stored, new: `{"metadata":{"name":"x"}}`},
		"empty: Invalid, not Conflict":   {op: Update, old: stored, new: `{"metadata":{"resourceVersion":""}}`},
		"zero: Invalid, not Conflict":    {op: Update, old: stored, new: `{"metadata":{"resourceVersion":"0"}}`},
		"no metadata":                    {op: Update, old: stored, new: `{"spec":{}}`},
		"not a number":                   {op: Update, old: stored, new: `{"metadata":{"resourceVersion":"abc"}}`},
		"negative":                       {op: Update, old: stored, new: `{"metadata":{"resourceVersion":"-1"}}`},
		"signed":                         {op: Update, old: stored, new: `{"metadata":{"resourceVersion":"+41"}}`},
		"over uint64":                    {op: Update, old: stored, new: `{"metadata":{"resourceVersion":"18446744073709551616"}}`},
		"a JSON number":                  {op: Update, old: stored, new: `{"metadata":{"resourceVersion":41}}`},
		"other case of the key":          {op: Update, old: stored, new: `{"metadata":{"ResourceVersion":"41"}}`},
		"other case of metadata":         {op: Update, old: stored, new: `{"Metadata":{"resourceVersion":"41"}}`},
		"not JSON":                       {op: Update, old: stored, new: `{"metadata":`},
		"stored one unreadable":          {op: Update, old: `{"metadata":{"resourceVersion":"x"}}`, new: `{"metadata":{"resourceVersion":"41"}}`},
		"stored one without one":         {op: Update, old: `{"metadata":{}}`, new: `{"metadata":{"resourceVersion":"41"}}`},
		"create carrying one":            {op: Create, new: `{"metadata":{"resourceVersion":"41"}}`},
		"other operation":                {op: "DELETE", old: stored, new: `{"metadata":{"resourceVersion":"41"}}`},
		"large object, stale":            {op: Update, old: stored, new: `{"spec":{"phases":[{"name":"p","objects":[{"object":{"kind":"ConfigMap","metadata":{"resourceVersion":"42"}}}]}]},"metadata":{"resourceVersion":"7"}}`, want: true},
		"nested resourceVersion ignored": {op: Update, old: stored, new: `{"spec":{"metadata":{"resourceVersion":"7"}},"metadata":{"resourceVersion":"42"}}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := StaleUpdate(tc.op, []byte(tc.old), []byte(tc.new)); got != tc.want {
				t.Errorf("StaleUpdate = %v, want %v", got, tc.want)
			}
		})
	}
}

// FuzzStaleUpdate checks that arbitrary bodies never panic it, and that an update is stale only when
// both resourceVersions read and differ.
func FuzzStaleUpdate(f *testing.F) {
	f.Add([]byte(`{"metadata":{"resourceVersion":"42"}}`), []byte(`{"metadata":{"resourceVersion":"41"}}`))
	f.Add([]byte(`{}`), []byte(`{"metadata":{"resourceVersion":"0"}}`))
	f.Fuzz(func(t *testing.T, old, updated []byte) {
		stale := StaleUpdate(Update, old, updated)
		o, okOld := resourceVersionOf(old)
		n, okNew := resourceVersionOf(updated)
		if want := okOld && okNew && o != 0 && n != 0 && o != n; stale != want {
			t.Fatalf("StaleUpdate = %v; resourceVersions %d (%v), %d (%v)", stale, o, okOld, n, okNew)
		}
		if StaleUpdate(Update, old, old) {
			t.Fatal("an update carrying the stored resourceVersion is stale")
		}
	})
}
