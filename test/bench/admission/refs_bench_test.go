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
	"strings"
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
	// At most 50 objects a phase.
	var phases []builders.Option
	for i := 0; i < len(names); i += 50 {
		var objs []olmv1.ClusterObjectSetObject
		for _, n := range names[i:min(i+50, len(names))] {
			objs = append(objs, builders.Ref(n, "", "k"))
		}
		phases = append(phases, builders.WithPhase(fmt.Sprintf("p%d", i/50), objs...))
	}
	cos := builders.COS("refs-bench", phases...)
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

// guardReviews is how many forged DELETE reviews of unused Secrets BenchmarkGuardReviews sends at once.
const guardReviews = 50

// BenchmarkGuardReviews sends guardReviews forged DELETE reviews of unused object-data Secrets to the
// Secret guard at once, straight to the webhook port, and reports the uncached Lists of
// ClusterObjectSets the manager made to confirm them (the API server's count of them; nothing else
// lists ClusterObjectSets meanwhile). Each review confirms "unused" with a List that starts after it
// asked; before the pause between Lists, reviews that trickled in made one List each.
func BenchmarkGuardReviews(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		env := testenv.StartFor(b)
		mgr := startManagerAt(b, env)
		httpc := webhookClient(b, mgr.ca)
		ctx := context.Background()
		lists := func() float64 {
			text, err := env.APIServerMetrics(ctx)
			if err != nil {
				b.Fatal(err)
			}
			n, err := testenv.SumMetric(strings.NewReader(text), "apiserver_request_total{", `verb="LIST"`, `resource="clusterobjectsets"`)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
		var bodies [][]byte
		for i := range guardReviews {
			sec := &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
				ObjectMeta: metav1.ObjectMeta{Namespace: testenv.SystemNamespace, Name: fmt.Sprintf("guard-bench-%d-0123456789abcdef", i),
					Labels: map[string]string{olmv1.LabelRevisionName: fmt.Sprintf("guard-bench-%d", i)}},
				Type: olmv1.SecretTypeObjectData}
			raw, err := json.Marshal(sec)
			if err != nil {
				b.Fatal(err)
			}
			review := admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
				Request: &admissionv1.AdmissionRequest{UID: types.UID(fmt.Sprintf("guard-bench-%d", i)), Operation: admissionv1.Delete,
					Namespace: sec.Namespace, Name: sec.Name,
					Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Secret"},
					Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "secrets"},
					OldObject: runtime.RawExtension{Raw: raw}, UserInfo: authenticationv1.UserInfo{Username: "forger"}}}
			body, err := json.Marshal(review)
			if err != nil {
				b.Fatal(err)
			}
			bodies = append(bodies, body)
		}
		before := lists()
		start := time.Now()
		answers := map[string]int{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, body := range bodies {
			wg.Go(func() {
				answer := postReview(httpc, mgr.url+webhook.SecretGuardPath, body)
				mu.Lock()
				answers[answer]++
				mu.Unlock()
			})
		}
		wg.Wait()
		took := time.Since(start)
		made := lists() - before
		b.Logf("%d concurrent forged DELETE reviews of unused Secrets: %v in %.2f s; %.0f uncached Lists of ClusterObjectSets", guardReviews, answers, took.Seconds(), made)
		b.ReportMetric(made, "lists")
		b.StartTimer()
	}
}
