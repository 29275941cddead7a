package webhook

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	cosadmission "github.com/cos-externalizer/cos-externalizer/internal/admission"
	"github.com/cos-externalizer/cos-externalizer/internal/admission/deadline"
	"github.com/cos-externalizer/cos-externalizer/internal/admission/validation"
	"github.com/cos-externalizer/cos-externalizer/internal/shared/content"
)

// The webhooks validate with the bounds of the CRD the cluster serves, read by name only:
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,resourceNames=clusterobjectsets.olm.operatorframework.io,verbs=get

// CRDName is the name of the ClusterObjectSet CRD.
const CRDName = "clusterobjectsets.olm.operatorframework.io"

// defaultLimitsTTL is how long the served CRD's bounds are used before the CRD is read again.
const defaultLimitsTTL = 10 * time.Second

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
	limits   validation.Bounds
}

// Validate returns the errors of validate with the bounds to validate with. When they involve a
// bound, the CRD is read now (and the reading kept) and, if it changed, the errors are those of its
// bounds; when it cannot be read, the errors stand.
func (s *ServedBounds) Validate(ctx context.Context, validate func(validation.Bounds) field.ErrorList) field.ErrorList {
	if s == nil || s.Reader == nil {
		return validate(validation.Bounds{})
	}
	limits, rv := s.get(ctx)
	errs := validate(limits)
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
		ttl = defaultLimitsTTL
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
	return s.limits, s.rv
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
		return s.limits, s.rv, nil
	}
	limits := validation.BoundsFromCRD(crd)
	if !newer {
		return limits, crd.ResourceVersion, nil
	}
	s.loaded, s.started, s.rv, s.limits = true, start, crd.ResourceVersion, limits
	if limits.Differs() {
		ctrl.LoggerFrom(ctx).Info("the served ClusterObjectSet CRD changes bounds of the generated one; validating with the served bounds", "resourceVersion", crd.ResourceVersion)
	}
	return limits, crd.ResourceVersion, nil
}

// DefaultMaxConcurrentAdmissionBytes is the default total of memory the admission requests served at
// once may hold (--max-concurrent-admission-bytes): with the reconciler's 256 MiB
// (--max-concurrent-resolved-bytes) and what the manager holds besides (its cache and the content of
// resolved Secrets, about 150 MiB at 1,000 ClusterObjectSets), 664 MiB of live heap under the Go
// runtime's soft limit of 0.9 GiB for a container limit of 1 GiB (docs/webhook.md, Concurrent
// admissions).
const DefaultMaxConcurrentAdmissionBytes = 256 << 20

// DefaultAdmissionDeadlineMargin is the time kept free before each call's deadline
// (--admission-deadline-margin).
const DefaultAdmissionDeadlineMargin = deadline.DefaultMargin

// DefaultAdmissionWait is how long an admission request waits for room before it is refused
// (--admission-wait).
const DefaultAdmissionWait = 2 * time.Second

// MaxAdmissionWait bounds --admission-wait: below the validating webhook's timeout (10 s), so that a
// request without room is always refused by us, quickly and retryably, never timed out by the API
// server.
const MaxAdmissionWait = 10 * time.Second

// InFlight bounds the admission requests served at once, in flight: their memory, and their work.
//
// Memory: each request is charged what decoding it keeps, estimated from its bytes before they are
// decoded (content.EstimateHeap), taken whole from Pool in one wait of at most Wait while it holds
// nothing; the stored refs an update resolves draw from the same request's Budget. No room: a quick,
// retryable refusal (429).
//
// Work: the same charge is the request's work (the CPU time of decoding, hashing and compressing
// follows it), admitted only when Work estimates that it, and the requests admitted before it, finish
// before the API server's deadline for their call (withCallDeadline) less a margin. Else: a quick,
// retryable refusal (429) too, rather than a timeout after the cores the others needed were spent.
type InFlight struct {
	// Pool is shared by the mutating and the validating webhook; nil: unbounded.
	Pool *content.Pool
	// Wait is how long a request waits for room; 0: it takes room free at once or is refused.
	Wait time.Duration
	// Work is shared by the mutating and the validating webhook; nil: unbounded.
	Work *deadline.Queue
	// Writes bound the mutating webhook's writes of Secrets the same way, once a request has planned
	// them: each is its plan's stored bytes, all writes sharing the API server (Cores 1); a write
	// that would not be done before the call's deadline less the margin is not made, and the request
	// is refused with 429 (timedWrites). nil: unbounded.
	Writes *deadline.Queue
	// Clock is Work's, on which the calls' deadlines are counted; nil: the real clock.
	Clock clock.PassiveClock
}

// clock is l.Clock, or the real clock.
func (l InFlight) clock() clock.PassiveClock {
	if l.Clock == nil {
		return clock.RealClock{}
	}
	return l.Clock
}

// admissionCost is what a request is charged before it is decoded: for each of the object and the
// old object, its bytes (the request keeps them) and the heap its decoded form keeps; plus once more
// the object's bytes for what is made from them (the canonical JSON and gzip of a plan, the patch).
// A document that is not JSON is the caller's error, told.
func admissionCost(object, oldObject []byte) (int64, error) {
	var cost int64
	for i, raw := range [][]byte{object, oldObject} {
		if len(raw) == 0 {
			continue
		}
		est, err := content.EstimateHeap(raw)
		if err != nil {
			what := "the ClusterObjectSet"
			if i == 1 {
				what = "the stored ClusterObjectSet"
			}
			return 0, fmt.Errorf("decoding %s: %w", what, err)
		}
		cost += int64(len(raw)) + est
	}
	return cost + int64(len(object)), nil
}

// refusedAdmission is why a request was not admitted to the pool: the response and its metric reason.
type refusedAdmission struct {
	resp   admission.Response
	reason cosadmission.Reason
}

// admit charges a request before it is decoded. It returns the request's charge, whose Budget the
// request's pipeline draws from (cosadmission.Pipeline.Budget); the caller releases it when the
// request ends. A refusal needs no release.
func (l InFlight) admit(ctx context.Context, maxResolvedBytes int64, metrics *Metrics, object, oldObject []byte) (*charge, *refusedAdmission) {
	cost, err := admissionCost(object, oldObject)
	if err != nil {
		return nil, &refusedAdmission{admission.Errored(http.StatusBadRequest, err), cosadmission.ReasonBadRequest}
	}
	b := l.Pool.NewBudget(maxResolvedBytes)
	if l.Pool != nil {
		if cost > l.Pool.Capacity() {
			return nil, &refusedAdmission{admission.Errored(http.StatusRequestEntityTooLarge, fmt.Errorf(
				"decoding this ClusterObjectSet takes an estimated %d MiB, more than the %d MiB the webhook admits at once (--max-concurrent-admission-bytes)",
				mib(cost), mib(l.Pool.Capacity()))), cosadmission.ReasonTooLarge}
		}
		wctx, cancel := context.WithTimeout(ctx, l.Wait)
		defer cancel()
		if err := b.Reserve(wctx, cost); err != nil {
			return nil, &refusedAdmission{busy(l.Pool, needs(cost)), cosadmission.ReasonBusy}
		}
		if err := b.Hold(cost); err != nil {
			// Cannot happen: Hold draws from what Reserve took.
			b.Release()
			return nil, &refusedAdmission{busy(l.Pool, needs(cost)), cosadmission.ReasonBusy}
		}
	}
	// After the wait for room: the time it took is the call's no more.
	callDeadline := l.callDeadlineOr(ctx)
	ticket, d := l.Work.Admit(cost, callDeadline)
	l.observe(metrics)
	if !d.Admitted {
		b.Release()
		return nil, &refusedAdmission{tooLate(l.Work, cost, d), cosadmission.ReasonDeadline}
	}
	return &charge{Budget: b, work: ticket, deadline: callDeadline, limits: l, metrics: metrics}, nil
}

// busyRetryAfter is the Retry-After every refusal to retry later asks for: the API server sets the header
// from it, and client-go's clients (kubectl, controllers) then retry by themselves.
const busyRetryAfter = 1

// busy is the quick, retryable refusal of a request that found no room: 429 TooManyRequests. why
// says for what.
func busy(pool *content.Pool, why string) admission.Response {
	msg := fmt.Sprintf("the webhook is admitting %d MiB of ClusterObjectSets at once (limit %d MiB, --max-concurrent-admission-bytes): %s; retry, nothing was written",
		mib(pool.Used()), mib(pool.Capacity()), why)
	return tooManyRequests(msg)
}

// tooManyRequests is the response of every refusal to retry later (no room in the admission pool,
// the unreferenced bound): 429 TooManyRequests with a Retry-After.
func tooManyRequests(msg string) admission.Response {
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusTooManyRequests, Reason: metav1.StatusReasonTooManyRequests, Message: msg,
		Details: &metav1.StatusDetails{RetryAfterSeconds: busyRetryAfter},
	}}}
}

// needs says what a request needs that it did not get.
func needs(cost int64) string {
	return fmt.Sprintf("no room for the %d MiB this one needs", mib(cost))
}

// mib is n bytes in MiB, rounded up.
func mib(n int64) int64 { return (n + 1<<20 - 1) >> 20 }
