package servingcert

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The rules the sources need. The webhook configurations are read (and, in the self-signed mode,
// patched; see config/rbac/ca-injector) by name only.
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,resourceNames=cos-externalizer,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=olmv1-system,resources=secrets,verbs=get;list;watch;create;patch

// env is what the sources read and write through, and log to; Server.Setup fills it from the
// manager.
type env struct {
	log logr.Logger
	// cache holds the Secret and the webhook configurations, by name.
	cache cache.Cache
	// cached reads the cache (the replicas' reads); api reads the API server (the leader's).
	cached, api client.Reader
	cl          client.Client
	rec         events.EventRecorder
}

// watchAll wakes ch on changes of the Secret and, when webhookConfiguration is set, of the webhook
// configurations, and waits for the cache.
func (e *env) watchAll(ctx context.Context, ch chan struct{}, webhookConfiguration string) error {
	objs := []client.Object{&corev1.Secret{}}
	if webhookConfiguration != "" {
		objs = append(objs, &admissionregistrationv1.MutatingWebhookConfiguration{}, &admissionregistrationv1.ValidatingWebhookConfiguration{})
	}
	for _, o := range objs {
		if err := e.watch(ctx, o, ch); err != nil {
			return fmt.Errorf("watching %T: %w", o, err)
		}
	}
	if !e.cache.WaitForCacheSync(ctx) {
		return ctx.Err()
	}
	return nil
}

// watch wakes ch on every change of the cache's objects of obj's kind.
func (e *env) watch(ctx context.Context, obj client.Object, ch chan struct{}) error {
	inf, err := e.cache.GetInformer(ctx, obj)
	if err != nil {
		return err
	}
	wake := func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { wake() },
		UpdateFunc: func(any, any) { wake() },
		DeleteFunc: func(any) { wake() },
	})
	return err
}

// cachedSecret reads the Secret key through the cache; nil when there is none yet.
func (e *env) cachedSecret(ctx context.Context, key types.NamespacedName) (*corev1.Secret, error) {
	var sec corev1.Secret
	if err := e.cached.Get(ctx, key, &sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return &sec, nil
}

type webhookBundle struct {
	kind, webhook string
	caBundle      []byte
}

// readBundles lists the caBundle of every webhook of the two configurations named name, read
// through r.
func readBundles(ctx context.Context, r client.Reader, name string) ([]webhookBundle, error) {
	var out []webhookBundle
	for _, wc := range configurations() {
		if err := r.Get(ctx, types.NamespacedName{Name: name}, wc.obj); err != nil {
			return nil, fmt.Errorf("reading %s %s: %w", wc.kind, name, err)
		}
		for _, h := range wc.webhooks() {
			out = append(out, webhookBundle{wc.kind, h.name, h.config.CABundle})
		}
	}
	return out, nil
}

// configuration is one of the two webhook configurations, empty until read into obj.
type configuration struct {
	kind string
	obj  client.Object
	// webhooks are obj's webhooks, pointing into obj.
	webhooks func() []webhookConfig
}

type webhookConfig struct {
	name   string
	config *admissionregistrationv1.WebhookClientConfig
}

// configurations are the mutating and the validating configuration, to be read.
func configurations() []configuration {
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	return []configuration{
		{"MutatingWebhookConfiguration", mwc, func() (out []webhookConfig) {
			for i := range mwc.Webhooks {
				out = append(out, webhookConfig{mwc.Webhooks[i].Name, &mwc.Webhooks[i].ClientConfig})
			}
			return out
		}},
		{"ValidatingWebhookConfiguration", vwc, func() (out []webhookConfig) {
			for i := range vwc.Webhooks {
				out = append(out, webhookConfig{vwc.Webhooks[i].Name, &vwc.Webhooks[i].ClientConfig})
			}
			return out
		}},
	}
}
