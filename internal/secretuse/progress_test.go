package secretuse

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/types"
)

func TestProgress(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	grace := 5 * time.Minute
	type round struct {
		at     time.Duration
		unused []types.UID
		// carry, when set, is a new leader: a Progress of its own that carries on from the sums
		// the previous one encoded.
		carry bool
		want  []types.UID
	}
	tests := map[string][]round{
		"due a grace period after it was first seen unused": {
			{at: 0, unused: []types.UID{"a"}},
			{at: grace - time.Second, unused: []types.UID{"a"}},
			{at: grace, unused: []types.UID{"a"}, want: []types.UID{"a"}},
		},
		"seen used in between: starts again": {
			{at: 0, unused: []types.UID{"a", "b"}},
			{at: time.Minute, unused: []types.UID{"b"}},
			{at: grace, unused: []types.UID{"a", "b"}, want: []types.UID{"b"}},
			{at: grace + 5*time.Minute - time.Second, unused: []types.UID{"a", "b"}, want: []types.UID{"b"}},
			{at: grace + 5*time.Minute, unused: []types.UID{"a", "b"}, want: []types.UID{"a", "b"}},
		},
		"a clock that went back adds nothing, then counts on": {
			{at: time.Hour, unused: []types.UID{"a"}},
			{at: 0, unused: []types.UID{"a"}},
			{at: grace - time.Second, unused: []types.UID{"a"}},
			{at: grace, unused: []types.UID{"a"}, want: []types.UID{"a"}},
		},
		"a new leader carries on: the change costs one interval": {
			{at: 0, unused: []types.UID{"a"}},
			{at: 4 * time.Minute, unused: []types.UID{"a"}},
			// The new leader's clock is another: an hour apart changes nothing.
			{at: time.Hour, unused: []types.UID{"a"}, carry: true},
			{at: time.Hour + time.Minute - time.Second, unused: []types.UID{"a"}},
			{at: time.Hour + time.Minute, unused: []types.UID{"a"}, want: []types.UID{"a"}},
		},
		"leaders changing at every look never add time, nor lose it": {
			{at: 0, unused: []types.UID{"a"}},
			{at: 4 * time.Minute, unused: []types.UID{"a"}},
			{at: 10 * time.Minute, unused: []types.UID{"a"}, carry: true},
			{at: 20 * time.Minute, unused: []types.UID{"a"}, carry: true},
			{at: 20*time.Minute + time.Minute, unused: []types.UID{"a"}, want: []types.UID{"a"}},
		},
		"duplicates count once": {
			{at: 0, unused: []types.UID{"a", "a"}},
			{at: grace, unused: []types.UID{"a", "a"}, want: []types.UID{"a"}},
		},
	}
	for name, rounds := range tests {
		t.Run(name, func(t *testing.T) {
			p := &Progress{}
			for i, r := range rounds {
				if r.carry {
					sums, err := DecodeProgress(p.Encode())
					if err != nil {
						t.Fatal(err)
					}
					p = &Progress{}
					p.Carry(sums)
				}
				got := p.Observe(r.unused, t0.Add(r.at), grace)
				if diff := cmp.Diff(r.want, got, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("round %d (at %s): due (-want +got):\n%s", i, r.at, diff)
				}
			}
		})
	}
}

func TestDecodeProgress(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    map[types.UID]time.Duration
		wantErr bool
	}{
		"empty":                 {in: ""},
		"sums":                  {in: `{"a":1500,"b":60000}`, want: map[types.UID]time.Duration{"a": 1500 * time.Millisecond, "b": time.Minute}},
		"negative and absurd":   {in: `{"a":-1,"b":99999999999999,"":5,"c":7}`, want: map[types.UID]time.Duration{"c": 7 * time.Millisecond}},
		"garbage":               {in: `{"a":`, wantErr: true},
		"not numbers":           {in: `{"a":"x"}`, wantErr: true},
		"an array, not an obj.": {in: `[1,2]`, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := DecodeProgress(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestProgressEncodeBounded(t *testing.T) {
	p := &Progress{}
	uids := make([]types.UID, MaxProgressEntries+10)
	for i := range uids {
		uids[i] = types.UID(strings.Repeat("x", 8) + string(rune('a'+i%26)) + time.Duration(i).String())
	}
	p.Observe(uids, time.Unix(0, 0), time.Hour)
	p.Observe(uids, time.Unix(1, 0), time.Hour)
	enc := p.Encode()
	sums, err := DecodeProgress(enc)
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) != MaxProgressEntries {
		t.Errorf("encoded %d sums, want at most %d", len(sums), MaxProgressEntries)
	}
	if len(enc) > 1<<20 {
		t.Errorf("encoding is %d bytes, over a ConfigMap's 1 MiB", len(enc))
	}
}

// FuzzProgress: whatever the sequence of observations and leader changes, a Secret is due only once
// it has been seen unused, without a gap, for at least the grace period counted as the sum of the
// intervals between two looks of the same leader; and a look never makes a Secret due that the model
// says is not.
func FuzzProgress(f *testing.F) {
	f.Add([]byte{0, 1, 0, 2, 1, 1, 0, 1, 9, 1})
	f.Add([]byte{3, 7, 3, 7, 200, 7, 3, 7, 3, 7})
	f.Fuzz(func(t *testing.T, ops []byte) {
		p := &Progress{}
		grace := 3 * time.Second
		now := time.Unix(0, 0)
		model := map[types.UID]time.Duration{}
		prev := map[types.UID]bool{}
		fresh := true
		for i := 0; i+1 < len(ops); i += 2 {
			step := time.Duration(ops[i]%4) * time.Second
			if ops[i] >= 128 { // a new leader
				sums, err := DecodeProgress(p.Encode())
				if err != nil {
					t.Fatal(err)
				}
				p = &Progress{}
				p.Carry(sums)
				fresh = true
			}
			now = now.Add(step)
			var unused []types.UID
			next := map[types.UID]time.Duration{}
			for j, uid := range []types.UID{"a", "b", "c"} {
				if ops[i+1]>>j&1 == 0 {
					continue
				}
				unused = append(unused, uid)
				d := model[uid]
				if prev[uid] && !fresh {
					d += step
				}
				next[uid] = d.Truncate(time.Millisecond)
			}
			model = next
			prev = map[types.UID]bool{}
			for _, uid := range unused {
				prev[uid] = true
			}
			fresh = false
			due := map[types.UID]bool{}
			for _, uid := range p.Observe(unused, now, grace) {
				due[uid] = true
			}
			for _, uid := range unused {
				if due[uid] != (model[uid] >= grace) {
					t.Fatalf("%s at %s: due %v, model has it unused for %s", uid, now, due[uid], model[uid])
				}
			}
		}
	})
}
