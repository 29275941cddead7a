// Package framework holds the helpers that tests against an API server share: waiting for a
// condition, creating namespaces, and removing what a test created so that it can run again
// (-count). It imports no package of this module, so every test package can use it,
// test/controlplane's own tests included.
package framework

import (
	"context"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// Timeout bounds Eventually when its context has no deadline: generous, for loaded CI machines.
	Timeout = 3 * time.Minute
	// Interval is how often Eventually checks.
	Interval = 100 * time.Millisecond
)

// Condition reports whether what a test waits for holds, and what it saw, for the failure message.
type Condition func(ctx context.Context) (done bool, seen string)

// Eventually checks cond at once, then every Interval, until it holds. It fails t when ctx ends, or
// after Timeout if ctx has no deadline, naming what it waited for and what cond last saw.
func Eventually(ctx context.Context, t testing.TB, what string, cond Condition) {
	t.Helper()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, Timeout)
		defer cancel()
	}
	last := ""
	err := wait.PollUntilContextCancel(ctx, Interval, true, func(ctx context.Context) (bool, error) {
		ok, seen := cond(ctx)
		if ctx.Err() == nil {
			last = seen // not the error of a call cut short by the deadline
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v; last seen: %s", what, err, last)
	}
}

// Within returns a context that ends after d, or when the test ends: for Eventually, when how long
// a wait may take is part of what the test checks.
func Within(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// StopTimeout bounds how long Start's cleanup waits for what it started to return.
const StopTimeout = 30 * time.Second

// Start runs run in the background on a context of ctx that ends when the test ends; the test's
// cleanup then waits for run to return (at most StopTimeout) and fails the test, naming what, when
// it returns an error or does not return.
func Start(ctx context.Context, t testing.TB, what string, run func(context.Context) error) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s returned %v", what, err)
			}
		case <-time.After(StopTimeout):
			t.Errorf("%s did not stop", what)
		}
	})
}

// Gone holds once the API server no longer has obj (by its name and namespace).
func Gone(c client.Client, obj client.Object) Condition {
	return func(ctx context.Context) (bool, string) {
		err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object))
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, describe(obj) + " exists"
	}
}

// Delete deletes obj unless it is gone already, and waits until the API server no longer has it.
func Delete(ctx context.Context, t testing.TB, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
		t.Fatalf("deleting %s: %v", describe(obj), err)
	}
	WaitGone(ctx, t, c, obj)
}

// WaitGone waits until the API server no longer has obj.
func WaitGone(ctx context.Context, t testing.TB, c client.Client, obj client.Object) {
	t.Helper()
	Eventually(ctx, t, describe(obj)+" to be gone", Gone(c, obj))
}

// RemoveAfter deletes objs when the test ends and waits until they are gone, so that the test can
// run again (-count) with the same names.
func RemoveAfter(t testing.TB, c client.Client, objs ...client.Object) {
	t.Helper()
	t.Cleanup(func() {
		// The test's context is done by now: cleanup has one of its own.
		ctx := context.Background()
		for _, obj := range objs {
			if err := c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
				t.Errorf("deleting %s: %v", describe(obj), err)
			}
		}
		for _, obj := range objs {
			WaitGone(ctx, t, c, obj)
		}
	})
}

// describe names obj by its Go type and key, e.g. "ClusterObjectSet demo" (TypeMeta is often empty).
func describe(obj client.Object) string {
	name := obj.GetName()
	if ns := obj.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	return reflect.TypeOf(obj).Elem().Name() + " " + name
}

// EnsureNamespace creates the namespace unless it exists.
func EnsureNamespace(ctx context.Context, t testing.TB, c client.Client, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Create(ctx, ns); client.IgnoreAlreadyExists(err) != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
}
