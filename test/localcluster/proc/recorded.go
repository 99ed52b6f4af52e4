package proc

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Recorded identifies a process that may not be our child (it was started by
// an earlier, already exited `localcluster up`). The executable path guards
// against signalling an unrelated process that reused the PID.
type Recorded struct {
	Name       string `json:"name"`
	PID        int    `json:"pid"`
	Executable string `json:"executable"`
}

// Record describes p for a later StopRecorded.
func (p *Process) Record() Recorded {
	return Recorded{Name: p.spec.Name, PID: p.PID(), Executable: p.exe}
}

// Running reports whether a process with this PID exists and has not exited.
// A zombie counts as exited: its parent may never reap it (PID 1 in a
// container often does not).
func Running(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name, which may itself
	// contain spaces or parentheses.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return false
	}
	state := s[i+2]
	return state != 'Z' && state != 'X'
}

// IsRunning reports whether the recorded process is still running as the
// recorded executable.
func (r Recorded) IsRunning() bool {
	if !Running(r.PID) {
		return false
	}
	exe, err := os.Readlink("/proc/" + strconv.Itoa(r.PID) + "/exe")
	if err != nil {
		return false
	}
	return exe == r.Executable
}

// Stop terminates the recorded process group like Process.Stop, polling
// /proc because the process is not our child and cannot be waited for.
// A process that is gone already, or whose PID now belongs to another
// executable, is left alone.
func (r Recorded) Stop(grace time.Duration) error {
	if !r.IsRunning() {
		return nil
	}
	if err := syscall.Kill(-r.PID, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("SIGTERM %s (pgid %d): %w", r.Name, r.PID, err)
	}
	if waitGone(r.PID, grace) {
		return nil
	}
	if err := syscall.Kill(-r.PID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("SIGKILL %s (pgid %d): %w", r.Name, r.PID, err)
	}
	if !waitGone(r.PID, grace) {
		return fmt.Errorf("%s (pid %d) still running after SIGKILL", r.Name, r.PID)
	}
	return nil
}

func waitGone(pid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		if !Running(pid) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}
