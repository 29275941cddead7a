package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// The Secret guard. Its object selector limits it to Secrets carrying the revision-name label, so no
// other Secret in the cluster ever waits on this webhook.
// +kubebuilder:webhook:path=/validate-v1-secret-object-data,mutating=false,failurePolicy=fail,sideEffects=None,groups="",resources=secrets,verbs=delete,versions=v1,name=secret-guard.cos-externalizer.io,admissionReviewVersions=v1,timeoutSeconds=10,patch=`{"objectSelector":{"matchExpressions":[{"key":"olm.operatorframework.io/revision-name","operator":"Exists"}]}}`

// GarbageCollectorUser is the identity of kube-controller-manager's garbage collector.
const GarbageCollectorUser = "system:serviceaccount:kube-system:generic-garbage-collector"

// SecretGuard refuses to delete an object-data Secret that a live ClusterObjectSet references.
type SecretGuard struct {
	// Reader lists ClusterObjectSets (the manager's cache).
	Reader  client.Reader
	Options Options
	Metrics *Metrics
}

// Handle answers a DELETE of a labelled Secret.
func (g *SecretGuard) Handle(ctx context.Context, req admission.Request) admission.Response {
	defer func(start time.Time) {
		g.Metrics.Latency.WithLabelValues("secret-guard", string(req.Operation)).Observe(time.Since(start).Seconds())
	}(time.Now())
	if req.Operation != admissionv1.Delete || slices.Contains(g.Options.ExemptUsers, req.UserInfo.Username) {
		return admission.Allowed("")
	}
	// Only the type is read; data is never decoded into anything that is logged.
	var meta struct {
		Type corev1.SecretType `json:"type"`
	}
	if err := json.Unmarshal(req.OldObject.Raw, &meta); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the Secret: %w", err))
	}
	if meta.Type != olmv1.SecretTypeObjectData {
		return admission.Allowed("")
	}
	list := &olmv1.ClusterObjectSetList{}
	if err := g.Reader.List(ctx, list); err != nil {
		return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf("listing ClusterObjectSets: %w", err))
	}
	for _, c := range list.Items {
		if c.DeletionTimestamp != nil {
			continue
		}
		if path, ok := references(&c, req.Namespace, req.Name, g.Options.SystemNamespace); ok {
			g.Metrics.Refusals.WithLabelValues(RefusalSecretInUse).Inc()
			ctrl.LoggerFrom(ctx).Info("refused to delete a referenced Secret", "secret", req.Namespace+"/"+req.Name,
				"clusterObjectSet", c.Name, "user", req.UserInfo.Username)
			return admission.Denied(fmt.Sprintf(
				"secret %s/%s holds objects of ClusterObjectSet %s (%s) and is deleted with it; delete the ClusterObjectSet instead",
				req.Namespace, req.Name, c.Name, path))
		}
	}
	return admission.Allowed("")
}

// references reports whether c has a ref to the Secret, and the field path of the first one.
func references(c *olmv1.ClusterObjectSet, namespace, name, systemNamespace string) (string, bool) {
	for i, p := range c.Spec.Phases {
		for j, o := range p.Objects {
			if o.Object.Object == nil && o.Ref.Name == name && o.Ref.NamespaceOr(systemNamespace) == namespace {
				return fmt.Sprintf("spec.phases[%d].objects[%d].ref", i, j), true
			}
		}
	}
	return "", false
}
