package controllers

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/secretdata"
)

// TestUnresolvedReason: the reconciler words each of the resolver's failures in upstream's words, as
// blocked (needs a person) or missing (retryable).
func TestUnresolvedReason(t *testing.T) {
	key := types.NamespacedName{Namespace: "olmv1-system", Name: "s"}
	failure := func(reason secretdata.Reason, err error) error {
		return &secretdata.Failure{Reason: reason, Secret: key, Key: "k", Err: err, Flag: "--max-concurrent-resolved-bytes"}
	}
	type words struct{ Blocked, Missing string }
	tests := map[string]struct {
		err  error
		want words
	}{
		"missing Secret": {failure(secretdata.SecretMissing, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, "s")),
			words{Missing: `getting Secret olmv1-system/s: secrets "s" not found`}},
		"unreadable Secret": {failure(secretdata.SecretUnreadable, errors.New("timeout")),
			words{Missing: "getting Secret olmv1-system/s: timeout"}},
		"key missing": {failure(secretdata.KeyMissing, nil), words{Missing: `key "k" not found in Secret olmv1-system/s`}},
		"busy": {failure(secretdata.Busy, content.ErrBusy),
			words{Missing: `key "k" in Secret olmv1-system/s: no room left for resolved content in this process (--max-concurrent-resolved-bytes)`}},
		"not immutable": {failure(secretdata.NotImmutable, nil),
			words{Blocked: "the following secrets are not immutable (referenced secrets must have immutable set to true): olmv1-system/s"}},
		"over budget": {failure(secretdata.OverBudget, content.ErrBudgetExceeded),
			words{Blocked: `key "k" in Secret olmv1-system/s: the resolved content of this ClusterObjectSet exceeds the limit of 100 bytes (--max-resolved-bytes)`}},
		"digest mismatch": {failure(secretdata.DigestMismatch, content.ErrDigestMismatch),
			words{Blocked: `key "k" in Secret olmv1-system/s: the content does not match its content-addressed key: content does not match its key`}},
		"too large": {failure(secretdata.TooLarge, content.ErrTooLarge),
			words{Blocked: `decompressed data for key "k" in Secret olmv1-system/s exceeds maximum size (10485760 bytes)`}},
		"corrupt": {failure(secretdata.Corrupt, content.ErrCorrupt),
			words{Blocked: `unmarshaling object from key "k" in Secret olmv1-system/s: corrupt content`}},
		"not a Kubernetes object": {failure(secretdata.NotAnObject, secretdata.ErrNotKubernetesObject),
			words{Blocked: `unmarshaling object from key "k" in Secret olmv1-system/s: not a Kubernetes object (apiVersion and kind are required)`}},
		"not a failure": {errors.New("something else"), words{Missing: "something else"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got words
			got.Blocked, got.Missing = unresolvedReason(tc.err, 100)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
