package proc_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcd-conductor/etcd-conductor/test/localcluster/proc"
)

// helperEnv makes the test binary act as a parent that starts a process and
// then waits to be killed.
const helperEnv = "PROC_TEST_HELPER_PARENT"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helperParent(mode == "detach"))
	}
	os.Exit(m.Run())
}

// helperParent starts `sleep` and prints its PID, then blocks.
func helperParent(detach bool) int {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	p, err := proc.Start(proc.Spec{
		Name:    "sleep",
		Binary:  sleep,
		Args:    []string{"300"},
		LogPath: filepath.Join(os.TempDir(), fmt.Sprintf("proc-test-%d.log", os.Getpid())),
		Detach:  detach,
	})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println(p.PID())
	select {}
}

// The child's fate when its parent is SIGKILLed: an attached child dies with
// it (a killed test binary leaves no apiserver behind); a detached one lives
// on (what `localcluster up` relies on).
func TestChildAfterParentKilled(t *testing.T) {
	for _, tc := range []struct {
		mode         string
		wantSurvives bool
	}{
		{mode: "attach", wantSurvives: false},
		{mode: "detach", wantSurvives: true},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			parent := exec.Command(os.Args[0])
			parent.Env = append(os.Environ(), helperEnv+"="+tc.mode)
			out, err := parent.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := parent.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil {
				_ = parent.Process.Kill()
				t.Fatalf("read child pid from helper: %v", err)
			}
			pid, err := strconv.Atoi(strings.TrimSpace(line))
			if err != nil {
				_ = parent.Process.Kill()
				t.Fatalf("helper said %q", line)
			}
			t.Cleanup(func() { _ = proc.Recorded{Name: "sleep", PID: pid, Executable: exe(t, pid)}.Stop(time.Second) })

			if err := parent.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = parent.Wait()

			// The kernel sends the parent-death signal while the parent exits,
			// before Wait returns; an attached child is then already dying. A
			// detached one is given a moment in which it must not die.
			if tc.wantSurvives {
				time.Sleep(time.Second)
				if !proc.Running(pid) {
					t.Errorf("detached child %d died with its parent", pid)
				}
				return
			}
			if !waitGone(pid, 30*time.Second) {
				t.Errorf("attached child %d survived its parent's SIGKILL", pid)
			}
		})
	}
}

// Stop signals the whole process group: a grandchild dies too.
func TestStopKillsProcessGroup(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	pidFile := filepath.Join(t.TempDir(), "grandchild.pid")
	p, err := proc.Start(proc.Spec{
		Name:    "sh",
		Binary:  sh,
		Args:    []string{"-c", "sleep 300 & echo $! > " + pidFile + "; wait"},
		LogPath: filepath.Join(t.TempDir(), "sh.log"),
	})
	if err != nil {
		t.Fatal(err)
	}
	var grandchild int
	deadline := time.Now().Add(10 * time.Second)
	for grandchild == 0 && time.Now().Before(deadline) {
		data, _ := os.ReadFile(pidFile)
		grandchild, _ = strconv.Atoi(strings.TrimSpace(string(data)))
		time.Sleep(20 * time.Millisecond)
	}
	if grandchild == 0 {
		_ = p.Stop(time.Second)
		t.Fatal("shell did not report its background child")
	}
	if err := p.Stop(5 * time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if proc.Running(p.PID()) {
		t.Errorf("process %d still running after Stop", p.PID())
	}
	if !waitGone(grandchild, 10*time.Second) {
		t.Errorf("grandchild %d survived Stop of its process group", grandchild)
	}
}

// A recorded PID that now belongs to another executable is left alone.
func TestRecordedStopIgnoresOtherExecutable(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep")
	}
	p, err := proc.Start(proc.Spec{Name: "sleep", Binary: sleep, Args: []string{"300"}, LogPath: filepath.Join(t.TempDir(), "sleep.log")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(time.Second) })

	for _, tc := range []struct {
		name        string
		rec         proc.Recorded
		wantRunning bool
	}{
		{name: "other executable", rec: proc.Recorded{Name: "etcd", PID: p.PID(), Executable: "/not/etcd"}, wantRunning: true},
		{name: "matching executable", rec: p.Record(), wantRunning: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.rec.Stop(5 * time.Second); err != nil {
				t.Fatalf("Stop: %v", err)
			}
			// Our own child is reaped by its Wait goroutine, so it vanishes from /proc.
			if tc.wantRunning {
				if !proc.Running(p.PID()) {
					t.Errorf("pid %d was stopped through a record of another executable", p.PID())
				}
				return
			}
			select {
			case <-p.Exited():
			case <-time.After(10 * time.Second):
				t.Errorf("pid %d still running after Stop of its record", p.PID())
			}
		})
	}
}

func exe(t *testing.T, pid int) string {
	t.Helper()
	path, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	if err != nil {
		return ""
	}
	return path
}

func waitGone(pid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for proc.Running(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}
