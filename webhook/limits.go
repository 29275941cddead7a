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
// lower, for example, spec.progressDeadlineMinutes' minimum in its CRD. The CRD is read uncached: the
// first request waits for the reading; later ones use the last reading and, once it is older than the
// TTL, start a new one in the background, so no admission request waits for it again. When the CRD
// cannot be read, the generated CRD's bounds apply.
type ServedLimits struct {
	Reader client.Reader
	// TTL is how long a reading is used before the next is started; 0 means 10 seconds.
	TTL time.Duration

	mu       sync.Mutex
	read     time.Time
	loaded   bool
	inFlight bool
	rv       string
	limits   validation.Limits
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
	if !s.loaded {
		s.mu.Unlock()
		s.refresh(ctx)
		s.mu.Lock()
	} else if time.Since(s.read) >= ttl && !s.inFlight {
		s.inFlight = true
		log := ctrl.LoggerFrom(ctx)
		go func() {
			rctx, cancel := context.WithTimeout(ctrl.LoggerInto(context.Background(), log), 10*time.Second)
			defer cancel()
			s.refresh(rctx)
		}()
	}
	defer s.mu.Unlock()
	return s.limits
}

// refresh reads the CRD and updates the bounds.
func (s *ServedLimits) refresh(ctx context.Context) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	err := s.Reader.Get(ctx, client.ObjectKey{Name: CRDName}, crd)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inFlight = false
	if err != nil {
		// Keep the last reading; until there is one, the generated bounds.
		ctrl.LoggerFrom(ctx).Info("cannot read the served ClusterObjectSet CRD; validating with the last bounds read, or the generated ones", "error", err.Error())
		s.loaded, s.read = true, time.Now()
		return
	}
	s.loaded, s.read = true, time.Now()
	if crd.ResourceVersion != s.rv {
		s.rv, s.limits = crd.ResourceVersion, validation.LimitsFromCRD(crd)
		if s.limits.Differs() {
			ctrl.LoggerFrom(ctx).Info("the served ClusterObjectSet CRD changes bounds of the generated one; validating with the served bounds", "resourceVersion", crd.ResourceVersion)
		}
	}
}
