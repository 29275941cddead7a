package local

import (
	"io"
	"net"
	"sync"
	"time"
)

// Balancer stands where a Service would: the API server reaches webhooks on loopback only by URL, so
// it calls this one address, and each connection goes to the next replica in turn, skipping
// replicas that refuse it. TLS passes through: every replica serves its own certificate.
type Balancer struct {
	ln net.Listener

	mu       sync.Mutex
	backends []string
	next     int
	conns    map[net.Conn]struct{}
}

// NewBalancer listens on a free loopback port.
func NewBalancer() (*Balancer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &Balancer{ln: ln, conns: map[net.Conn]struct{}{}}
	go b.serve()
	return b, nil
}

// Addr is the address to call.
func (b *Balancer) Addr() string { return b.ln.Addr().String() }

// SetBackends replaces the replicas (host:port).
func (b *Balancer) SetBackends(addrs []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.backends = append([]string(nil), addrs...)
}

// Close stops listening and closes every open connection.
func (b *Balancer) Close() error {
	err := b.ln.Close()
	b.mu.Lock()
	defer b.mu.Unlock()
	for c := range b.conns {
		_ = c.Close()
	}
	return err
}

func (b *Balancer) serve() {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		go b.proxy(c)
	}
}

// dial connects to the next replica that accepts, trying each at most once.
func (b *Balancer) dial() (net.Conn, error) {
	b.mu.Lock()
	backends, start := b.backends, b.next
	b.next++
	b.mu.Unlock()
	last := io.EOF
	for i := range backends {
		c, err := net.DialTimeout("tcp", backends[(start+i)%len(backends)], time.Second)
		if err == nil {
			return c, nil
		}
		last = err
	}
	return nil, last
}

func (b *Balancer) track(cs ...net.Conn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range cs {
		b.conns[c] = struct{}{}
	}
}

func (b *Balancer) untrack(cs ...net.Conn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range cs {
		delete(b.conns, c)
	}
}

func (b *Balancer) proxy(client net.Conn) {
	backend, err := b.dial()
	if err != nil {
		_ = client.Close()
		return
	}
	b.track(client, backend)
	defer b.untrack(client, backend)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		// Half-close, so the other direction can finish.
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(backend, client)
	go pipe(client, backend)
	<-done
	<-done
	_ = client.Close()
	_ = backend.Close()
}
