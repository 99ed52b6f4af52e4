package nodesim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// container is one container of a pod: a host process started inside the
// pod's network namespace and its own mount and UTS namespaces, restarted per
// the pod's restart policy. All fields below `isInit` are guarded by w.mu.
type container struct {
	w      *podWorker
	name   string
	isInit bool

	state        corev1.ContainerState
	last         corev1.ContainerState
	restarts     int32
	ready        bool
	started      bool
	everStarted  bool
	succeeded    bool // init container finished with exit 0
	imageID      string
	containerID  string
	runningImage string
	pid          int
	exited       chan struct{} // closed when the current process exits
	bins         imageBinaries
	env          []string
	sec          containerSecurity
	killing      bool
	stopping     bool
	runStarted   bool
	stopCh       chan struct{}
	done         chan struct{}
}

func newContainer(w *podWorker, name string, isInit bool) *container {
	waiting := "ContainerCreating"
	if isInit || len(w.pod.Spec.InitContainers) > 0 {
		waiting = "PodInitializing"
	}
	return &container{
		w: w, name: name, isInit: isInit,
		state:  corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: waiting}},
		stopCh: make(chan struct{}),
		done:   make(chan struct{}),
	}
}

// LogPath is where the container's stdout and stderr go, across restarts.
func (c *container) logPath() string { return filepath.Join(c.w.dir, "logs", c.name+".log") }

func (c *container) sleep(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.stopCh:
		return false
	}
}

func (c *container) setWaiting(reason, msg string) {
	c.w.mu.Lock()
	c.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
	c.w.mu.Unlock()
	c.w.markDirty()
}

// backoff is kubelet's container and image back-off: nothing before the first
// retry, then base doubling up to max.
func (c *container) backoff(failures int) time.Duration {
	if failures <= 1 {
		return 0
	}
	d := c.w.s.o.BackoffBase
	for i := 2; i < failures && d < c.w.s.o.BackoffMax; i++ {
		d *= 2
	}
	return min(d, c.w.s.o.BackoffMax)
}

// runToCompletion runs an init container until it succeeds; false means the
// pod is stopping or the init container failed for good.
func (c *container) runToCompletion() bool {
	c.run()
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	return c.succeeded
}

// run is the container's restart loop.
func (c *container) run() {
	c.w.mu.Lock()
	if c.stopping {
		c.w.mu.Unlock()
		return
	}
	c.runStarted = true
	c.w.mu.Unlock()
	defer close(c.done)
	crashes, pullFailures := 0, 0
	for {
		spec := c.w.containerSpec(c.name, c.isInit)
		if spec == nil {
			return
		}
		bins, err := c.w.s.images.resolve(spec.Image)
		if err == nil {
			bins, err = c.w.s.stage.stage(bins)
		}
		if err != nil {
			pullFailures++
			c.setWaiting("ErrImagePull", err.Error())
			c.w.event(corev1.EventTypeWarning, "Failed", "Failed to pull image %q: %v", spec.Image, err)
			if !c.sleep(min(time.Second, c.w.s.o.BackoffBase)) {
				return
			}
			c.setWaiting("ImagePullBackOff", fmt.Sprintf("Back-off pulling image %q: %v", spec.Image, err))
			c.w.event(corev1.EventTypeNormal, "BackOff", "Back-off pulling image %q", spec.Image)
			if !c.sleep(max(c.backoff(pullFailures+1), time.Second)) {
				return
			}
			continue
		}
		pullFailures = 0
		cmd, env, sec, err := c.build(spec, bins)
		var term *corev1.ContainerStateTerminated
		var notStarted *startError
		switch {
		case errors.As(err, &notStarted):
			// Created but not started (the executable is not in the image): a failed run, restarted
			// with back-off like a crash.
			if term = c.failStart(spec, bins, notStarted); term == nil {
				return
			}
		case err != nil:
			c.setWaiting("CreateContainerConfigError", err.Error())
			c.w.event(corev1.EventTypeWarning, "Failed", "Error: %v", err)
			if !c.sleep(time.Second) {
				return
			}
			continue
		default:
			var ok bool
			if term, ok = c.execute(cmd, spec, bins, env, sec); !ok {
				return
			}
		}
		c.w.mu.Lock()
		stopping := c.stopping
		c.w.mu.Unlock()
		if stopping || !c.shouldRestart(term.ExitCode) {
			c.w.mu.Lock()
			c.state = corev1.ContainerState{Terminated: term}
			c.succeeded = c.isInit && term.ExitCode == 0
			c.ready = c.succeeded // kubelet reports a completed init container as ready
			c.w.mu.Unlock()
			c.w.markDirty()
			return
		}
		if term.FinishedAt.Sub(term.StartedAt.Time) > 2*c.w.s.o.BackoffMax {
			crashes = 0 // kubelet forgets the back-off of a container that ran long enough
		}
		crashes++
		delay := c.backoff(crashes)
		c.w.mu.Lock()
		c.last = corev1.ContainerState{Terminated: term}
		c.state = corev1.ContainerState{Terminated: term}
		if delay > 0 {
			pod := c.w.pod
			c.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
				Reason:  "CrashLoopBackOff",
				Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", delay, c.name, pod.Name, pod.Namespace, pod.UID),
			}}
		}
		c.w.mu.Unlock()
		c.w.markDirty()
		if delay > 0 {
			c.w.event(corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container %s in pod %s", c.name, c.w.key)
		}
		if !c.sleep(delay) {
			return
		}
	}
}

func (c *container) shouldRestart(exitCode int32) bool {
	policy := c.w.currentPod().Spec.RestartPolicy
	if c.isInit {
		return exitCode != 0 && policy != corev1.RestartPolicyNever
	}
	switch policy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return exitCode != 0
	}
	return true
}

// mountSpec is one bind mount into the container's mount namespace.
type mountSpec struct {
	src, dst string
	readOnly bool
}

// build assembles the command line: nsenter into the pod's network
// namespace, unshare a private mount and UTS namespace, bind-mount volumes
// and the hosts file, set the hostname, make the root read-only if asked,
// then exec the mapped binary through setpriv with the securityContext's
// identity.
func (c *container) build(spec *corev1.Container, bins imageBinaries) (*exec.Cmd, []string, containerSecurity, error) {
	w := c.w
	pod := w.currentPod()
	var image imageIdentity
	if bins.oci != nil {
		uid, gid, ok, err := bins.oci.user()
		if err != nil {
			return nil, nil, containerSecurity{}, err
		}
		if ok {
			image = imageIdentity{uid: uid, gid: gid}
		}
	}
	sec, err := securityFor(pod, spec, image)
	if err != nil {
		return nil, nil, sec, err
	}
	cmd, env, err := c.buildCommand(pod, spec, bins, sec)
	return cmd, env, sec, err
}

func (c *container) buildCommand(pod *corev1.Pod, spec *corev1.Container, bins imageBinaries, sec containerSecurity) (*exec.Cmd, []string, error) {
	w := c.w
	ec := w.envContext(pod)
	if sec.uid != 0 {
		ec.home = "/"
	}
	workingDir := spec.WorkingDir
	if bins.oci != nil {
		ec.imageEnv = bins.oci.config.Env
		if workingDir == "" {
			workingDir = bins.oci.config.WorkingDir
		}
	}
	envVars, err := containerEnv(spec, ec)
	if err != nil {
		return nil, nil, err
	}
	vars := envMap(envVars)
	command := expandAll(spec.Command, vars)
	args := expandAll(spec.Args, vars)
	var bin string
	var argv []string
	if bins.oci != nil {
		if bin, argv, err = bins.oci.process(command, args, vars["PATH"]); err != nil {
			return nil, nil, err
		}
	} else {
		var rest []string
		bin, rest = bins.commandBinary(command)
		argv = append(append([]string{}, rest...), args...)
	}
	if bins.oci == nil && shells[filepath.Base(bin)] {
		dir := filepath.Dir(bins.entrypoint) // the staged image: its tools by name
		for i := range envVars {
			if envVars[i].Name == "PATH" {
				envVars[i].Value = dir + ":" + envVars[i].Value
			}
		}
	}
	w.s.mu.Lock()
	crash := w.s.crashOnStart[w.key+"/"+c.name]
	w.s.mu.Unlock()
	if crash {
		bin, argv = "/bin/sh", []string{"-c", "echo 'nodesim: crash on start' >&2; exit 1"}
	}

	volumes := map[string]*corev1.Volume{}
	for i := range pod.Spec.Volumes {
		volumes[pod.Spec.Volumes[i].Name] = &pod.Spec.Volumes[i]
	}
	var mounts []mountSpec
	hostsMounted, resolvMounted := false, false
	w.volMu.Lock()
	defer w.volMu.Unlock()
	for _, vm := range spec.VolumeMounts {
		v, ok := volumes[vm.Name]
		if !ok {
			return nil, nil, fmt.Errorf("volume mount %q: no volume of that name", vm.Name)
		}
		src := w.volumes.hostPath(v)
		sub := vm.SubPath
		if vm.SubPathExpr != "" {
			sub = expand(vm.SubPathExpr, vars)
		}
		if sub != "" {
			src = filepath.Join(src, sub)
			if _, err := os.Stat(src); os.IsNotExist(err) {
				if err := os.MkdirAll(src, 0o755); err != nil {
					return nil, nil, fmt.Errorf("creating subPath %s: %w", sub, err)
				}
			}
		}
		switch filepath.Clean(vm.MountPath) {
		case "/etc/hosts":
			hostsMounted = true
		case "/etc/resolv.conf":
			resolvMounted = true
		}
		mounts = append(mounts, mountSpec{src: src, dst: vm.MountPath, readOnly: vm.ReadOnly})
	}
	if !hostsMounted {
		mounts = append(mounts, mountSpec{src: w.hostsFile, dst: "/etc/hosts"})
	}
	if _, ok := resolvConf(pod, ""); ok && !resolvMounted {
		mounts = append(mounts, mountSpec{src: w.resolvConfPath(), dst: "/etc/resolv.conf"})
	}
	// Parents before children, so a mount inside another volume lands on top.
	sort.SliceStable(mounts, func(i, j int) bool {
		return strings.Count(filepath.Clean(mounts[i].dst), "/") < strings.Count(filepath.Clean(mounts[j].dst), "/")
	})
	script, err := c.script(mounts, podHostname(pod), workingDir, sec.readOnlyRoot)
	if err != nil {
		return nil, nil, err
	}
	w.mu.Lock()
	nsPath := w.net.nsPath()
	w.mu.Unlock()
	t := w.s.tools
	full := []string{"--net=" + nsPath, "--", t.unshare, "--mount", "--uts", "--propagation", "private", "--", "/bin/sh", "-c", script}
	full = append(append(append(full, sec.setprivArgs(t.setpriv)...), bin), argv...)
	env := make([]string, 0, len(envVars))
	for _, e := range envVars {
		env = append(env, e.Name+"="+e.Value)
	}
	cmd := exec.Command(t.nsenter, full...)
	cmd.Env = env
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd, env, nil
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func (c *container) script(mounts []mountSpec, hostname, workingDir string, readOnlyRoot bool) (string, error) {
	t := c.w.s.tools
	var b strings.Builder
	b.WriteString("set -e\n")
	for _, m := range mounts {
		fi, err := os.Stat(m.src)
		if err != nil {
			return "", fmt.Errorf("mount source for %s: %w", m.dst, err)
		}
		dst := shellQuote(m.dst)
		if fi.IsDir() {
			fmt.Fprintf(&b, "%s -p %s\n", t.mkdir, dst)
		} else {
			fmt.Fprintf(&b, "%s -p \"$(dirname %s)\"; [ -e %s ] || %s %s\n", t.mkdir, dst, dst, t.touch, dst)
		}
		fmt.Fprintf(&b, "%s --bind %s %s\n", t.mount, shellQuote(m.src), dst)
		if m.readOnly {
			fmt.Fprintf(&b, "%s -o remount,bind,ro %s\n", t.mount, dst)
		}
	}
	fmt.Fprintf(&b, "%s %s\n", t.hostname, shellQuote(hostname))
	if workingDir != "" {
		fmt.Fprintf(&b, "%s -p %s\ncd %s\n", t.mkdir, shellQuote(workingDir), shellQuote(workingDir))
	}
	if readOnlyRoot {
		// Only this namespace's view of /: the volumes are mounts of their own and stay writable.
		fmt.Fprintf(&b, "%s -o remount,bind,ro /\n", t.mount)
	}
	b.WriteString("exec \"$0\" \"$@\"\n")
	return b.String(), nil
}

// execute starts the process and waits for it. ok is false when the
// container was asked to stop before the process could start.
func (c *container) execute(cmd *exec.Cmd, spec *corev1.Container, bins imageBinaries, env []string, sec containerSecurity) (term *corev1.ContainerStateTerminated, ok bool) {
	w := c.w
	logf, err := os.OpenFile(c.logPath(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		now := metav1.Now()
		return &corev1.ContainerStateTerminated{ExitCode: 128, Reason: "StartError", Message: err.Error(), StartedAt: now, FinishedAt: now}, true
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf

	w.mu.Lock()
	if c.stopping {
		w.mu.Unlock()
		return nil, false
	}
	if c.everStarted {
		c.restarts++
	}
	c.everStarted = true
	c.containerID = fmt.Sprintf("nodesim://%s-%s-%d", shortUID(string(w.uid)), c.name, c.restarts)
	c.imageID = bins.id
	startedAt := metav1.Now()
	if err := w.s.spawn(cmd); err != nil {
		w.mu.Unlock()
		return &corev1.ContainerStateTerminated{ExitCode: 128, Reason: "StartError", Message: err.Error(), StartedAt: startedAt, FinishedAt: metav1.Now(), ContainerID: c.containerID}, true
	}
	exited := make(chan struct{})
	c.pid = cmd.Process.Pid
	c.exited = exited
	c.state = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: startedAt}}
	c.runningImage = spec.Image
	c.bins = bins
	c.env = env
	c.sec = sec
	c.started = spec.StartupProbe == nil
	c.ready = spec.ReadinessProbe == nil && c.started && !c.isInit
	w.mu.Unlock()
	w.markDirty()
	w.event(corev1.EventTypeNormal, "Pulled", "Container image %q already present on machine", spec.Image)
	w.event(corev1.EventTypeNormal, "Created", "Created container: %s", c.name)
	w.event(corev1.EventTypeNormal, "Started", "Started container %s", c.name)
	w.log.V(1).Info("container started", "container", c.name, "pid", cmd.Process.Pid, "restarts", c.restarts)

	ctx, cancel := context.WithCancel(w.s.ctx)
	if !c.isInit {
		c.startProbes(ctx, spec)
	}
	waitErr := cmd.Wait()
	cancel()
	finishedAt := metav1.Now()

	w.mu.Lock()
	c.pid = 0
	close(exited)
	c.ready, c.started, c.runningImage, c.killing = false, false, "", false
	w.mu.Unlock()

	code := exitCode(cmd, waitErr)
	reason := "Completed"
	if code != 0 {
		reason = "Error"
	}
	w.log.V(1).Info("container exited", "container", c.name, "exitCode", code)
	return &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, StartedAt: startedAt, FinishedAt: finishedAt, ContainerID: c.containerID}, true
}

// failStart records a container the runtime created and could not start, as kubelet reports
// it: terminated, reason StartError, exit code 128, the runtime's message, and a Failed event.
// nil means the container was asked to stop meanwhile.
func (c *container) failStart(spec *corev1.Container, bins imageBinaries, e *startError) *corev1.ContainerStateTerminated {
	w := c.w
	w.mu.Lock()
	if c.stopping {
		w.mu.Unlock()
		return nil
	}
	if c.everStarted {
		c.restarts++
	}
	c.everStarted = true
	c.containerID = fmt.Sprintf("nodesim://%s-%s-%d", shortUID(string(w.uid)), c.name, c.restarts)
	c.imageID = bins.id
	id := c.containerID
	w.mu.Unlock()
	w.event(corev1.EventTypeNormal, "Created", "Created container: %s", c.name)
	w.event(corev1.EventTypeWarning, "Failed", "Error: %v", e)
	now := metav1.Now()
	return &corev1.ContainerStateTerminated{ExitCode: 128, Reason: "StartError", Message: e.Error(), StartedAt: now, FinishedAt: now, ContainerID: id}
}

func shortUID(uid string) string {
	if len(uid) > 8 {
		return uid[:8]
	}
	return uid
}

// exitCode follows container runtimes: a signal-killed process exits 128+signal.
func exitCode(cmd *exec.Cmd, err error) int32 {
	if cmd.ProcessState == nil {
		return 128
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return int32(128 + int(ws.Signal()))
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return 128
	}
	return int32(cmd.ProcessState.ExitCode())
}

// stop terminates the container for good: SIGTERM, up to grace, SIGKILL to
// the whole process group. It returns once the restart loop has ended.
func (c *container) stop(grace time.Duration) {
	c.w.mu.Lock()
	if !c.stopping {
		c.stopping = true
		close(c.stopCh)
	}
	pid, exited, runStarted := c.pid, c.exited, c.runStarted
	c.w.mu.Unlock()
	if pid != 0 {
		c.w.event(corev1.EventTypeNormal, "Killing", "Stopping container %s", c.name)
		c.signalAndWait(pid, exited, grace)
	}
	if runStarted {
		<-c.done
	}
}

func (c *container) signalAndWait(pid int, exited chan struct{}, grace time.Duration) {
	if grace > 0 {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-exited:
		case <-t.C:
		case <-c.w.hurry: // the simulator is stopping: no grace left
		}
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}

// killForRestart stops the current process the way kubelet does for a
// failed liveness probe or a changed spec; the restart loop starts it again.
func (c *container) killForRestart(grace time.Duration, reason, msg string) {
	c.w.mu.Lock()
	if c.killing || c.pid == 0 {
		c.w.mu.Unlock()
		return
	}
	c.killing = true
	pid, exited := c.pid, c.exited
	c.w.mu.Unlock()
	c.w.log.Info("killing container", "container", c.name, "reason", reason, "message", msg)
	c.w.event(corev1.EventTypeNormal, "Killing", "Container %s %s, will be restarted", c.name, msg)
	c.signalAndWait(pid, exited, grace)
}

// signalGroup sends sig to the container's process group (faults).
func (c *container) signalGroup(sig syscall.Signal) error {
	c.w.mu.Lock()
	pid := c.pid
	c.w.mu.Unlock()
	if pid == 0 {
		return fmt.Errorf("container %s is not running", c.name)
	}
	if err := syscall.Kill(-pid, sig); err != nil {
		return fmt.Errorf("signalling container %s: %w", c.name, err)
	}
	return nil
}
