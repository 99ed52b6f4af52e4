// Package proc owns the control-plane child processes of the test harnesses:
// it starts a binary with its output in a log file, makes sure the process
// cannot outlive the test binary by accident, and stops it by process group.
package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// DefaultGrace is how long Stop waits after SIGTERM before it sends SIGKILL.
// kube-apiserver and etcd shut down in well under a second on loopback.
const DefaultGrace = 10 * time.Second

// Spec describes one process to start.
type Spec struct {
	Name    string   // short name for logs and errors, e.g. "kube-apiserver"
	Binary  string   // path of the executable
	Args    []string // arguments without argv[0]
	Env     []string // full environment; nil means the caller's
	LogPath string   // stdout and stderr go here (appended)
	// Detach lets the process outlive its parent: it gets its own session
	// instead of a parent-death signal. Used by `localcluster up`.
	Detach bool
}

// Process is a started child process.
type Process struct {
	spec Spec
	exe  string // Binary with symlinks resolved: what /proc/<pid>/exe shows
	cmd  *exec.Cmd

	exited  chan struct{}
	mu      sync.Mutex
	waitErr error
}

// Start launches the process. Unless Spec.Detach is set, the child runs in
// its own process group and receives SIGKILL when the starting thread dies,
// so a killed test binary does not leave an apiserver behind.
func Start(spec Spec) (*Process, error) {
	exe, err := filepath.EvalSymlinks(spec.Binary)
	if err != nil {
		return nil, fmt.Errorf("resolve binary of %s: %w", spec.Name, err)
	}
	if err := os.MkdirAll(filepath.Dir(spec.LogPath), 0o755); err != nil {
		return nil, fmt.Errorf("create log dir of %s: %w", spec.Name, err)
	}
	logFile, err := os.OpenFile(spec.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log of %s: %w", spec.Name, err)
	}
	// The child holds its own descriptor; ours is not needed after Start.
	defer logFile.Close()

	cmd := exec.Command(spec.Binary, spec.Args...)
	cmd.Env = spec.Env
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	if spec.Detach {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", spec.Name, err)
	}
	p := &Process{spec: spec, exe: exe, cmd: cmd, exited: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(p.exited)
	}()
	return p, nil
}

// Name is the Spec name.
func (p *Process) Name() string { return p.spec.Name }

// PID is the process id, which is also its process-group id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Executable is the resolved path of the binary, for recording alongside the
// PID so a later `down` does not signal an unrelated process that reused it.
func (p *Process) Executable() string { return p.exe }

// LogPath is where the process writes its output.
func (p *Process) LogPath() string { return p.spec.LogPath }

// Exited is closed once the process has exited and been reaped.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// ExitError describes how the process ended; nil while it runs.
func (p *Process) ExitError() error {
	select {
	case <-p.exited:
	default:
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.waitErr == nil {
		return fmt.Errorf("%s exited with status 0", p.spec.Name)
	}
	return fmt.Errorf("%s exited: %w", p.spec.Name, p.waitErr)
}

// Stop sends SIGTERM to the process group, waits up to grace for the process
// to exit, then sends SIGKILL and waits for it to be reaped. It is safe to
// call more than once.
func (p *Process) Stop(grace time.Duration) error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	pgid := p.PID()
	if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("SIGTERM %s (pgid %d): %w", p.spec.Name, pgid, err)
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(grace):
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("SIGKILL %s (pgid %d): %w", p.spec.Name, pgid, err)
	}
	<-p.exited
	return nil
}

// LogTail returns up to the last n bytes of the process log, for error
// messages when a process dies during startup.
func (p *Process) LogTail(n int) string {
	return TailFile(p.spec.LogPath, n)
}

// TailFile returns up to the last n bytes of a file, starting at a line
// boundary when possible; unreadable files give an empty string.
func TailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if len(data) > n {
		data = data[len(data)-n:]
		if i := bytes.IndexByte(data, '\n'); i >= 0 && i+1 < len(data) {
			data = data[i+1:]
		}
	}
	return string(data)
}
