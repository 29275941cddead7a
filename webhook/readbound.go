package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// The HTTP server's own read deadlines bound each phase of a connection separately: the TLS
// handshake (ReadTimeout), then the request from the start of its headers (ReadTimeout again), and a
// kept-alive connection waits for the first four bytes of its next request under the idle timeout
// (90 s) before the request's bound starts. A client could so take twice the bound for its first
// request (a slow handshake, then a slow body), or trickle the first bytes of a later one for up to
// the idle timeout. boundedListener makes the bound hold for the whole request: from the
// connection's accept (the handshake included) for its first request, from the first byte received
// after the previous request for a later one, until the request's body has been read (or its
// handler returns).

// boundedListener wraps each accepted connection in a boundedConn.
type boundedListener struct {
	net.Listener
	bound time.Duration
	clock clock.PassiveClock
}

func (l *boundedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return newBoundedConn(c, l.bound, l.clock), nil
}

// boundedConn caps every read deadline set on it with the bound of the request being read: limit,
// set at accept and at the first byte after a request ended, cleared when a request's body has been
// read. Between requests (idle, or the HTTP server's background read while a handler runs), the
// deadlines set are applied as they are.
type boundedConn struct {
	net.Conn
	bound time.Duration
	clock clock.PassiveClock

	mu sync.Mutex
	// want is the read deadline last set (zero: none).
	want time.Time
	// limit is the end of the current request's bound; zero between requests.
	limit time.Time
	// between is true once a request's body has been read, until the next byte arrives.
	between bool
}

func newBoundedConn(c net.Conn, bound time.Duration, clk clock.PassiveClock) *boundedConn {
	return &boundedConn{Conn: c, bound: bound, clock: clk, limit: clk.Now().Add(bound)}
}

// Read reads; the first bytes after a request ended start the next request's bound.
func (c *boundedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		if c.between {
			c.between = false
			c.limit = c.clock.Now().Add(c.bound)
			_ = c.applyLocked() // a failure shows at the next read
		}
		c.mu.Unlock()
	}
	return n, err
}

// SetReadDeadline sets t, capped by the current request's bound.
func (c *boundedConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.want = t
	return c.applyLocked()
}

// SetDeadline sets the read deadline as SetReadDeadline does and the write deadline as it is.
func (c *boundedConn) SetDeadline(t time.Time) error {
	return errors.Join(c.SetReadDeadline(t), c.Conn.SetWriteDeadline(t))
}

// applyLocked sets the connection's read deadline: want, or the bound when it is earlier (or want
// is none).
func (c *boundedConn) applyLocked() error {
	d := c.want
	if !c.limit.IsZero() && (d.IsZero() || c.limit.Before(d)) {
		d = c.limit
	}
	return c.Conn.SetReadDeadline(d)
}

// requestRead ends the current request's bound: its body has been read (or its handler returned).
// The next byte starts the next one.
func (c *boundedConn) requestRead() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.between {
		return
	}
	c.limit, c.between = time.Time{}, true
	_ = c.applyLocked()
}

// boundedConnKey is the context key of a request's boundedConn (boundedConnContext).
type boundedConnKey struct{}

// boundedConnContext is the server's ConnContext: it puts the connection's boundedConn, under its
// TLS, into the context of every request it carries.
func boundedConnContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if bc, ok := c.(*boundedConn); ok {
		return context.WithValue(ctx, boundedConnKey{}, bc)
	}
	return ctx
}

// withRequestBound ends the request's bound on its connection once its body has been read to the
// end (or failed), when its handler returns, or at once for a request without a body. Without it,
// the bound would cap the HTTP server's background read while the handler runs, which cancels the
// request's context when it times out.
func withRequestBound(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bc, _ := r.Context().Value(boundedConnKey{}).(*boundedConn)
		if bc == nil {
			h.ServeHTTP(w, r)
			return
		}
		var once sync.Once
		done := func() { once.Do(bc.requestRead) }
		defer done()
		if r.Body == nil || r.Body == http.NoBody {
			done()
		} else {
			r.Body = &boundedBody{ReadCloser: r.Body, done: done}
		}
		h.ServeHTTP(w, r)
	})
}

// boundedBody calls done when a read ends the body (io.EOF) or fails.
type boundedBody struct {
	io.ReadCloser
	done func()
}

func (b *boundedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.done()
	}
	return n, err
}
