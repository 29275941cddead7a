package adversarial_test

// refs-fail-race: the sweep race of sweep-race, with the refs-only create made by a user (not OLM)
// whose call to the check-refs webhook fails: the port closed, the connection dropped, or no answer
// until the API server's 5-second timeout. The webhook's failurePolicy is Ignore, so the create is
// admitted untouched; it lands before the sweep's delete or after it. Content safety must not rest on
// that call (issue 35): the sweep's quarantine copy and restore keep the content.

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cos-externalizer/cos-externalizer/certs"
	"github.com/cos-externalizer/cos-externalizer/controllers"
	"github.com/cos-externalizer/cos-externalizer/internal/kube/scheme"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// opRefsFailRace: revision From is deleted with orphan propagation; when the sweep is about to
// delete its Secrets, revision Rev is created with From's stored refs by a user whose check-refs
// call fails (Variant): unreachable-before (the webhook's URL is a closed port; the create is stored
// before the hook returns), unreachable-after (the call is held until the sweep has deleted a
// Secret, then its connection is dropped), timeout-before and timeout-after (the call is never
// answered: the API server gives up after the webhook's timeout; before: the hook waits for the
// create's answer, after: it returns once the call has arrived). Rev must keep its content.
const opRefsFailRace = "refs-fail-race"

// checkRefsWebhook is the check-refs webhook's name in the mutating webhook configuration.
const checkRefsWebhook = "check-refs.cos-externalizer.io"

// stepTrap is armed by a refs-fail-race op: the first time the sweep has taken step for one of its
// Secrets (keys), spring runs in the sweep's goroutine; then the sweep goes on.
type stepTrap struct {
	keys   map[types.NamespacedName]bool
	step   string
	spring func()
}

func (h *harness) armStep(t *stepTrap) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.steps == nil {
		h.steps = map[*stepTrap]bool{}
	}
	h.steps[t] = true
}

func (h *harness) disarmStep(t *stepTrap) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.steps, t)
}

// springSteps runs the step traps armed for step of key, once each.
func (h *harness) springSteps(step string, key types.NamespacedName) {
	h.mu.Lock()
	var due []*stepTrap
	for t := range h.steps {
		if t.step == step && t.keys[key] {
			due = append(due, t)
			delete(h.steps, t)
		}
	}
	h.mu.Unlock()
	for _, t := range due {
		t.spring()
	}
}

// checkRefsDouble stands in for the check-refs webhook while a refs-fail-race op runs: a TLS server
// that answers every call at once (allowed, no warning, nothing written), except the calls for the
// ClusterObjectSet target, which it holds: until released, then drops the connection without an
// answer (hang false), or never answers (hang true: the API server times out).
type checkRefsDouble struct {
	srv     *httptest.Server
	ca      []byte
	target  string
	hang    bool
	seen    chan struct{}
	release chan struct{}
	once    sync.Once
	relOnce sync.Once
}

func newCheckRefsDouble(target string, hang bool) (*checkRefsDouble, error) {
	bundle, err := certs.Generate([]string{"127.0.0.1"}, time.Hour, time.Now())
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(bundle.Cert, bundle.Key)
	if err != nil {
		return nil, err
	}
	d := &checkRefsDouble{ca: bundle.CA, target: target, hang: hang, seen: make(chan struct{}), release: make(chan struct{})}
	d.srv = httptest.NewUnstartedServer(http.HandlerFunc(d.serve))
	d.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	d.srv.StartTLS()
	return d, nil
}

func (d *checkRefsDouble) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 4<<20))
	review := admissionv1.AdmissionReview{}
	if err != nil || json.Unmarshal(body, &review) != nil || review.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	if review.Request.Name != d.target {
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		review.Request = nil
		_ = json.NewEncoder(w).Encode(review)
		return
	}
	d.once.Do(func() { close(d.seen) })
	if d.hang {
		<-req.Context().Done() // the API server gave up
		return
	}
	select {
	case <-d.release:
	case <-req.Context().Done():
		return
	}
	// Dropped without an answer, as a replica that went away mid-call.
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

func (d *checkRefsDouble) releaseTarget() { d.relOnce.Do(func() { close(d.release) }) }

func (d *checkRefsDouble) close() {
	d.releaseTarget()
	d.srv.CloseClientConnections()
	d.srv.Close()
}

// pointCheckRefs sets the client configuration of the check-refs webhook to cc and returns the one it
// had.
func (r *runner) pointCheckRefs(ctx context.Context, cc admissionregistrationv1.WebhookClientConfig) (admissionregistrationv1.WebhookClientConfig, error) {
	var was admissionregistrationv1.WebhookClientConfig
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		list := &admissionregistrationv1.MutatingWebhookConfigurationList{}
		if err := r.admin.List(ctx, list); err != nil {
			return err
		}
		for i := range list.Items {
			wc := &list.Items[i]
			for j := range wc.Webhooks {
				if wc.Webhooks[j].Name == checkRefsWebhook {
					was = *wc.Webhooks[j].ClientConfig.DeepCopy()
					wc.Webhooks[j].ClientConfig = cc
					return r.admin.Update(ctx, wc)
				}
			}
		}
		return fmt.Errorf("no mutating webhook %s", checkRefsWebhook)
	})
	return was, err
}

// checkRefsAnswers reports whether the API server's check-refs calls reach the manager: a dry-run
// refs-only create naming a Secret that does not exist gets the manager's warning about it.
func (r *runner) checkRefsAnswers(ctx context.Context) (bool, error) {
	if r.warned == nil {
		cfg := rest.CopyConfig(testenv.Env.Config)
		r.warnings = &testenv.Warnings{}
		cfg.WarningHandler = r.warnings
		c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
		if err != nil {
			return false, err
		}
		r.warned = c
	}
	probe := r.revision(Op{Owner: 0, Rev: 1}, builders.WithPhase("configuration", builders.Ref(r.m.run+"-absent-probe", "", "k")))
	probe.Name = r.m.run + "-check-refs-probe"
	before := len(r.warnings.List())
	if err := r.warned.Create(ctx, probe, client.DryRunAll); err != nil {
		return false, err
	}
	for _, w := range r.warnings.List()[before:] {
		if strings.Contains(w, "does not exist") {
			return true, nil
		}
	}
	return false, nil
}

// waitCheckRefs waits until the API server's check-refs calls reach the manager (answers) or no
// longer do: a webhook configuration's change reaches the API server through its watch.
func (r *runner) waitCheckRefs(answers bool) error {
	var last error
	err := wait.PollUntilContextTimeout(r.ctx(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := r.checkRefsAnswers(ctx)
		last = err
		return err == nil && got == answers, nil
	})
	if err != nil {
		return fmt.Errorf("waiting until the check-refs webhook answers=%v (last probe: %v): %w", answers, last, err)
	}
	return nil
}

// refsFailRace: see opRefsFailRace.
func (r *runner) refsFailRace(op Op) error {
	rc, err := r.prepareRace(op)
	if rc == nil {
		return err
	}
	after := strings.HasSuffix(op.Variant, "-after")
	var cc admissionregistrationv1.WebhookClientConfig
	var double *checkRefsDouble
	if op.Variant == "unreachable-before" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		closed := "https://" + ln.Addr().String() + "/check-refs"
		_ = ln.Close() // nothing listens there any more
		cc = admissionregistrationv1.WebhookClientConfig{URL: &closed}
	} else {
		if double, err = newCheckRefsDouble(rc.name, strings.HasPrefix(op.Variant, "timeout-")); err != nil {
			return err
		}
		defer double.close()
		cc = admissionregistrationv1.WebhookClientConfig{URL: ptr.To(double.srv.URL + "/check-refs"), CABundle: double.ca}
	}
	was, err := r.pointCheckRefs(r.ctx(), cc)
	if err != nil {
		return err
	}
	defer func() {
		if double != nil {
			double.releaseTarget()
		}
		if _, err := r.pointCheckRefs(r.ctx(), was); err != nil {
			r.logf("refs-fail-race: putting the check-refs webhook back: %v", err)
			return
		}
		if err := r.waitCheckRefs(true); err != nil {
			r.logf("refs-fail-race: %v", err)
		}
	}()
	if err := r.waitCheckRefs(false); err != nil {
		return err
	}
	what := "creating " + rc.name + " with the stored refs of " + rc.from + " while the sweep is about to delete them, its check-refs call failing (" + op.Variant + ")"
	var judged []corev1.Secret
	var created error
	answered := make(chan struct{})
	create := func() {
		defer close(answered)
		created = expect(what, r.admin.Create(r.ctx(), rc.next.DeepCopy()))
		if created == nil {
			r.rememberRace(rc)
		}
	}
	trap := &sweepTrap{keys: rc.keys, fired: make(chan struct{}), spring: func(secrets []corev1.Secret) {
		judged = secrets
		if !after {
			create() // stored (or refused) before the sweep deletes anything
			return
		}
		go create()
		// The hook returns once the API server is calling check-refs for the create (or the create
		// has been answered already): the create is in flight across the sweep's delete.
		select {
		case <-double.seen:
		case <-answered:
		case <-time.After(30 * time.Second):
		}
	}}
	var deletedFirst atomic.Bool
	step := &stepTrap{keys: rc.keys, step: controllers.StepDeleted, spring: func() {
		select {
		case <-answered:
		default:
			deletedFirst.Store(true)
		}
		if double != nil && !double.hang {
			double.releaseTarget() // the held call's connection is dropped now, after a delete
		}
	}}
	r.env.arm(trap)
	defer r.env.disarm(trap)
	if after {
		r.env.armStep(step)
		defer r.env.disarmStep(step)
	}
	if fired, err := r.startRace(rc, trap, "refs-fail-race", metav1.DeletePropagationOrphan); !fired || err != nil {
		return err
	}
	select {
	case <-answered:
	case <-time.After(deleteBound):
		return violated("unexpected-answer", "%s: no answer within %s", what, deleteBound)
	}
	if created != nil {
		return created
	}
	order := "before the sweep's delete"
	if after && deletedFirst.Load() {
		order = "after the sweep had deleted a Secret of it"
	} else if after {
		order = "before the sweep's delete (the API server's timeout came first)"
	}
	r.logf("refs-fail-race %s: the sweep was about to delete %d Secrets of %s; %s, created untouched, was stored %s", op.Variant, len(judged), rc.from, rc.name, order)
	r.waitDeleteAnswered(judged)
	return r.checkRestored(rc.name, rc.target, rc.keys, 30*time.Second, "swept and not restored by the sweep")
}
