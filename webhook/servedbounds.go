package webhook

import (
	"context"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cos-externalizer/cos-externalizer/webhook/admission/validation"
)

// The webhooks validate with the bounds of the CRD the cluster serves, read by name only:
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,resourceNames=clusterobjectsets.olm.operatorframework.io,verbs=get

// CRDName is the name of the ClusterObjectSet CRD.
const CRDName = "clusterobjectsets.olm.operatorframework.io"

// defaultBoundsTTL is how long the served CRD's bounds are used before the CRD is read again.
const defaultBoundsTTL = 10 * time.Second

// ServedBounds gives the numeric bounds of the ClusterObjectSet CRD as the cluster serves it
// (validation.Bounds), so that the webhooks refuse exactly what the API server would: a cluster may
// lower, for example, spec.progressDeadlineMinutes' minimum in its CRD. The CRD is read uncached: the
// first request waits for the reading; later ones use the last reading and, once it is older than the
// TTL, start a new one in the background, so no admitted request waits for it again. A refusal that
// involves a bound (validation.BoundDependent) is confirmed against the CRD read at once, so a bound
// changed less than a TTL ago refuses nothing the API server admits. When the CRD cannot be read, the
// last reading's bounds apply, or the generated CRD's.
type ServedBounds struct {
	Reader client.Reader
	// TTL is how long a reading is used before the next is started; 0 means 10 seconds.
	TTL time.Duration

	mu       sync.Mutex
	started  time.Time // when the reading in use was started
	loaded   bool
	inFlight bool
	rv       string
	bounds   validation.Bounds
}

// Validate returns the errors of validate with the bounds to validate with. When they involve a
// bound, the CRD is read now (and the reading kept) and, if it changed, the errors are those of its
// bounds; when it cannot be read, the errors stand.
func (s *ServedBounds) Validate(ctx context.Context, validate func(validation.Bounds) field.ErrorList) field.ErrorList {
	if s == nil || s.Reader == nil {
		return validate(validation.Bounds{})
	}
	bounds, rv := s.get(ctx)
	errs := validate(bounds)
	if !validation.BoundDependent(errs) {
		return errs
	}
	fresh, freshRV, err := s.read(ctx)
	if err != nil || freshRV == rv {
		return errs
	}
	return validate(fresh)
}

// get returns the bounds in use and the resourceVersion of the CRD they were read from.
func (s *ServedBounds) get(ctx context.Context) (validation.Bounds, string) {
	ttl := s.TTL
	if ttl == 0 {
		ttl = defaultBoundsTTL
	}
	s.mu.Lock()
	if !s.loaded {
		s.mu.Unlock()
		_, _, _ = s.read(ctx)
		s.mu.Lock()
	} else if time.Since(s.started) >= ttl && !s.inFlight {
		s.inFlight = true
		log := ctrl.LoggerFrom(ctx)
		go func() {
			rctx, cancel := context.WithTimeout(ctrl.LoggerInto(context.Background(), log), 10*time.Second)
			defer cancel()
			_, _, _ = s.read(rctx)
			s.mu.Lock()
			s.inFlight = false
			s.mu.Unlock()
		}()
	}
	defer s.mu.Unlock()
	return s.bounds, s.rv
}

// read reads the CRD and returns its bounds and resourceVersion, keeping them unless a reading
// started later is kept already. It logs the errors.
func (s *ServedBounds) read(ctx context.Context) (validation.Bounds, string, error) {
	start := time.Now()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	err := s.Reader.Get(ctx, client.ObjectKey{Name: CRDName}, crd)
	s.mu.Lock()
	defer s.mu.Unlock()
	newer := !s.loaded || !start.Before(s.started)
	if err != nil {
		if newer {
			// Keep the last reading; until there is one, the generated bounds. Read again after the TTL.
			ctrl.LoggerFrom(ctx).Info("cannot read the served ClusterObjectSet CRD; validating with the last bounds read, or the generated ones", "error", err.Error())
			s.loaded, s.started = true, start
		}
		return validation.Bounds{}, "", err
	}
	if crd.ResourceVersion == s.rv {
		if newer {
			s.loaded, s.started = true, start
		}
		return s.bounds, s.rv, nil
	}
	bounds := validation.BoundsFromCRD(crd)
	if !newer {
		return bounds, crd.ResourceVersion, nil
	}
	s.loaded, s.started, s.rv, s.bounds = true, start, crd.ResourceVersion, bounds
	if bounds.Differs() {
		ctrl.LoggerFrom(ctx).Info("the served ClusterObjectSet CRD changes bounds of the generated one; validating with the served bounds", "resourceVersion", crd.ResourceVersion)
	}
	return bounds, crd.ResourceVersion, nil
}
