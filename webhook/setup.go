// Package webhook serves the admission webhooks of cos-externalizer: the mutating webhook that moves
// the inline objects of ClusterObjectSets into immutable, content-addressed Secrets, the validating
// webhook that checks the final object, and the guard that keeps referenced Secrets from being
// deleted. The decisions are pure functions of webhook/admission (the pipeline and its steps: the
// policy, decoding, planning, comparing), webhook/admission/validation, webhook/admission/inflight
// (the requests served at once), internal/secretdata and internal/content; this
// package reads, calls them and writes. The HTTP server the handlers are served on is package
// webhook/server, the bound on unreferenced Secrets package webhook/unreferenced.
package webhook

import (
	"context"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/kube/objectdata"
	cosadmission "github.com/cos-externalizer/cos-externalizer/webhook/admission"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission/inflight"
	"github.com/cos-externalizer/cos-externalizer/webhook/server"
	"github.com/cos-externalizer/cos-externalizer/webhook/unreferenced"
)

// Paths the webhooks are served on.
const (
	MutatePath      = "/mutate-olm-operatorframework-io-v1-clusterobjectset"
	ValidatePath    = "/validate-olm-operatorframework-io-v1-clusterobjectset"
	SecretGuardPath = "/validate-v1-secret-object-data"
)

// defaultConcurrent is Options.WriteConcurrency when it is not set.
const defaultConcurrent = objectdata.DefaultConcurrency

// Options configure the webhooks.
type Options struct {
	// SystemNamespace holds the object-data Secrets.
	SystemNamespace string
	// Mode and Threshold are the externalization policy.
	Mode      cosadmission.Mode
	Threshold int
	// MaxStoredBytes is the largest stored ClusterObjectSet the validating webhook lets through.
	MaxStoredBytes int
	// WriteConcurrency bounds the Secrets written at once.
	WriteConcurrency int
	// ExemptUsers may delete, or change the label and owners of, referenced object-data Secrets (by
	// default the namespace controller; Setup adds the manager itself).
	ExemptUsers []string
	// WebhookConfiguration names the ValidatingWebhookConfiguration holding the secret guard, whose
	// matchCondition ExemptConditionName is checked at start against ExemptUsers; empty: no check.
	WebhookConfiguration string
	// MaxResolvedBytes bounds the resolved content of the refs of one ClusterObjectSet that an update
	// is compared with (--max-resolved-bytes); every request draws it from InFlight's pool.
	MaxResolvedBytes int64
	// InFlight bounds the memory and work of the requests served at once.
	InFlight inflight.Control
	// Drain, once started, makes every response close its connection (the replica is stopping); nil:
	// never.
	Drain *server.Drain
	// Unreferenced bounds the Secrets the mutating webhook wrote that nothing references yet
	// (package unreferenced); nil: none.
	Unreferenced *unreferenced.Bound
	// BeforeAdmitDelete, when set (tests), is called by the Secret guard once it has decided to admit
	// a DELETE of an object-data Secret (no live ClusterObjectSet uses it) and has written its
	// quarantine copy, before it answers: the delete has not happened yet, and nothing created now
	// was seen by the guard's live read (the adversarial op collector-race creates one there). nil
	// in production.
	BeforeAdmitDelete func(ctx context.Context, secret types.NamespacedName)
}

// +kubebuilder:rbac:groups=authentication.k8s.io,resources=selfsubjectreviews,verbs=create

// Setup registers the three webhooks on the manager's webhook server. The manager's own identity is
// added to opts.ExemptUsers, so its orphan sweep may delete Secrets.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options, metrics *Metrics) error {
	if opts.WriteConcurrency == 0 {
		opts.WriteConcurrency = defaultConcurrent
	}
	if opts.MaxStoredBytes == 0 {
		opts.MaxStoredBytes = DefaultMaxStoredBytes
	}
	self, err := whoAmI(ctx, mgr)
	if err != nil {
		return err
	}
	if opts.WebhookConfiguration != "" {
		if err := mgr.Add(&exemptionCheck{reader: mgr.GetAPIReader(), name: opts.WebhookConfiguration, users: opts.ExemptUsers, mismatch: metrics.ExemptionMismatch}); err != nil {
			return err
		}
	}
	opts.ExemptUsers = append(opts.ExemptUsers, self)
	ctrl.LoggerFrom(ctx).Info("secret guard exempts", "users", opts.ExemptUsers)

	if opts.Unreferenced != nil {
		if err := opts.Unreferenced.Watch(ctx, mgr.GetCache(), opts.SystemNamespace,
			unreferenced.Gauges{Secrets: metrics.UnreferencedSecrets, Bytes: metrics.UnreferencedBytes}); err != nil {
			return err
		}
	}
	hooks := mgr.GetWebhookServer()
	bounds := &ServedBounds{Reader: mgr.GetAPIReader()}
	// ctx ends when the manager stops: a request's context that ends before it is a caller gone.
	// Each call's deadline, from its timeout parameter, counted on the clock the work admitted is.
	clk := opts.InFlight.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	serve := func(h http.Handler) http.Handler { return server.Hook(ctx, clk, opts.Drain, h) }
	hooks.Register(MutatePath, serve(&webhook.Admission{Handler: server.Finishing(&Externalizer{
		// Secrets read uncached, written at most WriteConcurrency at once.
		Store: &objectdata.Writer{
			Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Namespace: opts.SystemNamespace, Concurrency: max(opts.WriteConcurrency, 1),
		},
		Options: opts, Metrics: metrics, Bounds: bounds,
	})}))
	validate := admission.WithValidator[*olmv1.ClusterObjectSet](mgr.GetScheme(), &Validator{Options: opts, Metrics: metrics, Bounds: bounds})
	validate.Handler = server.Finishing(opts.charging(metrics, validate.Handler))
	hooks.Register(ValidatePath, serve(validate))
	hooks.Register(SecretGuardPath, serve(&webhook.Admission{Handler: server.Finishing(&SecretGuard{
		Cache: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Client: mgr.GetClient(), Options: opts, Metrics: metrics,
	})}))
	return nil
}

// admit charges a request to the in-flight bounds, by its call's deadline (server.CallDeadline; a
// request that did not come through the server, a test's, gets server.DefaultCallTimeout from now).
func (o Options) admit(ctx context.Context, metrics *Metrics, object, oldObject []byte) (*inflight.Charge, *cosadmission.Refusal) {
	callDeadline, ok := server.CallDeadline(ctx)
	if !ok {
		callDeadline = o.InFlight.Now().Add(server.DefaultCallTimeout)
	}
	var g inflight.Gauges
	if metrics != nil {
		g = inflight.Gauges{Rate: metrics.WorkRate, Backlog: metrics.WorkBacklog}
	}
	return o.InFlight.Admit(ctx, callDeadline, o.MaxResolvedBytes, g, object, oldObject)
}

// whoAmI asks the API server for the manager's user name.
func whoAmI(ctx context.Context, mgr ctrl.Manager) (string, error) {
	c, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return "", err
	}
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		return "", fmt.Errorf("asking the API server who the manager is (SelfSubjectReview): %w", err)
	}
	return review.Status.UserInfo.Username, nil
}

// exemptionCheck compares, once at start, the served secret guard's matchCondition ExemptConditionName
// with --secret-guard-exempt-users: the users the flag exempts must never reach the guard, because a
// guard that no manager answers (all replicas gone) fails closed. A difference is logged with the
// expression to set and counted (cos_externalizer_secret_guard_exemption_mismatch); the handler still
// exempts the flag's users whenever it is called.
type exemptionCheck struct {
	reader client.Reader
	name   string
	users  []string
	// mismatch is set to 1 on a difference, 0 without.
	mismatch prometheus.Gauge
}

// NeedLeaderElection: every replica checks.
func (c *exemptionCheck) NeedLeaderElection() bool { return false }

func (c *exemptionCheck) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("secret-guard")
	wc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.reader.Get(ctx, client.ObjectKey{Name: c.name}, wc); err != nil {
		log.Info("could not check the secret guard's exemption matchCondition", "webhookConfiguration", c.name, "error", err.Error())
		return nil
	}
	want := ExemptCondition(c.users)
	got, found := exemptConditionOf(wc)
	if found && got == want {
		c.mismatch.Set(0)
		return nil
	}
	c.mismatch.Set(1)
	log.Error(nil, "the secret guard's matchCondition does not exempt exactly --secret-guard-exempt-users: their requests reach the guard, which fails closed while no manager answers (deleting the system namespace would wedge); set it in the webhook configuration",
		"webhookConfiguration", c.name, "matchCondition", ExemptConditionName, "expression", want, "served", got)
	return nil
}

// exemptConditionOf returns the expression of the secret guard's ExemptConditionName matchCondition.
func exemptConditionOf(wc *admissionregistrationv1.ValidatingWebhookConfiguration) (string, bool) {
	for _, w := range wc.Webhooks {
		if w.Name != SecretGuardName {
			continue
		}
		for _, mc := range w.MatchConditions {
			if mc.Name == ExemptConditionName {
				return mc.Expression, true
			}
		}
	}
	return "", false
}
