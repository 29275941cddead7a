// Package server is the HTTP server the admission webhooks are served on, apart from the handlers:
// controller-runtime's webhook server (its registration, metrics and TLS options) with TLS from any
// source of the serving certificate, client authentication against a reloaded CA bundle (ClientCA),
// bounds on slow and large requests, the drain of a stopping replica (Drain), and what each request
// knows of its call: its deadline and whether its caller has gone (Hook, Finishing).
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
)

// Bounds of the webhook server's requests.
const (
	// DefaultReadTimeout bounds the reading of a whole request, TLS handshake, headers and body (the
	// API server sends a 3 MiB body in milliseconds; a client that trickles it is cut off): from the
	// connection's accept for its first request, from its first byte for a later one (readbound.go).
	DefaultReadTimeout = 30 * time.Second
	// DefaultMaxRequestBytes is the largest request body read: controller-runtime's admission limit
	// (an UPDATE's review carries the object and the old object, each up to the API server's 3 MiB).
	DefaultMaxRequestBytes = 7 << 20
	// readHeaderTimeout and idleTimeout are controller-runtime's.
	readHeaderTimeout = 32 * time.Second
	idleTimeout       = 90 * time.Second
	shutdownTimeout   = time.Minute
)

// Options configure New.
type Options struct {
	// Host and Port are the address listened on (Port 0: ctrlwebhook.DefaultPort; negative: off).
	Host string
	Port int
	// CertDir holds tls.crt and tls.key, reloaded on change, when no TLS option sets GetCertificate
	// (default: controller-runtime's).
	CertDir string
	// TLSOpts adjust the server's tls.Config, in order.
	TLSOpts []func(*tls.Config)
	// ClientCA, when set, requires every caller to present a client certificate it verifies.
	ClientCA *ClientCA
	// ReadTimeout bounds the reading of a whole request (0: DefaultReadTimeout).
	ReadTimeout time.Duration
	// Clock starts each request's ReadTimeout (tests); nil is the real clock.
	Clock clock.PassiveClock
	// MaxRequestBytes bounds a request's body (0: DefaultMaxRequestBytes).
	MaxRequestBytes int64
}

// Server is controller-runtime's webhook server (the same registration, metrics and TLS options)
// with bounds on slow and large requests, and optional client authentication:
//   - ReadTimeout bounds the reading of each request, body included (controller-runtime's bounds
//     only the headers), from the connection's accept (the TLS handshake included) for the first
//     request and from the first byte of each later one, so a client trickling a handshake, the
//     first bytes of a request or a body is cut off (readbound.go; with HTTP/2, the handshake and
//     each stream are bounded apart);
//   - a body over MaxRequestBytes is refused (413) without being read;
//   - with a ClientCA, a connection without a verified client certificate fails its handshake and
//     reaches no handler; each request is verified again against the current bundle (a kept-alive
//     connection whose certificate it no longer trusts is refused and closed).
type Server struct {
	opts Options
	// inner registers the hooks: its mux and controller-runtime's instrumentation; never started.
	inner ctrlwebhook.Server
	mux   *http.ServeMux

	mu       sync.Mutex
	started  bool
	tlsCfg   *tls.Config
	stopped  atomic.Bool
	listener net.Listener
}

var _ ctrlwebhook.Server = &Server{}

// New returns the server; it listens when started.
func New(o Options) *Server {
	if o.Port == 0 {
		o.Port = ctrlwebhook.DefaultPort
	}
	if o.CertDir == "" {
		o.CertDir = filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs") // controller-runtime's default
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = DefaultReadTimeout
	}
	if o.MaxRequestBytes <= 0 {
		o.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	mux := http.NewServeMux()
	return &Server{opts: o, mux: mux, inner: ctrlwebhook.NewServer(ctrlwebhook.Options{Port: o.Port, WebhookMux: mux})}
}

// NeedLeaderElection: every replica serves.
func (*Server) NeedLeaderElection() bool { return false }

// Register serves hook at path (controller-runtime's registration: it panics on a duplicate path).
func (s *Server) Register(path string, hook http.Handler) { s.inner.Register(path, hook) }

// WebhookMux is the mux the hooks are registered on.
func (s *Server) WebhookMux() *http.ServeMux { return s.mux }

// Addr is the address listened on once started, or nil.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listener == nil {
		return nil
	}
	return s.listener.Addr()
}

// Handler is what the server serves: the mux, behind the read and body bounds and the caller's
// authentication (verified again against the current bundle).
func (s *Server) Handler() http.Handler {
	var h http.Handler = s.mux
	if s.opts.ClientCA != nil {
		h = s.opts.ClientCA.Reverify(h)
	}
	return withRequestBound(limitBody(h, s.opts.MaxRequestBytes))
}

// Start serves until ctx ends, then waits up to a minute for the requests in flight.
func (s *Server) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("webhook-server")
	if s.opts.Port < 0 {
		log.Info("webhook server is disabled")
		return nil
	}
	cfg := &tls.Config{NextProtos: []string{"h2"}} //nolint:gosec // MinVersion comes from the TLS options (--tls-profile)
	for _, op := range s.opts.TLSOpts {
		op(cfg)
	}
	if cfg.GetCertificate == nil {
		w, err := certwatcher.New(filepath.Join(s.opts.CertDir, "tls.crt"), filepath.Join(s.opts.CertDir, "tls.key"))
		if err != nil {
			return fmt.Errorf("loading the webhook serving certificate: %w", err)
		}
		cfg.GetCertificate = w.GetCertificate
		go func() {
			if err := w.Start(ctx); err != nil {
				log.Error(err, "certificate watcher failed")
			}
		}()
	}
	if s.opts.ClientCA != nil {
		s.opts.ClientCA.TLSOption()(cfg)
		go s.opts.ClientCA.Run(ctx)
	}
	raw, err := net.Listen("tcp", net.JoinHostPort(s.opts.Host, strconv.Itoa(s.opts.Port)))
	if err != nil {
		return err
	}
	if !slices.Contains(cfg.NextProtos, "h2") {
		// HTTP/2 reads frames of every stream on one connection: its own bounds apply.
		raw = &boundedListener{Listener: raw, bound: s.opts.ReadTimeout, clock: s.opts.Clock}
	}
	l := tls.NewListener(raw, cfg)
	srv := &http.Server{
		BaseContext: func(net.Listener) context.Context { return ctx },
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return boundedConnContext(withConnVerification(ctx), c)
		},
		ConnState:         boundedConnState,
		Handler:           s.Handler(),
		MaxHeaderBytes:    1 << 20,
		ReadHeaderTimeout: min(readHeaderTimeout, s.opts.ReadTimeout),
		ReadTimeout:       s.opts.ReadTimeout,
		IdleTimeout:       idleTimeout,
		// Refused handshakes (no client certificate, a slow client cut off) are logged, structured.
		ErrorLog: stdlog.New(logWriter{log}, "", 0),
	}
	log.Info("serving webhooks", "host", s.opts.Host, "port", s.opts.Port, "clientAuthentication", s.opts.ClientCA != nil,
		"readTimeout", s.opts.ReadTimeout.String(), "maxRequestBytes", s.opts.MaxRequestBytes)
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			log.Error(err, "shutting the webhook server down")
		}
	}()
	s.mu.Lock()
	s.started, s.tlsCfg, s.listener = true, cfg, l
	s.mu.Unlock()
	err = srv.Serve(l)
	s.stopped.Store(true)
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	<-done
	return nil
}

// StartedChecker is healthy once the server listens and has a certificate to serve. It checks in
// process rather than by a handshake (controller-runtime's), which a server requiring client
// certificates would refuse and log on every probe.
func (s *Server) StartedChecker() healthz.Checker {
	return func(*http.Request) error {
		if s.opts.Port < 0 {
			return nil
		}
		s.mu.Lock()
		started, cfg := s.started, s.tlsCfg
		s.mu.Unlock()
		switch {
		case !started:
			return errors.New("webhook server has not been started yet")
		case s.stopped.Load():
			return errors.New("webhook server has stopped")
		}
		if _, err := cfg.GetCertificate(&tls.ClientHelloInfo{}); err != nil {
			return fmt.Errorf("webhook server has no certificate to serve: %w", err)
		}
		return nil
	}
}

// limitBody refuses a body declared larger than limit, and stops reading one that grows past it.
func limitBody(h http.Handler, limit int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			w.Header().Set("Connection", "close")
			http.Error(w, "request body too large: limit is "+strconv.FormatInt(limit, 10)+" bytes", http.StatusRequestEntityTooLarge)
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = http.MaxBytesReader(w, r.Body, limit)
		}
		h.ServeHTTP(w, r)
	})
}

// logWriter turns the HTTP server's error lines into log entries.
type logWriter struct{ log logr.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.log.Info("http server error", "message", strings.TrimSpace(string(p)))
	return len(p), nil
}
