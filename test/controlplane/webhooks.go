package controlplane

import (
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cos-externalizer/cos-externalizer/internal/manifests"
)

// WebhookManifests returns the repository's generated webhook configurations file.
func WebhookManifests() (string, error) {
	return repoPath("config", "webhook", "manifests.yaml")
}

// InstallWebhooks creates or replaces the webhook configurations of the manifests file, pointing each
// webhook at baseURL plus its service path (the API server reaches a local manager only by URL: there
// is no Service routing on the local control plane) and trusting caPEM.
func InstallWebhooks(ctx context.Context, cfg *rest.Config, manifestsFile, baseURL string, caPEM []byte) error {
	objs, c, err := webhookManifests(cfg, manifestsFile)
	if err != nil {
		return err
	}
	for _, o := range objs {
		var obj client.Object
		var configs []*admissionregistrationv1.WebhookClientConfig
		switch o.GetKind() {
		case "MutatingWebhookConfiguration":
			wc := &admissionregistrationv1.MutatingWebhookConfiguration{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, wc); err != nil {
				return err
			}
			for i := range wc.Webhooks {
				configs = append(configs, &wc.Webhooks[i].ClientConfig)
			}
			obj = wc
		case "ValidatingWebhookConfiguration":
			wc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, wc); err != nil {
				return err
			}
			for i := range wc.Webhooks {
				configs = append(configs, &wc.Webhooks[i].ClientConfig)
			}
			obj = wc
		default:
			continue
		}
		for _, cc := range configs {
			if cc.Service == nil || cc.Service.Path == nil {
				return fmt.Errorf("webhook without a service path in %s", manifestsFile)
			}
			url := baseURL + *cc.Service.Path
			cc.Service, cc.URL, cc.CABundle = nil, &url, caPEM
		}
		if err := c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			return err
		}
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("installing %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}

// UninstallWebhooks deletes the webhook configurations of the manifests file.
func UninstallWebhooks(ctx context.Context, cfg *rest.Config, manifestsFile string) error {
	objs, c, err := webhookManifests(cfg, manifestsFile)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := c.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// webhookManifests reads the webhook configurations and makes a client to write them.
func webhookManifests(cfg *rest.Config, manifestsFile string) ([]*unstructured.Unstructured, client.Client, error) {
	objs, err := manifests.ReadFile(manifestsFile)
	if err != nil {
		return nil, nil, err
	}
	c, err := client.New(cfg, client.Options{})
	return objs, c, err
}

// EnsureNamespace creates a namespace if it does not exist.
func EnsureNamespace(ctx context.Context, cfg *rest.Config, name string) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
