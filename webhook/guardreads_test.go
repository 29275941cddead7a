package webhook

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/secretuse"
)

func TestGuardCandidates(t *testing.T) {
	cosRef := func(name string) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: olmv1.GroupVersion.String(), Kind: olmv1.ClusterObjectSetKind, Name: name, UID: types.UID("uid-" + name)}
	}
	many := make([]metav1.OwnerReference, 2000)
	for i := range many {
		many[i] = cosRef(fmt.Sprintf("forged-%d", i))
	}
	type want struct {
		Names []string
		Many  bool
	}
	tests := map[string]struct {
		referrers []string
		label     string
		owners    []metav1.OwnerReference
		want      want
	}{
		"nothing":                                  {want: want{}},
		"referrers, label, owners once":            {referrers: []string{"a", "b"}, label: "b", owners: []metav1.OwnerReference{cosRef("c"), cosRef("a")}, want: want{Names: []string{"a", "b", "c"}}},
		"the label names one":                      {label: "x-0123456789abcdef", want: want{Names: []string{"x-0123456789abcdef"}}},
		"owners of other kinds are not candidates": {owners: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "cm"}}, want: want{}},
		"exactly k":                                {referrers: []string{"1", "2", "3", "4", "5", "6", "7"}, label: "8", want: want{Names: []string{"1", "2", "3", "4", "5", "6", "7", "8"}}},
		"k+1: list":                                {referrers: []string{"1", "2", "3", "4", "5", "6", "7", "8"}, label: "9", want: want{Many: true}},
		"2,000 forged owners: list":                {owners: many, want: want{Many: true}},
		"duplicates count once":                    {owners: []metav1.OwnerReference{cosRef("a"), cosRef("a"), cosRef("a")}, referrers: []string{"a"}, label: "a", want: want{Names: []string{"a"}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			names, m := guardCandidates(tc.referrers, tc.label, tc.owners, 8)
			if diff := cmp.Diff(tc.want, want{Names: names, Many: m}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestCoalescedList: requests that ask while a List runs, or while the pause after it lasts, are
// answered together by the next List, which starts after they asked and only once the pause has
// passed; the running List answers only those that asked before it started.
func TestCoalescedList(t *testing.T) {
	key := func(n string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: n} }
	clk := testingclock.NewFakeClock(time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC))
	c := coalescedList{clock: clk}
	joins := make(chan bool, 10)
	c.joined = func(_ types.NamespacedName, started bool) { joins <- started }
	var mu sync.Mutex
	var calls []map[types.NamespacedName]bool
	release := make(chan struct{})
	began := make(chan int, 10)
	listed := make(chan int, 10)
	users := func(_ context.Context, keys map[types.NamespacedName]bool) (map[types.NamespacedName][]secretuse.Use, error) { //nolint:unparam // the signature of coalescedList.Do's list
		mu.Lock()
		calls = append(calls, keys)
		n := len(calls)
		mu.Unlock()
		began <- n
		if n == 1 {
			<-release
			clk.Step(100 * time.Millisecond) // the first List takes 100 ms: the pause is the minimum
		}
		out := map[types.NamespacedName][]secretuse.Use{}
		for k := range keys {
			out[k] = []secretuse.Use{{Name: fmt.Sprintf("call-%d", n)}}
		}
		listed <- n
		return out, nil
	}
	answers := map[string]string{}
	var wg sync.WaitGroup
	ask := func(name string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := c.Do(context.Background(), key(name), users)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				answers[name] = err.Error()
				return
			}
			answers[name] = got[key(name)][0].Name
		}()
	}
	ask("a")
	if started := <-joins; !started {
		t.Fatal("the first request did not start the Lists")
	}
	<-began // the first List has begun: later requests wait for the next
	ask("b")
	ask("c")
	for range 2 {
		if started := <-joins; started {
			t.Fatal("a request started a second runner while a List ran")
		}
	}
	// A request that gives up while it waits returns, and the others still get their answer.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Do(ctx, key("d"), users); !errors.Is(err, context.Canceled) {
		t.Errorf("a canceled request: got %v", err)
	}
	<-joins
	close(release)
	if n := <-listed; n != 1 {
		t.Fatalf("List %d ended first", n)
	}
	// The second List waits for the pause; a request that asks meanwhile joins it.
	for !clk.HasWaiters() {
		runtime.Gosched()
	}
	ask("e")
	<-joins
	clk.Step(minListPause - time.Nanosecond)
	select {
	case n := <-listed:
		t.Fatalf("List %d ran before the pause had passed", n)
	default:
	}
	clk.Step(time.Nanosecond)
	wg.Wait()
	want := map[string]string{"a": "call-1", "b": "call-2", "c": "call-2", "e": "call-2"}
	if diff := cmp.Diff(want, answers); diff != "" {
		t.Errorf("answers (-want +got):\n%s", diff)
	}
	wantCalls := []map[types.NamespacedName]bool{{key("a"): true}, {key("b"): true, key("c"): true, key("d"): true, key("e"): true}}
	if diff := cmp.Diff(wantCalls, calls); diff != "" {
		t.Errorf("Lists (-want +got):\n%s", diff)
	}
}

func TestListPause(t *testing.T) {
	tests := map[time.Duration]time.Duration{
		0:                      minListPause,
		10 * time.Millisecond:  minListPause,
		minListPause:           minListPause,
		600 * time.Millisecond: 600 * time.Millisecond,
		maxListPause:           maxListPause,
		10 * time.Second:       maxListPause,
	}
	for took, want := range tests {
		if got := listPause(took); got != want {
			t.Errorf("after a List of %v: pause %v, want %v", took, got, want)
		}
	}
}
