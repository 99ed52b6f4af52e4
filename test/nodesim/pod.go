package nodesim

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// podWorker runs one pod (by UID) from sandbox creation to finalised deletion.
type podWorker struct {
	s   *Simulator
	uid types.UID
	key string // namespace/name
	log logr.Logger
	dir string

	mu         sync.Mutex
	pod        *corev1.Pod // latest seen
	net        *podNetwork
	hostsFile  string
	startTime  metav1.Time
	init       []*container
	containers []*container
	sandboxErr string // why the sandbox or volumes are not ready yet
	conditions map[corev1.PodConditionType]corev1.PodCondition
	terminal   corev1.PodPhase // set once containers were stopped for deletion
	removed    bool            // the pod left the API
	abandoned  bool            // the simulator is stopping

	updates     chan struct{} // pod object changed or removed
	statusDirty chan struct{}
	stopCh      chan struct{} // closed when the pod must stop (deletion, removal, Stop)
	stopOnce    sync.Once
	hurry       chan struct{} // closed by abandon: cut any grace period short
	hurryOnce   sync.Once

	// volMu serialises volume syncs (start and the resync loop both sync).
	volMu      sync.Mutex
	volumes    *volumeBuilder // immutable pointer; its fields are guarded by volMu
	volEnabled bool           // the sandbox exists, volumes may be rendered
}

func newPodWorker(s *Simulator, pod *corev1.Pod) *podWorker {
	key := pod.Namespace + "/" + pod.Name
	w := &podWorker{
		s:           s,
		uid:         pod.UID,
		key:         key,
		log:         s.log.WithValues("pod", key, "uid", pod.UID),
		dir:         filepath.Join(s.o.WorkDir, "pods", fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID)),
		pod:         pod.DeepCopy(),
		conditions:  map[corev1.PodConditionType]corev1.PodCondition{},
		updates:     make(chan struct{}, 1),
		statusDirty: make(chan struct{}, 1),
		stopCh:      make(chan struct{}),
		hurry:       make(chan struct{}),
	}
	w.hostsFile = filepath.Join(w.dir, "etc-hosts")
	w.volumes = &volumeBuilder{
		namespace:   pod.Namespace,
		tokens:      apiTokenSource{create: s.createToken},
		podDir:      w.dir,
		claimVolume: s.claimVolume,
	}
	for i := range pod.Spec.InitContainers {
		w.init = append(w.init, newContainer(w, pod.Spec.InitContainers[i].Name, true))
	}
	for i := range pod.Spec.Containers {
		w.containers = append(w.containers, newContainer(w, pod.Spec.Containers[i].Name, false))
	}
	return w
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (w *podWorker) update(pod *corev1.Pod) {
	w.mu.Lock()
	w.pod = pod.DeepCopy()
	w.mu.Unlock()
	signal(w.updates)
}

func (w *podWorker) removedFromAPI() {
	w.mu.Lock()
	w.removed = true
	w.mu.Unlock()
	signal(w.updates)
}

// abandon stops the pod without touching the API: the simulator is going away.
func (w *podWorker) abandon() {
	w.mu.Lock()
	w.abandoned = true
	w.mu.Unlock()
	w.hurryOnce.Do(func() { close(w.hurry) })
	signal(w.updates)
}

func (w *podWorker) currentPod() *corev1.Pod {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pod
}

func (w *podWorker) resolvConfPath() string { return filepath.Join(w.dir, "resolv.conf") }

func (w *podWorker) markDirty() { signal(w.statusDirty) }

func (w *podWorker) stopping() <-chan struct{} { return w.stopCh }

func (w *podWorker) requestStop() { w.stopOnce.Do(func() { close(w.stopCh) }) }

// containerSpec returns the latest spec of a container (images can change in place).
func (w *podWorker) containerSpec(name string, init bool) *corev1.Container {
	pod := w.currentPod()
	list := pod.Spec.Containers
	if init {
		list = pod.Spec.InitContainers
	}
	for i := range list {
		if list[i].Name == name {
			return list[i].DeepCopy()
		}
	}
	return nil
}

// run is the worker's life: sandbox, volumes, init containers, containers,
// then termination when the pod is deleted.
func (w *podWorker) run() {
	statusDone := make(chan struct{})
	go func() {
		defer close(statusDone)
		w.statusLoop()
	}()
	w.mu.Lock()
	w.startTime = metav1.Now()
	w.mu.Unlock()
	w.markDirty()

	started := make(chan struct{})
	go func() {
		defer close(started)
		w.start()
	}()

	grace := w.watchForStop()
	// Stop containers first: start may be blocked on an init container,
	// and containers it launches after this see they are stopping.
	w.terminate(grace)
	<-started
	w.requestStop()
	<-statusDone
	w.finish()
}

// watchForStop blocks until the pod is deleted, removed or abandoned, and
// returns the grace period to give the containers.
func (w *podWorker) watchForStop() time.Duration {
	resync := time.NewTicker(w.s.o.VolumeSyncPeriod)
	defer resync.Stop()
	for {
		w.mu.Lock()
		pod, removed, abandoned := w.pod, w.removed, w.abandoned
		w.mu.Unlock()
		switch {
		case abandoned:
			w.requestStop()
			return 0
		case removed:
			w.requestStop()
			return podGrace(pod)
		case pod.DeletionTimestamp != nil:
			w.requestStop()
			return podGrace(pod)
		}
		w.restartChangedImages(pod)
		select {
		case <-w.updates:
			w.syncVolumes()
			w.updateDNS()
		case <-resync.C:
			w.syncVolumes()
		}
	}
}

func podGrace(pod *corev1.Pod) time.Duration {
	switch {
	case pod.DeletionGracePeriodSeconds != nil:
		return time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return 30 * time.Second
}

// start creates the sandbox and runs the containers; it returns once the
// regular containers' runners are launched or the pod is stopping.
func (w *podWorker) start() {
	if pod := w.currentPod(); pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		// Found already deleted or finished (e.g. after a simulator restart): nothing to run.
		return
	}
	if err := os.MkdirAll(filepath.Join(w.dir, "logs"), 0o755); err != nil {
		w.setSandboxErr(fmt.Sprintf("creating pod dir: %v", err))
		return
	}
	for attempt := 0; ; attempt++ {
		pn, err := w.s.network.addPod()
		if err == nil {
			w.mu.Lock()
			w.net = pn
			w.mu.Unlock()
			break
		}
		w.log.Error(err, "creating pod sandbox")
		w.setSandboxErr(fmt.Sprintf("failed to create pod sandbox: %v", err))
		if !w.sleep(time.Second) {
			return
		}
	}
	if err := rewriteInPlace(w.hostsFile, nil); err != nil {
		w.setSandboxErr(err.Error())
		return
	}
	if content, ok := resolvConf(w.currentPod(), w.s.network.GatewayIP()); ok {
		if err := os.WriteFile(w.resolvConfPath(), []byte(content), 0o644); err != nil {
			w.setSandboxErr(fmt.Sprintf("writing resolv.conf: %v", err))
			return
		}
	}
	w.updateDNS()
	w.setSandboxErr("")

	w.volMu.Lock()
	w.volEnabled = true
	w.volMu.Unlock()
	for !w.syncVolumes() {
		if !w.sleep(time.Second) {
			return
		}
	}
	for _, c := range w.init {
		if !c.runToCompletion() {
			return
		}
	}
	for _, c := range w.containers {
		go c.run()
	}
}

// sleep waits d, returning false if the pod is stopping meanwhile.
func (w *podWorker) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-w.stopCh:
		return false
	}
}

// sandboxErrChanged reports whether msg is new, to record an event once per change.
func (w *podWorker) sandboxErrChanged(msg string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sandboxErr != msg
}

func (w *podWorker) setSandboxErr(msg string) {
	w.mu.Lock()
	changed := w.sandboxErr != msg
	w.sandboxErr = msg
	w.mu.Unlock()
	if changed {
		w.markDirty()
	}
}

func (w *podWorker) envContext(pod *corev1.Pod) envContext {
	w.mu.Lock()
	defer w.mu.Unlock()
	ec := envContext{
		pod:           pod,
		hostIP:        w.s.network.GatewayIP(),
		hostname:      podHostname(pod),
		apiServerHost: w.s.o.APIServerHost,
		apiServerPort: w.s.o.APIServerPort,
		objects:       w.s,
	}
	if w.net != nil {
		ec.podIP = w.net.ip.String()
	}
	return ec
}

func podHostname(pod *corev1.Pod) string {
	h := pod.Spec.Hostname
	if h == "" {
		h = pod.Name
	}
	if len(h) > 63 {
		h = h[:63]
	}
	return h
}

// syncVolumes (re)renders the volumes; it reports whether all are in place.
func (w *podWorker) syncVolumes() bool {
	w.volMu.Lock()
	defer w.volMu.Unlock()
	if !w.volEnabled {
		return false
	}
	pod := w.currentPod()
	w.volumes.pod = pod
	w.volumes.ec = w.envContext(pod)
	ctx, cancel := context.WithTimeout(w.s.ctx, 30*time.Second)
	defer cancel()
	if err := w.volumes.sync(ctx); err != nil {
		msg := fmt.Sprintf("MountVolume.SetUp failed: %v", err)
		if w.sandboxErrChanged(msg) {
			w.event(corev1.EventTypeWarning, "FailedMount", "%s", msg)
		}
		w.setSandboxErr(msg)
		return false
	}
	w.setSandboxErr("")
	return true
}

// updateDNS publishes this pod's address and readiness to the hosts files.
func (w *podWorker) updateDNS() {
	w.mu.Lock()
	if w.net == nil || w.hostsFile == "" {
		w.mu.Unlock()
		return
	}
	pod := w.pod
	ready := w.conditions[corev1.PodReady].Status == corev1.ConditionTrue
	p := dnsPod{
		namespace: pod.Namespace,
		hostname:  podHostname(pod),
		subdomain: pod.Spec.Subdomain,
		labels:    pod.Labels,
		ip:        w.net.ip.String(),
		ready:     ready,
		hostsFile: w.hostsFile,
	}
	w.mu.Unlock()
	w.s.dns.set(w.uid, p)
	w.s.refreshDNS()
}

// restartChangedImages restarts a container whose image was changed in the
// pod spec, as kubelet does when a container's spec hash changes.
func (w *podWorker) restartChangedImages(pod *corev1.Pod) {
	for _, c := range w.containers {
		spec := w.containerSpec(c.name, false)
		w.mu.Lock()
		running := c.runningImage
		w.mu.Unlock()
		if spec != nil && running != "" && spec.Image != running {
			w.log.Info("container image changed, restarting", "container", c.name, "image", spec.Image)
			go c.killForRestart(podGrace(pod), "Killing", "container image changed")
		}
	}
}

// terminate stops all containers in parallel within the grace period.
func (w *podWorker) terminate(grace time.Duration) {
	var wg sync.WaitGroup
	for _, c := range append(append([]*container{}, w.init...), w.containers...) {
		wg.Add(1)
		go func(c *container) {
			defer wg.Done()
			c.stop(grace)
		}(c)
	}
	wg.Wait()
	w.mu.Lock()
	phase := corev1.PodSucceeded
	for _, c := range w.containers {
		if t := c.state.Terminated; t == nil || t.ExitCode != 0 {
			phase = corev1.PodFailed
		}
	}
	w.terminal = phase
	w.mu.Unlock()
}

// finish tears the sandbox down and, for a deleted pod, finalises the deletion.
func (w *podWorker) finish() {
	w.mu.Lock()
	pn, removed, abandoned, pod := w.net, w.removed, w.abandoned, w.pod
	w.mu.Unlock()
	w.s.dns.remove(w.uid)
	w.s.refreshDNS()
	if pn != nil {
		if err := w.s.network.removePod(pn); err != nil {
			w.log.Error(err, "removing pod network")
		}
	}
	_ = os.RemoveAll(filepath.Join(w.dir, "volumes"))
	if removed || abandoned || pod.DeletionTimestamp == nil {
		return
	}
	// kubelet's final step: delete with grace 0, guarded by the UID so a
	// recreated pod of the same name is never hit.
	zero := int64(0)
	uid := w.uid
	err := w.s.client.CoreV1().Pods(pod.Namespace).Delete(w.s.ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero,
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		w.log.Error(err, "finalising pod deletion")
		return
	}
	w.log.V(1).Info("pod deletion finalised")
}

// Kubernetes API helpers used by workers.

func (s *Simulator) createToken(ctx context.Context, namespace, sa string, tr *authTokenRequest) (*authTokenRequest, error) {
	return s.client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, sa, tr, metav1.CreateOptions{})
}
