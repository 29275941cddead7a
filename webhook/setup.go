package webhook

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

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
	opts.ExemptUsers = append(opts.ExemptUsers, self)
	ctrl.LoggerFrom(ctx).Info("secret guard exempts", "users", opts.ExemptUsers)

	server := mgr.GetWebhookServer()
	limits := &ServedLimits{Reader: mgr.GetAPIReader()}
	server.Register(MutatePath, &webhook.Admission{Handler: &Externalizer{
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Options: opts, Metrics: metrics, Limits: limits,
	}})
	server.Register(ValidatePath, admission.WithValidator[*olmv1.ClusterObjectSet](mgr.GetScheme(), &Validator{Options: opts, Metrics: metrics, Limits: limits}))
	server.Register(SecretGuardPath, &webhook.Admission{Handler: &SecretGuard{
		Cache: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Options: opts, Metrics: metrics,
	}})
	return nil
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
