package server

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestDrainWrap: responses close their connection only once the drain has begun; a nil Drain changes
// nothing.
func TestDrainWrap(t *testing.T) {
	tests := map[string]struct {
		drain     *Drain
		start     bool
		wantClose bool
	}{
		"no drain":         {},
		"before the drain": {drain: &Drain{}},
		"draining":         {drain: &Drain{}, start: true, wantClose: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if tc.start {
				tc.drain.Start()
			}
			h := tc.drain.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mutate", nil))
			if got := rec.Header().Get("Connection") == "close"; got != tc.wantClose {
				t.Errorf("Connection: close is %t, want %t", got, tc.wantClose)
			}
		})
	}
}
