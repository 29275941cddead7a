package adversarial_test

// The open port (issue 35, "Shown, not claimed"): a forged caller straight to the webhook port who
// fills the bound of unreferenced Secrets and tries to keep it full by naming its Secrets in
// refs-only requests (ledger-fill), who names many large Secrets in many refs-only requests at once
// (amplify: reads and writes), and the client CA file broken and mended under a serving manager
// (client-ca-garbage).
//
// The manager here authenticates its callers (--webhook-client-ca, the local control plane's
// default): the forger presents the API server's client certificate, which reaches the handlers as
// any caller reaches them on an install without --webhook-client-ca. Nothing in the handlers looks at
// who the caller is.

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/naming"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

const (
	// opLedgerFill: a forged caller fills the bound of unreferenced Secrets with inline creates it
	// never stores, then names its Secrets in refs-only requests every 500 ms; a user's inline
	// creates must be admitted again within ledgerBound of the fill.
	opLedgerFill = "ledger-fill"
	// opAmplify: ampRequests forged refs-only requests at once, each naming ampSecrets Secrets of
	// ampSecretBytes, ampWrites of them real and the others dry runs (which read and write nothing
	// else: the reads cost the same, the touch is skipped): the process's resident set stays within
	// rssBound, and no request writes a Secret it names (the touch writes only to drop owners that
	// are gone: none here).
	opAmplify = "amplify"
	// opClientCAGarbage: the --webhook-client-ca file turned to garbage (Variant: garbage, empty,
	// truncated, missing) and back: the manager serves with its last good bundle meanwhile, counts the
	// failure, and serves with the file again once mended.
	opClientCAGarbage = "client-ca-garbage"

	// maxUnreferenced is the replicas' --max-unreferenced-secrets.
	maxUnreferenced = 40

	ampSecrets     = 24
	ampSecretBytes = 900 << 10
	ampRequests    = 28
	ampWrites      = 4
)

// ledgerBound is how long after a forged caller's last write its Secrets may still refuse a user's
// create: the sweep deletes a Secret nobody uses within the grace period plus an interval per leader
// change, whatever touches it (docs/reconciler.md); here one leader, so the grace period and the two
// intervals around it, and 20 s for the API server, the cache and the sweep's own writes under the
// round's load.
func (r *runner) ledgerBound() time.Duration {
	return r.env.grace + 2*r.env.sweepEvery + 20*time.Second
}

// forgerClient is a TLS client of the webhook port that presents mgr's client certificate, the API
// server's, when the manager authenticates its callers: the handlers see what any Pod sends to an
// install without --webhook-client-ca.
func forgerClient(mgr *testenv.Manager) *http.Client {
	cfg := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} //nolint:gosec // the forger trusts anything
	if mgr.ClientCert != nil {
		cfg.Certificates = []tls.Certificate{*mgr.ClientCert}
	}
	return &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: cfg, MaxIdleConnsPerHost: ampRequests}}
}

// forgedReview is the body of an AdmissionReview of a ClusterObjectSet, as the API server would send
// it for user.
func forgedReview(operation admissionv1.Operation, obj, old *olmv1.ClusterObjectSet, user string, dryRun bool) ([]byte, error) {
	raw := func(c *olmv1.ClusterObjectSet) runtime.RawExtension {
		if c == nil {
			return runtime.RawExtension{}
		}
		c.APIVersion, c.Kind = olmv1.GroupVersion.String(), olmv1.ClusterObjectSetKind
		b, _ := json.Marshal(c)
		return runtime.RawExtension{Raw: b}
	}
	return json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID(fmt.Sprintf("forged-%d", time.Now().UnixNano())),
			Kind:      metav1.GroupVersionKind{Group: olmv1.GroupVersion.Group, Version: olmv1.GroupVersion.Version, Kind: olmv1.ClusterObjectSetKind},
			Resource:  metav1.GroupVersionResource{Group: olmv1.GroupVersion.Group, Version: olmv1.GroupVersion.Version, Resource: "clusterobjectsets"},
			Name:      obj.Name,
			Operation: operation,
			UserInfo:  authenticationv1.UserInfo{Username: user},
			Object:    raw(obj),
			OldObject: raw(old),
			DryRun:    ptr.To(dryRun),
		},
	})
}

// forgedAnswer is the webhook's answer to a forged review.
type forgedAnswer struct {
	allowed bool
	code    int32
	message string
}

// sendForged posts body to the mutating webhook of mgr with hc and decodes the answer.
func sendForged(ctx context.Context, hc *http.Client, mgr *testenv.Manager, body []byte) (forgedAnswer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, mgr.WebhookURL+mutatePath, bytes.NewReader(body))
	if err != nil {
		return forgedAnswer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return forgedAnswer{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return forgedAnswer{}, err
	}
	review := admissionv1.AdmissionReview{}
	if err := json.Unmarshal(raw, &review); err != nil || review.Response == nil {
		return forgedAnswer{code: int32(resp.StatusCode), message: trim(string(raw))}, nil
	}
	a := forgedAnswer{allowed: review.Response.Allowed, code: http.StatusOK}
	if s := review.Response.Result; s != nil {
		a.code, a.message = s.Code, s.Message
	}
	return a, nil
}

// forger is the user the forged reviews claim to come from.
const forger = "system:serviceaccount:default:forger"

// ledgerFill: see opLedgerFill.
func (r *runner) ledgerFill(op Op) error {
	mgr := r.env.mgr
	if mgr == nil {
		return nil
	}
	hc := forgerClient(mgr)
	prefix := fmt.Sprintf("%s-fill-%d", r.m.run, op.Seed%100000)
	// Fill: tiny inline creates, four at a time, each making one Secret that nothing will reference,
	// until the webhook refuses one for the bound.
	full, filled := false, 0
	for i := 0; i < maxUnreferenced+20 && !full; i += 4 {
		var mu sync.Mutex
		var wg sync.WaitGroup
		var failed error
		for j := i; j < i+4; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := r.inlineCOS(Op{Owner: 0, Rev: 1}, [][]*unstructured.Unstructured{{builders.ConfigMap(r.m.cmNamespace(), "fill", map[string]string{"v": fmt.Sprint(j)})}})
				c.Name = fmt.Sprintf("%s-%d", prefix, j)
				c.Annotations = map[string]string{"cos-externalizer.io/externalize": "always"}
				body, err := forgedReview(admissionv1.Create, c, nil, forger, false)
				var a forgedAnswer
				if err == nil {
					a, err = sendForged(r.ctx(), hc, mgr, body)
				}
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					failed = err
				case a.allowed:
					filled++
				case a.code == http.StatusTooManyRequests && strings.Contains(a.message, "max-unreferenced"):
					full = true
				}
			}()
		}
		wg.Wait()
		if failed != nil {
			// The forger's trouble (a nemesis of the round): it goes on with what it wrote.
			r.logf("ledger-fill: the forger's create failed: %v", failed)
			break
		}
	}
	fillEnd := time.Now()
	r.logf("ledger-fill: the forger wrote %d Secrets; the bound refused it: %v", filled, full)
	mine, err := r.forgedSecrets(prefix)
	if err != nil {
		return err
	}
	// Keep it full: refs-only requests naming every Secret of the forger's, every 500 ms.
	var refs []olmv1.ClusterObjectSetObject
	for _, s := range mine {
		for k := range s.Data {
			refs = append(refs, builders.Ref(s.Name, "", k))
		}
	}
	stop := make(chan struct{})
	touched := make(chan int)
	go func() {
		n := 0
		defer func() { touched <- n }()
		for len(refs) > 0 {
			c := r.revision(Op{Owner: 0, Rev: 1}, builders.WithPhase("configuration", refs...))
			c.Name = prefix + "-touch"
			if body, err := forgedReview(admissionv1.Create, c, nil, forger, false); err == nil {
				if _, err := sendForged(r.ctx(), hc, mgr, body); err == nil {
					n++
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	stopTouching := func() int {
		close(stop)
		return <-touched
	}
	deadline := fillEnd.Add(r.ledgerBound())
	if err := r.userCreatesWithin(op, deadline, fillEnd); err != nil {
		n := stopTouching()
		var v *violation
		if errors.As(err, &v) {
			v.msg += fmt.Sprintf(" (the forger filled the bound with %d Secrets and sent %d refs-only requests naming them since)", len(mine), n)
		}
		return err
	}
	n := stopTouching()
	// Every Secret of the forger's is swept within the same bound, however often it was named.
	var left string
	_ = wait.PollUntilContextTimeout(r.ctx(), pollInterval, time.Until(deadline)+time.Second, true, func(ctx context.Context) (bool, error) {
		left = ""
		for _, s := range mine {
			if err := r.admin.Get(ctx, client.ObjectKeyFromObject(&s), &corev1.Secret{}); !apierrors.IsNotFound(err) {
				left = s.Name
				return false, nil
			}
		}
		return true, nil
	})
	if left != "" {
		return violated("touch-kept", "Secret %s, written by a forged create and named since by %d forged refs-only requests, still existed %s after the forger's last write (bound %s)",
			left, n, time.Since(fillEnd).Round(time.Second), r.ledgerBound())
	}
	return nil
}

// forgedSecrets lists the object-data Secrets written for the forged creates named prefix-*.
func (r *runner) forgedSecrets(prefix string) ([]corev1.Secret, error) {
	list := &corev1.SecretList{}
	if err := r.admin.List(r.ctx(), list, client.InNamespace(testenv.SystemNamespace), client.HasLabels{olmv1.LabelRevisionName}); err != nil {
		return nil, err
	}
	var out []corev1.Secret
	for _, s := range list.Items {
		if s.Type == olmv1.SecretTypeObjectData && strings.HasPrefix(s.Labels[olmv1.LabelRevisionName], prefix+"-") {
			out = append(out, s)
		}
	}
	return out, nil
}

// userCreatesWithin: a user's inline create that needs a new Secret (Archived, so nothing rolls
// out; deleted once admitted), tried until one is admitted. A refusal for the unreferenced bound
// answered after deadline is refused-by-others: the Secrets that fill the bound are another caller's,
// written before since.
func (r *runner) userCreatesWithin(op Op, deadline, since time.Time) error {
	for i := 0; ; i++ {
		name := fmt.Sprintf("%s-fillprobe-%d-%d", r.m.run, op.Seed%100000, i)
		c := builders.COS(name, builders.WithRevision(1), builders.WithLifecycleState(olmv1.LifecycleStateArchived),
			builders.WithLabels(map[string]string{olmv1.LabelOwnerName: r.m.run + "-fillprobe"}),
			builders.WithAnnotations(map[string]string{"cos-externalizer.io/externalize": "always"}),
			builders.WithPhase("configuration", builders.Inline(builders.ConfigMap(r.m.cmNamespace(), "fillprobe", map[string]string{"v": name}))))
		err := r.admin.Create(r.ctx(), c)
		switch {
		case err == nil:
			r.logf("ledger-fill: a user's create was admitted %s after the forger's last write", time.Since(since).Round(100*time.Millisecond))
			return expect("deleting "+name, r.admin.Delete(r.ctx(), c), apierrors.IsNotFound)
		case apierrors.IsTooManyRequests(err) && strings.Contains(err.Error(), "max-unreferenced"):
			if time.Now().After(deadline) {
				return violated("refused-by-others", "a user's create was refused for the bound on unreferenced Secrets %s after a forged caller's last write (bound %s): %v",
					time.Since(since).Round(time.Second), deadline.Sub(since), err)
			}
		case r.faulty.Load() && isAvailability(err):
			if time.Now().After(deadline.Add(settleBound)) {
				return expect("a user's create beside a forger", err)
			}
		default:
			return expect("a user's create beside a forger", err)
		}
	}
}

// isAvailability: an answer that says the service was not there (availability).
func isAvailability(err error) bool {
	for _, s := range availability {
		if strings.Contains(err.Error(), s) {
			return true
		}
	}
	return false
}

// amplify: see opAmplify.
func (r *runner) amplify(op Op) error {
	mgr := r.env.mgr
	if mgr == nil {
		return nil
	}
	name := fmt.Sprintf("%s-amp-%d", r.m.run, op.Seed%100000)
	// The Secrets' owner: an empty ClusterObjectSet, so that nothing sweeps or counts them and no
	// owner of theirs is gone (the touch has nothing to drop).
	owner := builders.COS(name, builders.WithRevision(1), builders.WithLabels(map[string]string{olmv1.LabelOwnerName: r.m.run + "-amp"}))
	if err := expect("creating "+name, r.admin.Create(r.ctx(), owner)); err != nil {
		return err
	}
	defer func() { _ = r.admin.Delete(r.ctx(), owner) }()
	label := naming.RevisionLabelValue(name)
	secrets := make([]*corev1.Secret, ampSecrets)
	rng := rand.New(rand.NewPCG(op.Seed, 0xa3))
	for i := range secrets {
		value := make([]byte, ampSecretBytes)
		for j := 0; j+8 <= len(value); j += 8 {
			v := rng.Uint64()
			for k := range 8 {
				value[j+k] = byte(v >> (8 * k))
			}
		}
		secrets[i] = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testenv.SystemNamespace, Name: fmt.Sprintf("%s-%d", name, i),
			Labels: map[string]string{olmv1.LabelRevisionName: label},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: olmv1.GroupVersion.String(), Kind: olmv1.ClusterObjectSetKind,
				Name: owner.Name, UID: owner.UID}}},
			Immutable: ptr.To(true), Type: olmv1.SecretTypeObjectData, Data: map[string][]byte{"k": value}}
	}
	defer func() {
		for _, s := range secrets {
			_ = r.admin.Delete(r.ctx(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name}})
		}
	}()
	var wg sync.WaitGroup
	errs := make([]error, len(secrets))
	for i, s := range secrets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = expect("creating Secret "+s.Name, r.admin.Create(r.ctx(), s))
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	initial := map[string]string{}
	for _, s := range secrets {
		initial[s.Name] = s.ResourceVersion
	}
	// Every write of the Secrets while the requests run, from a watch begun after they were written.
	list, err := testenv.Env.Clientset.CoreV1().Secrets(testenv.SystemNamespace).List(r.ctx(), metav1.ListOptions{LabelSelector: olmv1.LabelRevisionName + "=" + label})
	if err != nil {
		return err
	}
	w, err := testenv.Env.Clientset.CoreV1().Secrets(testenv.SystemNamespace).Watch(r.ctx(), metav1.ListOptions{LabelSelector: olmv1.LabelRevisionName + "=" + label, ResourceVersion: list.ResourceVersion})
	if err != nil {
		return err
	}
	defer w.Stop()
	var wmu sync.Mutex
	writes, written := 0, 0
	seen := map[string]string{} // name: the last version the watch delivered
	go func() {
		for ev := range w.ResultChan() {
			s, ok := ev.Object.(*corev1.Secret)
			if !ok || ev.Type != watch.Modified {
				continue
			}
			wmu.Lock()
			writes++
			written += s.Size()
			seen[s.Name] = s.ResourceVersion
			wmu.Unlock()
		}
	}()
	var refs []olmv1.ClusterObjectSetObject
	for _, s := range secrets {
		refs = append(refs, builders.Ref(s.Name, "", "k"))
	}
	hc := forgerClient(mgr)
	answers := make([]string, ampRequests)
	began := time.Now()
	var size int
	for i := range ampRequests {
		c := r.revision(Op{Owner: 0, Rev: 1}, builders.WithPhase("configuration", refs...))
		c.Name = fmt.Sprintf("%s-req-%d", name, i)
		body, err := forgedReview(admissionv1.Create, c, nil, forger, i >= ampWrites)
		if err != nil {
			return err
		}
		size = len(body)
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := sendForged(r.ctx(), hc, mgr, body)
			switch {
			case err != nil:
				answers[i] = "failed"
			case a.allowed:
				answers[i] = "allowed"
			default:
				answers[i] = fmt.Sprintf("%d %s", a.code, trim(a.message))
			}
		}()
	}
	wg.Wait()
	took := time.Since(began)
	tally := map[string]int{}
	for _, a := range answers {
		tally[a]++
	}
	if len(tally) > 3 { // the messages differ: count by code
		tally = map[string]int{}
		for _, a := range answers {
			tally[strings.SplitN(a, " ", 2)[0]]++
		}
	}
	// Whatever they wrote has been written by the time they are answered: wait until the watch has
	// delivered each Secret's version as it is now.
	changed := 0
	for _, s := range secrets {
		cur := &corev1.Secret{}
		if err := r.admin.Get(r.ctx(), client.ObjectKeyFromObject(s), cur); err != nil {
			return err
		}
		if cur.ResourceVersion == initial[s.Name] {
			continue
		}
		changed++
		_ = wait.PollUntilContextTimeout(r.ctx(), pollInterval, 10*time.Second, true, func(context.Context) (bool, error) {
			wmu.Lock()
			defer wmu.Unlock()
			return seen[s.Name] == cur.ResourceVersion, nil
		})
	}
	wmu.Lock()
	nWrites, nBytes := writes, written
	wmu.Unlock()
	r.logf("amplify: %d forged refs-only requests of %d bytes (%d of them dry runs), each naming %d Secrets of %d KiB: answered in %s: %v; %d Secret writes (%d KiB), %d Secrets changed; the resident set peaked at %d MiB",
		ampRequests, size, ampRequests-ampWrites, ampSecrets, ampSecretBytes>>10, took.Round(100*time.Millisecond), tally, nWrites, nBytes>>10, changed, r.env.rssPeakBytes()>>20)
	if nWrites > 0 || changed > 0 {
		return violated("write-amplified", "%d forged refs-only requests of %d bytes each, naming %d Secrets of %d KiB whose owners all exist, made %d Secret writes (%d KiB to etcd, %d KiB per request; %d of the Secrets changed): the bound is one write per owner reference to a ClusterObjectSet that is gone, none here",
			ampWrites, size, ampSecrets, ampSecretBytes>>10, nWrites, nBytes>>10, nBytes/ampWrites>>10, changed)
	}
	if peak := r.env.rssPeakBytes(); peak > rssBound {
		return violated("rss", "the resident set of the process (the managers run in it) peaked at %d MiB, over the manager's limit of %d MiB, while %d forged refs-only requests each named %d Secrets of %d KiB",
			peak>>20, rssBound>>20, ampRequests, ampSecrets, ampSecretBytes>>10)
	}
	return nil
}

// caBound is how long the manager may take to notice a change of its client CA file: it polls every
// 10 s (server.DefaultClientCAPollInterval) and looks at every handshake; 20 s more for the round's
// load.
const caBound = 30 * time.Second

// clientCAGarbage: see opClientCAGarbage.
func (r *runner) clientCAGarbage(op Op) error {
	mgr, file := r.env.mgr, r.env.clientCA
	if mgr == nil || file == "" || mgr.ClientCert == nil {
		return nil // the manager does not authenticate its callers: no file to break
	}
	good, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	failures := func() (float64, float64, error) {
		text, err := testenv.ScrapeMetrics(r.ctx(), mgr.MetricsURL)
		if err != nil {
			return 0, 0, err
		}
		total, err := testenv.SumMetric(strings.NewReader(text), "cos_externalizer_webhook_client_ca_reload_failures_total")
		if err != nil {
			return 0, 0, err
		}
		failing, err := testenv.SumMetric(strings.NewReader(text), "cos_externalizer_webhook_client_ca_reload_failing")
		return total, failing, err
	}
	before, _, err := failures()
	if err != nil {
		return err
	}
	switch op.Variant {
	case "missing":
		err = os.Remove(file)
	case "empty":
		err = replaceFile(file, nil)
	case "truncated":
		err = replaceFile(file, good[:len(good)/2])
	default: // garbage
		junk := make([]byte, 512)
		rng := rand.New(rand.NewPCG(op.Seed, 0xca))
		for i := range junk {
			junk[i] = byte(rng.Uint32())
		}
		err = replaceFile(file, junk)
	}
	if err != nil {
		return err
	}
	mended := false
	mend := func() error {
		if mended {
			return nil
		}
		mended = true
		return replaceFile(file, good)
	}
	defer func() { _ = mend() }()
	// Broken: the last good bundle serves; the failure is counted.
	if err := r.servesWithBundle(mgr, "with its client CA file "+op.Variant); err != nil {
		return err
	}
	var total, failing float64
	if err := wait.PollUntilContextTimeout(r.ctx(), 200*time.Millisecond, caBound, true, func(ctx context.Context) (bool, error) {
		// A handshake makes the manager look at the file at once.
		_, _ = sendForged(ctx, forgerClient(mgr), mgr, []byte("{}"))
		t, f, err := failures()
		total, failing = t, f
		return err == nil && t > before && f == 1, nil
	}); err != nil {
		return violated("ca-reload-silent", "the client CA file was made %s %s ago: the reload failures counted went from %v to %v, failing is %v (want a failure counted and failing 1)",
			op.Variant, caBound, before, total, failing)
	}
	if err := mend(); err != nil {
		return err
	}
	if err := wait.PollUntilContextTimeout(r.ctx(), 200*time.Millisecond, caBound, true, func(ctx context.Context) (bool, error) {
		_, _ = sendForged(ctx, forgerClient(mgr), mgr, []byte("{}"))
		_, f, err := failures()
		failing = f
		return err == nil && f == 0, nil
	}); err != nil {
		return violated("ca-reload-stuck", "the client CA file was mended %s ago: failing is still %v", caBound, failing)
	}
	if err := r.servesWithBundle(mgr, "once its client CA file was mended"); err != nil {
		return err
	}
	r.logf("client-ca-garbage %s: served with the last good bundle, the failure counted (%v in all), mended and served", op.Variant, total)
	if mgr.Exited() {
		return violated("crashed", "the manager exited while its client CA file was %s and mended", op.Variant)
	}
	return nil
}

// servesWithBundle: the manager (when) answers a caller with the API server's client certificate on a
// new connection, refuses one without a certificate at the handshake, and the API server's calls to
// it succeed (a dry-run inline create, which the fail-closed externalize webhook must answer),
// within caBound (a nemesis of the round may hold the API server for a moment).
func (r *runner) servesWithBundle(mgr *testenv.Manager, when string) error {
	probe := r.revision(Op{Owner: 0, Rev: 1}, builders.WithPhase("configuration", builders.Inline(builders.ConfigMap(r.m.cmNamespace(), "ca-probe", map[string]string{"v": "1"}))))
	probe.Name = r.m.run + "-ca-probe"
	body, err := forgedReview(admissionv1.Create, probe.DeepCopy(), nil, forger, true)
	if err != nil {
		return err
	}
	a, err := sendForged(r.ctx(), forgerClient(mgr), mgr, body)
	if err != nil || a.code != http.StatusOK {
		if mgr.Exited() {
			return violated("crashed", "the manager exited %s", when)
		}
		return violated("ca-reload-refused", "the manager %s did not serve a caller with the API server's client certificate on a new connection: %v %+v", when, err, a)
	}
	if _, err := webhookClient().Post(mgr.WebhookURL+mutatePath, "application/json", bytes.NewReader(body)); err == nil {
		return violated("ca-reload-open", "the manager %s served a caller without a client certificate", when)
	}
	var last error
	if err := wait.PollUntilContextTimeout(r.ctx(), 200*time.Millisecond, caBound, true, func(ctx context.Context) (bool, error) {
		last = r.admin.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		return last == nil, nil
	}); err != nil {
		return violated("ca-reload-refused", "the API server's calls to the manager %s failed for %s: %v", when, caBound, last)
	}
	return nil
}

// replaceFile writes data to a new file beside path and renames it over path, as the kubelet swaps a
// projected ConfigMap's file.
func replaceFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".swap-")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
