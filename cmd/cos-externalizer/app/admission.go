package app

import (
	"flag"
	"fmt"
	"time"

	"github.com/cos-externalizer/cos-externalizer/internal/shared/content"
	"github.com/cos-externalizer/cos-externalizer/webhook"
)

// admissionOptions are the flags that bound the memory of the admission requests served at once
// (webhook.AdmissionLimits). Admission draws from a pool of its own, never the reconciler's
// (--max-concurrent-resolved-bytes), so a loaded webhook never holds up a rollout or a teardown.
type admissionOptions struct {
	maxBytes int64
	wait     time.Duration
}

func (o *admissionOptions) bind(fs *flag.FlagSet) {
	fs.Int64Var(&o.maxBytes, "max-concurrent-admission-bytes", webhook.DefaultMaxConcurrentAdmissionBytes, "Largest total of memory the admission requests served at once may hold: each is charged, before it is decoded, its bytes and the estimated memory of its decoded objects (and of the stored refs an update resolves); one without room waits up to --admission-wait, then is refused with 429 TooManyRequests, which clients retry. At least --max-resolved-bytes.")
	fs.DurationVar(&o.wait, "admission-wait", webhook.DefaultAdmissionWait, "How long an admission request waits for room under --max-concurrent-admission-bytes before it is refused (retryable); below "+webhook.MaxAdmissionWait.String()+", the validating webhook's timeout.")
}

func (o *admissionOptions) validate(maxResolvedBytes int64) error {
	if o.maxBytes < maxResolvedBytes {
		return fmt.Errorf("--max-concurrent-admission-bytes: must be at least --max-resolved-bytes (%d), got %d", maxResolvedBytes, o.maxBytes)
	}
	if o.wait < 0 || o.wait >= webhook.MaxAdmissionWait {
		return fmt.Errorf("--admission-wait: must be at least 0 and below %s, got %s", webhook.MaxAdmissionWait, o.wait)
	}
	return nil
}

// limits are the webhooks' limits from the flags: a new pool, for this manager's webhooks alone.
func (o *admissionOptions) limits() webhook.AdmissionLimits {
	return webhook.AdmissionLimits{Pool: content.NewPool(o.maxBytes), Wait: o.wait}
}
