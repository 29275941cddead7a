package admission_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/test/bench/procstat"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
	"github.com/cos-externalizer/cos-externalizer/webhook"
)

// Refs-only reads (issue 35): forged AdmissionReviews of refs-only creates, each about 8 KB and
// naming refsSecrets object-data Secrets of refsSecretSize bytes, sent straight to the webhook port
// (open: no --webhook-client-ca, as every shipped install runs), refsClients at once. Before, each
// request read every Secret it names and kept them all until it answered (90 MB -> 702 MB RSS);
// now each Secret is charged to the request's budget before it is read and dropped once checked.
const (
	refsSecrets    = 100
	refsSecretSize = 900 << 10
	refsClients    = 4
)

// BenchmarkRefsOnlyReads reports the manager's RSS before the round and its peak during it, for dry
// runs (the reads alone) and for writes (the reads, then the touch of each Secret).
func BenchmarkRefsOnlyReads(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		env := testenv.StartFor(b)
		mgr := startManagerAt(b, env)
		ctx := context.Background()
		var names []string
		for i := range refsSecrets {
			data := make([]byte, refsSecretSize)
			if _, err := rand.Read(data); err != nil {
				b.Fatal(err)
			}
			sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testenv.SystemNamespace, Name: fmt.Sprintf("refs-bench-%d-0123456789abcdef", i),
				Labels: map[string]string{olmv1.LabelRevisionName: "refs-bench"}},
				Type: olmv1.SecretTypeObjectData, Immutable: ptr.To(true), Data: map[string][]byte{"k": data}}
			if err := env.Client.Create(ctx, sec); err != nil {
				b.Fatal(err)
			}
			names = append(names, sec.Name)
		}
		httpc := webhookClient(b, mgr.ca)
		for _, dryRun := range []bool{true, false} {
			body := refsReview(b, names, dryRun)
			before, err := procstat.ReadMemory(mgr.proc.PID())
			if err != nil {
				b.Fatal(err)
			}
			resetPeak(b, mgr.proc.PID())
			start := time.Now()
			codes := map[string]int{}
			var mu sync.Mutex
			var wg sync.WaitGroup
			for range refsClients {
				wg.Go(func() {
					answer := postReview(httpc, mgr.url+webhook.MutatePath, body)
					mu.Lock()
					codes[answer]++
					mu.Unlock()
				})
			}
			wg.Wait()
			took := time.Since(start)
			peak := peakRSS(b, mgr.proc.PID())
			what := "writes"
			if dryRun {
				what = "dry runs"
			}
			b.Logf("%d concurrent %s of %d bytes naming %d Secrets of %d KiB: manager RSS %.0f MiB before, peak %.0f MiB; answers %v in %.1f s",
				refsClients, what, len(body), refsSecrets, refsSecretSize>>10, before.RSS/(1<<20), peak/(1<<20), codes, took.Seconds())
			b.ReportMetric(peak/(1<<20), "peak-rss-MiB-"+map[bool]string{true: "dryrun", false: "write"}[dryRun])
		}
		b.StartTimer()
	}
}

// refsReview is the AdmissionReview of a refs-only create naming every Secret of names.
func refsReview(b *testing.B, names []string, dryRun bool) []byte {
	b.Helper()
	var objs []olmv1.ClusterObjectSetObject
	for _, n := range names {
		objs = append(objs, builders.Ref(n, "", "k"))
	}
	cos := builders.COS("refs-bench", builders.WithPhase("configuration", objs...))
	cos.APIVersion, cos.Kind = "olm.operatorframework.io/v1", "ClusterObjectSet"
	raw, err := json.Marshal(cos)
	if err != nil {
		b.Fatal(err)
	}
	review := admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: types.UID("refs-bench"), Operation: admissionv1.Create, Name: cos.Name,
			Kind:     metav1.GroupVersionKind{Group: "olm.operatorframework.io", Version: "v1", Kind: "ClusterObjectSet"},
			Resource: metav1.GroupVersionResource{Group: "olm.operatorframework.io", Version: "v1", Resource: "clusterobjectsets"},
			Object:   runtime.RawExtension{Raw: raw}, DryRun: ptr.To(dryRun), UserInfo: authenticationv1.UserInfo{Username: "forger"}}}
	body, err := json.Marshal(review)
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// webhookClient trusts the manager's serving certificate and presents none.
func webhookClient(b *testing.B, ca []byte) *http.Client {
	b.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		b.Fatal("no serving CA")
	}
	return &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
}

// postReview sends an AdmissionReview and says how it was answered: allowed, or the refusal's code.
func postReview(httpc *http.Client, url string, body []byte) string {
	resp, err := httpc.Post(url, "application/json", bytes.NewReader(body)) //nolint:noctx // the client's own timeout
	if err != nil {
		return "error: " + err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	raw, _ := io.ReadAll(resp.Body)
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(raw, &review); err != nil || review.Response == nil {
		return fmt.Sprintf("HTTP %d", resp.StatusCode)
	}
	if review.Response.Allowed {
		return "allowed"
	}
	if review.Response.Result != nil {
		return fmt.Sprintf("refused %d", review.Response.Result.Code)
	}
	return "refused"
}
