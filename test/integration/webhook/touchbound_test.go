package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
	"github.com/cos-externalizer/cos-externalizer/webhook"
)

// TestRefsOnlyReviewsWriteNoSecret (issue 35, write amplification): a caller on the webhook port
// that sends refs-only creates naming existing object-data Secrets, over and over, made the webhook
// rewrite each of them (up to ~1 MiB) at every request. Now a Secret is written only to drop an owner
// reference to a ClusterObjectSet that is gone: 20 such reviews write none of a live set's Secrets.
// The reviews are sent straight to the port, as an unauthenticated caller on an open port would (here
// with the API server's certificate, which the test's manager requires).
func TestRefsOnlyReviewsWriteNoSecret(t *testing.T) {
	name := fmt.Sprintf("touch-bound-%d", time.Now().UnixNano()%1e6)
	testenv.Env.RemoveAfter(t, name)
	cos := builders.COS(name, builders.WithAnnotations(map[string]string{"cos-externalizer.io/externalize": "always"}),
		builders.WithPhase("configuration", builders.InlineConfigMaps("default", name, 6)...))
	if err := testenv.Env.Client.Create(context.Background(), cos); err != nil {
		t.Fatal(err)
	}
	stored := getCOS(t, name)
	secrets := settledSecrets(t, stored)

	forged := stored.DeepCopy()
	forged.ObjectMeta = metav1.ObjectMeta{Name: name + "-forged"}
	raw, err := json.Marshal(forged)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: manager.TLSConfig(true)}}
	defer c.CloseIdleConnections()
	for i := range 20 {
		review, err := json.Marshal(admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{
				UID:       types.UID(fmt.Sprintf("forged-touch-%d", i)),
				Kind:      metav1.GroupVersionKind{Group: olmv1.GroupVersion.Group, Version: "v1", Kind: "ClusterObjectSet"},
				Resource:  metav1.GroupVersionResource{Group: olmv1.GroupVersion.Group, Version: "v1", Resource: "clusterobjectsets"},
				Name:      forged.Name,
				Operation: admissionv1.Create,
				UserInfo:  authenticationv1.UserInfo{Username: "forger"},
				Object:    runtime.RawExtension{Raw: raw},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Post(manager.WebhookURL+webhook.MutatePath, "application/json", bytes.NewReader(review))
		if err != nil {
			t.Fatal(err)
		}
		var got admissionv1.AdmissionReview
		err = json.NewDecoder(resp.Body).Decode(&got)
		_ = resp.Body.Close()
		if err != nil || got.Response == nil || !got.Response.Allowed {
			t.Fatalf("review %d: %s, %v, %+v", i, resp.Status, err, got.Response)
		}
	}
	checkSecretsUnwritten(t, "20 refs-only reviews", name, secrets)
}
