package webhook

import (
	"context"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cos-externalizer/cos-externalizer/internal/validation"
)

// The webhooks validate with the bounds of the CRD the cluster serves, read by name only:
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,resourceNames=clusterobjectsets.olm.operatorframework.io,verbs=get

// CRDName is the name of the ClusterObjectSet CRD.
const CRDName = "clusterobjectsets.olm.operatorframework.io"

// defaultLimitsTTL is how long the served CRD's bounds are used before the CRD is read again.
const defaultLimitsTTL = 10 * time.Second

// ServedLimits gives the numeric bounds of the ClusterObjectSet CRD as the cluster serves it
// (validation.Limits), so that the webhooks refuse exactly what the API server would: a cluster may
// lower, for example, spec.progressDeadlineMinutes' minimum in its CRD. The CRD is read uncached at
// most once per TTL; when it cannot be read, the generated CRD's bounds apply.
type ServedLimits struct {
	Reader client.Reader
	// TTL is how long a reading is used; 0 means 10 seconds.
	TTL time.Duration

	mu     sync.Mutex
	read   time.Time
	rv     string
	limits validation.Limits
}

// Get returns the bounds to validate with.
func (s *ServedLimits) Get(ctx context.Context) validation.Limits {
	if s == nil || s.Reader == nil {
		return validation.Limits{}
	}
	ttl := s.TTL
	if ttl == 0 {
		ttl = defaultLimitsTTL
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.read.IsZero() && time.Since(s.read) < ttl {
		return s.limits
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := s.Reader.Get(ctx, client.ObjectKey{Name: CRDName}, crd); err != nil {
		ctrl.LoggerFrom(ctx).Info("cannot read the served ClusterObjectSet CRD; validating with the generated bounds", "error", err.Error())
		return validation.Limits{}
	}
	s.read = time.Now()
	if crd.ResourceVersion != s.rv {
		s.rv, s.limits = crd.ResourceVersion, validation.LimitsFromCRD(crd)
		if s.limits.Differs() {
			ctrl.LoggerFrom(ctx).Info("the served ClusterObjectSet CRD changes bounds of the generated one; validating with the served bounds", "resourceVersion", crd.ResourceVersion)
		}
	}
	return s.limits
}
