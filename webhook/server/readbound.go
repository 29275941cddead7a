package server

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
// read (or its response written). Between requests (idle, or the HTTP server's background read
// while a handler runs), the deadlines set are applied as they are.
type boundedConn struct {
	net.Conn
	bound time.Duration
	clock clock.PassiveClock

	mu sync.Mutex
	// want is the read deadline last set (zero: none).
	want time.Time
	// limit is the end of the current request's bound; zero between requests.
	limit time.Time
	// between is true once a request has been read, until the next byte arrives.
	between bool
	// seq counts the bounds started; handled is the one of the request last handed to a handler.
	seq, handled uint64
}

func newBoundedConn(c net.Conn, bound time.Duration, clk clock.PassiveClock) *boundedConn {
	bc := &boundedConn{Conn: c, bound: bound, clock: clk, limit: clk.Now().Add(bound), seq: 1}
	_ = bc.applyLocked() // not shared yet; a failure shows at the first read
	return bc
}

// Read reads; the first bytes after a request ended start the next request's bound.
func (c *boundedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		if c.between {
			c.between = false
			c.seq++
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
	return errors.Join(c.SetReadDeadline(t), c.SetWriteDeadline(t))
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

// handling records that the request of the current bound reached its handler, and returns its bound.
func (c *boundedConn) handling() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.handled = c.seq
	return c.seq
}

// requestRead ends bound seq, when it is the current one: its request has been read. The next byte
// starts the next one.
func (c *boundedConn) requestRead(seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.between || c.seq != seq {
		return
	}
	c.limit, c.between = time.Time{}, true
	_ = c.applyLocked()
}

// idle ends the bound of the request last handled, if it still runs: its response has been written,
// and whatever of its body the handler left has been read or given up.
func (c *boundedConn) idle() {
	c.mu.Lock()
	seq := c.handled
	c.mu.Unlock()
	c.requestRead(seq)
}

// boundedConnKey is the context key of a request's boundedConn (boundedConnContext).
type boundedConnKey struct{}

// boundedConnOf returns the boundedConn under c's TLS, or nil.
func boundedConnOf(c net.Conn) *boundedConn {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	bc, _ := c.(*boundedConn)
	return bc
}

// boundedConnContext is the server's ConnContext: it puts the connection's boundedConn into the
// context of every request it carries.
func boundedConnContext(ctx context.Context, c net.Conn) context.Context {
	if bc := boundedConnOf(c); bc != nil {
		return context.WithValue(ctx, boundedConnKey{}, bc)
	}
	return ctx
}

// boundedConnState is the server's ConnState: a connection gone idle has written its response.
func boundedConnState(c net.Conn, s http.ConnState) {
	if s != http.StateIdle {
		return
	}
	if bc := boundedConnOf(c); bc != nil {
		bc.idle()
	}
}

// withRequestBound ends the request's bound on its connection once its body has been read to the
// end, or at once for a request without a body: from then on the HTTP server reads in the
// background while the handler runs, and a time-out of that read cancels the request's context. A
// body whose reading fails keeps the bound, under which the server then gives up what is left of
// it; so does one the handler leaves unread, until the response is written (boundedConnState).
func withRequestBound(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bc, _ := r.Context().Value(boundedConnKey{}).(*boundedConn)
		if bc == nil {
			h.ServeHTTP(w, r)
			return
		}
		seq := bc.handling()
		if r.Body == nil || r.Body == http.NoBody {
			bc.requestRead(seq)
		} else {
			r.Body = &boundedBody{ReadCloser: r.Body, eof: func() { bc.requestRead(seq) }}
		}
		h.ServeHTTP(w, r)
	})
}

// boundedBody calls eof when a read reaches the body's end.
type boundedBody struct {
	io.ReadCloser
	eof func()
}

func (b *boundedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.eof()
	}
	return n, err
}
