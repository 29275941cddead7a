package webhook_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cos-externalizer/cos-externalizer/internal/admission"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// TestUnreferencedWritesAreBounded: creates whose Secrets no ClusterObjectSet will reference (here the
// API server's storage refuses them after admission, for the resourceVersion they carry, as a forger
// or a create that fails after admission for any reason leaves them) fill the bound; past it, creates are refused with
// 429 before anything is written, and the bytes written stay under the bound.
func TestUnreferencedWritesAreBounded(t *testing.T) {
	const (
		perCOS   = 200_000 // random, so stored uncompressed
		maxBytes = 3 * perCOS
		creates  = 8
	)
	withManager(t, "--max-unreferenced-bytes="+strconv.Itoa(maxBytes))
	ctx := context.Background()
	before := secretNames(t)
	t.Cleanup(func() {
		for _, name := range written(t, before) {
			sec := &corev1.Secret{}
			sec.Namespace, sec.Name = testenv.SystemNamespace, name
			_ = testenv.Env.Client.Delete(context.Background(), sec)
		}
	})
	rest := testenv.Env.Clientset.CoreV1().RESTClient()
	var tooMany int
	for i := range creates {
		blob := make([]byte, perCOS*3/4)
		if _, err := rand.Read(blob); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("unreferenced-%d", i)
		cos := builders.COS(name, builders.WithAnnotations(map[string]string{admission.Annotation: string(admission.ModeAlways)}),
			builders.WithPhase("configuration", builders.Inline(builders.ConfigMap("default", name, map[string]string{"blob": base64.StdEncoding.EncodeToString(blob)}))))
		// Refused by the API server's storage after admission: the webhook has written its Secrets.
		cos.ResourceVersion = "1"
		body, err := json.Marshal(cos)
		if err != nil {
			t.Fatal(err)
		}
		// No retries: client-go retries a 429 with Retry-After by itself.
		err = rest.Post().AbsPath("/apis/olm.operatorframework.io/v1/clusterobjectsets").SetHeader("Content-Type", "application/json").
			Body(body).MaxRetries(0).Do(ctx).Error()
		switch {
		case err == nil:
			t.Fatalf("%s was stored: the API server should refuse a create with a resourceVersion", name)
		case apierrors.IsTooManyRequests(err):
			tooMany++
			if !strings.Contains(err.Error(), "--max-unreferenced-bytes=") || !strings.Contains(err.Error(), "nothing was written") {
				t.Errorf("%s: the refusal does not name the flag: %v", name, err)
			}
		case tooMany > 0:
			t.Errorf("%s: refused otherwise after a 429: %v", name, err)
		}
	}
	var stored int
	for _, name := range written(t, before) {
		sec := &corev1.Secret{}
		if err := testenv.Env.Client.Get(ctx, client.ObjectKey{Namespace: testenv.SystemNamespace, Name: name}, sec); err != nil {
			t.Fatal(err)
		}
		for k, v := range sec.Data {
			stored += len(k) + len(v)
		}
	}
	t.Logf("%d of %d creates refused with 429; %d bytes of object-data Secrets written (bound %d)", tooMany, creates, stored, maxBytes)
	if tooMany < creates-maxBytes/perCOS {
		t.Errorf("%d creates refused with 429, want at least %d", tooMany, creates-maxBytes/perCOS)
	}
	if stored > maxBytes {
		t.Errorf("%d bytes written, over the bound of %d", stored, maxBytes)
	}
}
