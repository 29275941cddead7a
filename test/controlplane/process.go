package controlplane

import (
	"syscall"
	"time"
)

// Process is a program started beside the control plane, such as a manager replica of the e2e
// suite: in its own process group, logging to a file, and killed by the kernel if this process dies.
type Process struct{ p *process }

// StartProcess starts bin with args, its output appended to logPath.
func StartProcess(name, bin string, args []string, logPath string) (*Process, error) {
	p, err := startProcess(name, bin, args, logPath, false)
	if err != nil {
		return nil, err
	}
	return &Process{p}, nil
}

// PID is the process ID.
func (p *Process) PID() int { return p.p.pid() }

// Exited is closed once the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.p.done }

// ExitError says why the process exited, unless Stop or Kill ended it; nil while it runs.
func (p *Process) ExitError() error { return p.p.exitError() }

// Stop sends SIGTERM, then SIGKILL after timeout, and waits for the exit.
func (p *Process) Stop(timeout time.Duration) error { return p.p.stop(timeout) }

// Kill sends SIGKILL, as a crash or an OOM kill would end it, and waits for the exit.
func (p *Process) Kill() {
	p.p.mu.Lock()
	p.p.stopped = true
	p.p.mu.Unlock()
	_ = p.p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.p.done
}
