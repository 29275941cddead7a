package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/cos-externalizer/cos-externalizer/internal/admission"
	"github.com/cos-externalizer/cos-externalizer/internal/admission/admissiontest"
	"github.com/cos-externalizer/cos-externalizer/internal/shared/content"
	b "github.com/cos-externalizer/cos-externalizer/test/builders"
)

// blockingStore blocks every Write at a hook until released or its context ends, and reports how
// the Write ended: nil when it wrote, else its context's cause.
type blockingStore struct {
	*admissiontest.Store
	entered, release chan struct{}
	ended            chan error
}

func (s *blockingStore) Write(ctx context.Context, cosName string, plan *content.Plan, dryRun bool) (int, error) {
	close(s.entered)
	select {
	case <-ctx.Done():
		s.ended <- context.Cause(ctx)
		return 0, ctx.Err()
	case <-s.release:
	}
	if err := ctx.Err(); err != nil {
		s.ended <- context.Cause(ctx)
		return 0, err
	}
	n, err := s.Store.Write(ctx, cosName, plan, dryRun)
	s.ended <- err
	return n, err
}

// TestCallerGone: a handler blocked before it writes, whose HTTP caller closes its connection, sees
// its context canceled (errCallerGone) and writes no Secret; one whose replica stops meanwhile
// finishes and writes.
func TestCallerGone(t *testing.T) {
	const ns = "olmv1-system"
	cos := b.COS("gone", b.WithAnnotations(map[string]string{admission.Annotation: string(admission.ModeAlways)}),
		b.WithPhase("p", b.InlineConfigMaps("default", "gone", 2)...))
	raw, err := json.Marshal(cos)
	if err != nil {
		t.Fatal(err)
	}
	review, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Request:  &admissionv1.AdmissionRequest{UID: "1", Operation: admissionv1.Create, Name: cos.Name, Object: runtime.RawExtension{Raw: raw}},
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		callerGoes, managerStops bool
		wantEnd                  error
		wantSecrets              bool
	}{
		"the caller closes its connection": {callerGoes: true, wantEnd: errCallerGone},
		"the manager stops":                {managerStops: true, wantSecrets: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			store := &blockingStore{Store: admissiontest.NewStore(ns), entered: make(chan struct{}), release: make(chan struct{}), ended: make(chan error, 1)}
			stopping, stop := context.WithCancel(context.Background())
			defer stop()
			handler := callerGone(stopping, &ctrlwebhook.Admission{Handler: finishing{&Externalizer{Store: store, Metrics: NewMetrics(),
				Options: Options{SystemNamespace: ns, Mode: admission.ModeOversized}}}})
			srv := httptest.NewUnstartedServer(handler)
			srv.Config.BaseContext = func(net.Listener) context.Context { return stopping } // as the webhook server's
			srv.Start()
			defer srv.Close()
			reqCtx, hangUp := context.WithCancel(context.Background())
			defer hangUp()
			req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, srv.URL, bytes.NewReader(review))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			answered := make(chan error, 1)
			go func() {
				resp, err := srv.Client().Do(req)
				if err == nil {
					_ = resp.Body.Close()
				}
				answered <- err
			}()
			<-store.entered
			if tc.callerGoes {
				hangUp()
			}
			if tc.managerStops {
				stop()
				close(store.release)
			}
			if got := <-store.ended; !errors.Is(got, tc.wantEnd) {
				t.Errorf("the write ended with %v, want %v", got, tc.wantEnd)
			}
			if err := <-answered; (err == nil) != tc.managerStops {
				t.Errorf("the caller got %v", err)
			}
			if got := len(store.Secrets()) > 0; got != tc.wantSecrets {
				t.Errorf("Secrets written: %v, want %v", got, tc.wantSecrets)
			}
		})
	}
}
