package server

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/utils/clock"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// TestCallerGone: a handler at work, behind Hook and Finishing, whose HTTP caller closes its
// connection sees its context canceled with errCallerGone as the cause (the webhooks then stop
// before they write); one whose replica stops meanwhile finishes, its context not canceled.
func TestCallerGone(t *testing.T) {
	const review = `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","operation":"CREATE","object":{}}}`
	tests := map[string]struct {
		callerGoes, managerStops bool
		wantEnd                  error
	}{
		"the caller closes its connection": {callerGoes: true, wantEnd: errCallerGone},
		"the manager stops":                {managerStops: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			entered, release, ended := make(chan struct{}), make(chan struct{}), make(chan error, 1)
			work := admission.HandlerFunc(func(ctx context.Context, _ admission.Request) admission.Response {
				close(entered)
				select {
				case <-ctx.Done():
					ended <- context.Cause(ctx)
					return admission.Errored(http.StatusServiceUnavailable, ctx.Err())
				case <-release:
				}
				ended <- context.Cause(ctx)
				return admission.Allowed("")
			})
			stopping, stop := context.WithCancel(context.Background())
			defer stop()
			srv := httptest.NewUnstartedServer(Hook(stopping, clock.RealClock{}, nil, &ctrlwebhook.Admission{Handler: Finishing(work)}))
			srv.Config.BaseContext = func(net.Listener) context.Context { return stopping } // as the webhook server's
			srv.Start()
			defer srv.Close()
			reqCtx, hangUp := context.WithCancel(context.Background())
			defer hangUp()
			req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, srv.URL, strings.NewReader(review))
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
			<-entered
			if tc.callerGoes {
				hangUp()
			}
			if tc.managerStops {
				stop()
				close(release)
			}
			if got := <-ended; !errors.Is(got, tc.wantEnd) {
				t.Errorf("the work ended with %v, want %v", got, tc.wantEnd)
			}
			if err := <-answered; (err == nil) != tc.managerStops {
				t.Errorf("the caller got %v", err)
			}
		})
	}
}
