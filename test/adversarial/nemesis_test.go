package adversarial_test

// The nemesis: a TCP proxy between the manager and the API server that delays, black-holes or cuts
// connections; etcd or the API server stopped for a moment (SIGSTOP); the reconciler's clock skewed.

import (
	"fmt"
	"net"
	"net/url"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/rest"

	"github.com/cos-externalizer/cos-externalizer/cmd/cos-externalizer/app"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// proxy forwards TCP connections from a loopback port to the API server. Its faults: delay (every
// chunk waits), blackhole (nothing is forwarded, connections stay open) and cut (every open
// connection is closed).
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  map[net.Conn]bool
	delay  time.Duration
	hole   bool
	wake   *sync.Cond
}

func newProxy(target string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	p.wake = sync.NewCond(&p.mu)
	go p.serve()
	return p, nil
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		p.mu.Lock()
		p.conns[in], p.conns[out] = true, true
		p.mu.Unlock()
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

// pipe copies from src to dst, chunk by chunk, through the faults.
func (p *proxy) pipe(src, dst net.Conn) {
	defer func() {
		_ = src.Close()
		_ = dst.Close()
		p.mu.Lock()
		delete(p.conns, src)
		delete(p.conns, dst)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.hole {
				p.wake.Wait()
			}
			d := p.delay
			p.mu.Unlock()
			if d > 0 {
				time.Sleep(d) // the fault itself: a slow network, not a wait for a condition
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a cut: the other direction ends with it
		}
	}
}

// cut closes every open connection: the manager's clients reconnect (its watches restart).
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
}

// fault applies variant for d: delay (each chunk 50-300 ms late), blackhole (nothing forwarded,
// then every connection cut, as a dropped route's connections end), cut (at once).
func (p *proxy) fault(variant string, d time.Duration, seed uint64) {
	switch variant {
	case "cut":
		p.cut()
		return
	case "delay":
		p.mu.Lock()
		p.delay = time.Duration(50+seed%250) * time.Millisecond
		p.mu.Unlock()
	case "blackhole":
		p.mu.Lock()
		p.hole = true
		p.mu.Unlock()
	}
	time.Sleep(d) // how long the fault lasts: the nemesis's own schedule
	p.mu.Lock()
	p.delay, p.hole = 0, false
	p.wake.Broadcast()
	p.mu.Unlock()
	if variant == "blackhole" {
		p.cut()
	}
}

// proxiedEnv is the environment with its config pointed at the proxy: the manager started from it
// talks to the API server through the proxy (the API server's certificate names 127.0.0.1, as the
// proxy's address does).
func (h *harness) proxiedEnv() (*testenv.Environment, error) {
	if h.proxy == nil {
		u, err := url.Parse(testenv.Env.Config.Host)
		if err != nil {
			return nil, err
		}
		if h.proxy, err = newProxy(u.Host); err != nil {
			return nil, err
		}
	}
	cfg := rest.CopyConfig(testenv.Env.Config)
	cfg.Host = "https://" + h.proxy.addr()
	cp := *testenv.Env.ControlPlane
	cp.Config = cfg
	env := *testenv.Env
	env.ControlPlane = &cp
	return &env, nil
}

// adjust is the options hook of every replica: the reconciler's clock, shifted by h.skew; the
// sweep's, shifted by h.sweepSkew; the sweep's hook before its deletes, where sweep-race ops land;
// the Secret guard's before it admits a delete, where collector-race ops land.
func (h *harness) adjust(o *app.Options) {
	o.SkipControllerNameValidation = true
	if h.skew != 0 {
		o.Clock = shiftedClock{d: h.skew}
	}
	if h.sweepSkew != 0 {
		o.SweepClock = shiftedClock{d: h.sweepSkew}
	}
	o.SweepBeforeDelete = h.beforeSweepDelete
	o.SweepAfterStep = h.afterSweepStep
	o.GuardBeforeAdmitDelete = h.beforeGuardDelete
}

// shiftedClock is the real clock shifted by d.
type shiftedClock struct{ d time.Duration }

func (c shiftedClock) Now() time.Time                  { return time.Now().Add(c.d) }
func (c shiftedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// nemesis runs the nemesis ops.
func (r *runner) nemesis(op Op) error {
	d := time.Duration(1000+op.Seed%3000) * time.Millisecond
	switch op.Kind {
	case opProxy:
		if r.env.proxy == nil {
			return nil // the manager does not talk through the proxy (COS_ADV_NEMESIS=0)
		}
		r.env.proxy.fault(op.Variant, d, op.Seed)
		return nil
	case opPause:
		pid := testenv.Env.PIDs()[op.Variant]
		if pid == 0 {
			return nil // an external cluster: nothing of ours to stop
		}
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			return err
		}
		time.Sleep(d) // the pause itself
		return syscall.Kill(pid, syscall.SIGCONT)
	case opSkew:
		skew, err := time.ParseDuration(op.Variant)
		if err != nil {
			return fmt.Errorf("skew %q: %w", op.Variant, err)
		}
		r.env.skew = skew
		return r.env.restart()
	}
	return fmt.Errorf("unknown nemesis op %q", op.Kind)
}
