package webhook

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/shared/secretuse"
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

// TestCoalescedList: requests that ask while a List runs are answered by the next List, which starts
// after they asked, together; the running List answers only those that asked before it started.
func TestCoalescedList(t *testing.T) {
	key := func(n string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: n} }
	var c coalescedList
	joins := make(chan bool, 10)
	c.joined = func(_ types.NamespacedName, started bool) { joins <- started }
	var mu sync.Mutex
	var calls []map[types.NamespacedName]bool
	release := make(chan struct{})
	users := func(_ context.Context, keys map[types.NamespacedName]bool) (map[types.NamespacedName][]secretuse.Use, error) { //nolint:unparam // the signature of coalescedList.Do's list
		mu.Lock()
		calls = append(calls, keys)
		n := len(calls)
		mu.Unlock()
		if n == 1 {
			<-release
		}
		out := map[types.NamespacedName][]secretuse.Use{}
		for k := range keys {
			out[k] = []secretuse.Use{{Name: fmt.Sprintf("call-%d", n)}}
		}
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
		t.Fatal("the first request did not start a List")
	}
	ask("b")
	ask("c")
	for range 2 {
		if started := <-joins; started {
			t.Fatal("a request started a second List while one ran")
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
	wg.Wait()
	want := map[string]string{"a": "call-1", "b": "call-2", "c": "call-2"}
	if diff := cmp.Diff(want, answers); diff != "" {
		t.Errorf("answers (-want +got):\n%s", diff)
	}
	wantCalls := []map[types.NamespacedName]bool{{key("a"): true}, {key("b"): true, key("c"): true, key("d"): true}}
	if diff := cmp.Diff(wantCalls, calls); diff != "" {
		t.Errorf("Lists (-want +got):\n%s", diff)
	}
}
