package objectdata

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/shared/content"
	"github.com/cos-externalizer/cos-externalizer/internal/shared/scheme"
)

// TestTouchUsesTheInjectedClock: the last-used time a touch writes is read on Writer.Clock (the one
// the manager shares with the orphan sweep), and a second touch at the same instant still writes.
func TestTouchUsesTheInjectedClock(t *testing.T) {
	const ns = "olmv1-system"
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	key := client.ObjectKey{Namespace: ns, Name: "s"}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name}, Type: olmv1.SecretTypeObjectData}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(sec).Build()
	clk := testingclock.NewFakePassiveClock(t0)
	w := &Writer{Client: c, Reader: c, Namespace: ns, Clock: clk}

	// Steps in order: each touches the same Secret once more.
	steps := []struct {
		name    string
		advance time.Duration
		want    time.Time
	}{
		{name: "first touch", want: t0},
		{name: "same instant: one ns later", want: t0.Add(time.Nanosecond)},
		{name: "the clock moved: its time", advance: time.Hour, want: t0.Add(time.Hour)},
	}
	for _, tc := range steps {
		t.Run(tc.name, func(t *testing.T) {
			clk.SetTime(clk.Now().Add(tc.advance))
			untouched, err := w.Touch(context.Background(), []client.ObjectKey{key})
			if err != nil || len(untouched) != 0 {
				t.Fatalf("Touch: %v, untouched %v", err, untouched)
			}
			got := &corev1.Secret{}
			if err := c.Get(context.Background(), key, got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(content.LastUsedValue(tc.want), got.Annotations[content.LastUsedAnnotation]); diff != "" {
				t.Errorf("last-used (-want +got):\n%s", diff)
			}
		})
	}
}
