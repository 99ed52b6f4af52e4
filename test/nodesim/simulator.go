package nodesim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
)

// Options configure a Simulator.
type Options struct {
	// NodeName is the Node this simulator registers and serves. Default "nodesim".
	NodeName string
	// Client talks to kube-apiserver with rights to read pods, secrets,
	// configmaps, services and PVCs, write pod status, bind and delete pods,
	// request service account tokens, and manage its Node and Lease.
	Client kubernetes.Interface
	// Network is the bridge pods are plugged into (SetupNetwork). Required.
	Network *Network
	// BinDir holds the binaries images map to. Default $ETCD_CONDUCTOR_BIN_DIR,
	// else <repo root>/bin.
	BinDir string
	// Images maps extra image references ("repo:tag", or "repo" for any tag)
	// to host binaries; they win over the built-in etcd and etcd-conductor rules.
	Images map[string]string
	// OCIImages maps image references ("repo:tag", or "repo" for any tag) to OCI archives or
	// layout directories (make image's bin/etcd-conductor-image.tar): such an image runs from
	// its unpacked layers by its config's rules (ociimage.go). An exact reference here or in
	// Images wins over a repository in either.
	OCIImages map[string]string
	// APIServerHost and APIServerPort are handed to containers as
	// KUBERNETES_SERVICE_HOST/PORT. Empty host: the variables are not set.
	APIServerHost string
	APIServerPort int
	// BackoffBase and BackoffMax shape CrashLoopBackOff and ImagePullBackOff
	// (kubelet: 10s doubling up to 5m).
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// VolumeSyncPeriod is how often secret, configMap, downwardAPI and
	// projected volumes are refreshed. Default 5s.
	VolumeSyncPeriod time.Duration
	// Log receives the simulator's logs.
	Log logr.Logger
	// WorkDir holds pod directories (volumes, logs, hosts files). Default: a
	// temporary directory removed by Stop.
	WorkDir string
	// DataDir holds PersistentVolumeClaim directories,
	// <DataDir>/<namespace>/<claim>-<claim UID>; they outlive pods, not
	// claims. Default <WorkDir>/pvc.
	DataDir string
	// KeepData keeps DataDir on Stop.
	KeepData bool
	// DisableScheduling stops the simulator from binding unscheduled pods
	// (schedulerName default-scheduler) to its node.
	DisableScheduling bool
	// ControlAddr, if set, serves the fault HTTP endpoint there (127.0.0.1 only).
	ControlAddr string
}

// Simulator plays the kubelet (and, optionally, the scheduler) of one Node.
type Simulator struct {
	o       Options
	log     logr.Logger
	client  kubernetes.Interface
	network *Network
	images  imageResolver
	stage   *binaryStage
	dns     *dns

	ctx    context.Context
	cancel context.CancelFunc

	factory    informers.SharedInformerFactory
	pods       corelisters.PodLister
	services   corelisters.ServiceLister
	secrets    corelisters.SecretLister
	configMaps corelisters.ConfigMapLister

	tools   hostTools
	spawnCh chan spawnRequest
	ownsDir bool

	mu           sync.Mutex
	workers      map[types.UID]*podWorker
	byName       map[string]*podWorker
	binding      map[types.UID]bool
	crashOnStart map[string]bool // namespace/name/container
	stopped      bool

	dnsConn     net.PacketConn
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
	wg          sync.WaitGroup // background loops other than pod workers
	workWG      sync.WaitGroup // pod workers
	control     *http.Server
}

// hostTools are the absolute paths of host programs used to build containers.
type hostTools struct {
	nsenter, unshare, mount, mkdir, touch, hostname, setpriv string
}

func lookTools() (hostTools, error) {
	var t hostTools
	for name, dst := range map[string]*string{"nsenter": &t.nsenter, "unshare": &t.unshare, "mount": &t.mount, "mkdir": &t.mkdir, "touch": &t.touch, "hostname": &t.hostname, "setpriv": &t.setpriv} {
		p, err := exec.LookPath(name)
		if err != nil {
			return t, fmt.Errorf("nodesim needs %s on the host: %w", name, err)
		}
		*dst = p
	}
	for _, name := range []string{"ip", "iptables"} {
		if _, err := exec.LookPath(name); err != nil {
			return t, fmt.Errorf("nodesim needs %s on the host: %w", name, err)
		}
	}
	return t, nil
}

// Start registers the Node and begins running the pods bound to it.
func Start(ctx context.Context, o Options) (*Simulator, error) {
	if o.Client == nil || o.Network == nil {
		return nil, errors.New("nodesim: Options.Client and Options.Network are required")
	}
	if o.NodeName == "" {
		o.NodeName = "nodesim"
	}
	if o.BackoffBase <= 0 {
		o.BackoffBase = 10 * time.Second
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = 5 * time.Minute
	}
	if o.VolumeSyncPeriod <= 0 {
		o.VolumeSyncPeriod = 5 * time.Second
	}
	if o.BinDir == "" {
		dir, err := etcdtest.BinDir()
		if err != nil {
			return nil, err
		}
		o.BinDir = dir
	}
	tools, err := lookTools()
	if err != nil {
		return nil, err
	}
	s := &Simulator{
		o:            o,
		log:          o.Log.WithValues("node", o.NodeName),
		client:       o.Client,
		network:      o.Network,
		images:       imageResolver{binDir: o.BinDir, extra: o.Images, oci: o.OCIImages},
		tools:        tools,
		spawnCh:      make(chan spawnRequest),
		workers:      map[types.UID]*podWorker{},
		byName:       map[string]*podWorker{},
		binding:      map[types.UID]bool{},
		crashOnStart: map[string]bool{},
	}
	if s.o.WorkDir == "" {
		dir, err := os.MkdirTemp("", "nodesim-")
		if err != nil {
			return nil, fmt.Errorf("creating work dir: %w", err)
		}
		s.o.WorkDir, s.ownsDir = dir, true
	}
	if s.o.DataDir == "" {
		s.o.DataDir = filepath.Join(s.o.WorkDir, "pvc")
	}
	for _, d := range []string{s.o.WorkDir, s.o.DataDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("creating %s: %w", d, err)
		}
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	go s.spawnLoop()

	s.factory = informers.NewSharedInformerFactory(s.client, 0)
	podInformer := s.factory.Core().V1().Pods()
	s.pods = podInformer.Lister()
	s.services = s.factory.Core().V1().Services().Lister()
	s.secrets = s.factory.Core().V1().Secrets().Lister()
	s.configMaps = s.factory.Core().V1().ConfigMaps().Lister()
	s.dns = newDNS(func() []*corev1.Service {
		svcs, _ := s.services.List(labels.Everything())
		return svcs
	})
	if _, err := s.factory.Core().V1().Services().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.refreshDNS() },
		UpdateFunc: func(any, any) { s.refreshDNS() },
		DeleteFunc: func(any) { s.refreshDNS() },
	}); err != nil {
		s.cancel()
		return nil, fmt.Errorf("watching services: %w", err)
	}
	if err := s.registerNode(ctx); err != nil {
		s.cancel()
		close(s.spawnCh)
		return nil, err
	}
	if s.stage, err = newBinaryStage(); err != nil {
		_ = s.Stop()
		return nil, err
	}
	// Beside the staged binaries: world-traversable, so a non-root container execs from there.
	s.images.store = newOCIStore(s.stage.dir)
	if err := s.serveDNS(); err != nil {
		_ = s.Stop()
		return nil, err
	}
	if _, err := s.factory.Core().V1().PersistentVolumeClaims().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { s.claimUpdated(obj.(*corev1.PersistentVolumeClaim)) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if pvc, ok := obj.(*corev1.PersistentVolumeClaim); ok {
				s.claimDeleted(pvc)
			}
		},
	}); err != nil {
		_ = s.Stop()
		return nil, fmt.Errorf("watching claims: %w", err)
	}
	s.startEvents()
	s.factory.Start(s.ctx.Done())
	synced := s.factory.WaitForCacheSync(ctx.Done())
	for typ, ok := range synced {
		if !ok {
			_ = s.Stop()
			return nil, fmt.Errorf("nodesim: cache for %v did not sync", typ)
		}
	}
	if _, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.podChanged(obj.(*corev1.Pod)) },
		UpdateFunc: func(_, obj any) { s.podChanged(obj.(*corev1.Pod)) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				s.podRemoved(pod)
			}
		},
	}); err != nil {
		_ = s.Stop()
		return nil, fmt.Errorf("watching pods: %w", err)
	}
	s.wg.Add(1)
	go s.heartbeatLoop()
	if o.ControlAddr != "" {
		if err := s.serveControl(o.ControlAddr); err != nil {
			_ = s.Stop()
			return nil, err
		}
	}
	s.log.Info("node simulator started", "network", s.network.Name(), "workDir", s.o.WorkDir)
	return s, nil
}

// NodeName is the name of the simulated Node.
func (s *Simulator) NodeName() string { return s.o.NodeName }

// WorkDir is where pod directories live.
func (s *Simulator) WorkDir() string { return s.o.WorkDir }

// Stop kills every container (SIGKILL), removes pod namespaces and the work
// directory. The Network is not torn down: it was passed in.
func (s *Simulator) Stop() error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil
	}
	s.stopped = true
	workers := make([]*podWorker, 0, len(s.workers))
	for _, w := range s.workers {
		workers = append(workers, w)
	}
	s.mu.Unlock()
	if s.control != nil {
		_ = s.control.Close()
	}
	for _, w := range workers {
		w.abandon()
	}
	s.workWG.Wait()
	if s.dnsConn != nil {
		_ = s.dnsConn.Close()
	}
	s.cancel()
	s.wg.Wait()
	s.factory.Shutdown()
	if s.broadcaster != nil {
		s.broadcaster.Shutdown()
	}
	close(s.spawnCh)
	var errs []error
	if s.stage != nil {
		errs = append(errs, removeAllRetry(s.stage.dir))
	}
	if s.ownsDir {
		errs = append(errs, removeAllRetry(s.o.WorkDir))
	} else if !s.o.KeepData {
		errs = append(errs, removeAllRetry(s.o.DataDir))
	}
	if s.o.KeepData && s.ownsDir {
		// The data dir was under our temporary work dir; it went with it.
		s.log.Info("KeepData set but the work dir was temporary; set WorkDir or DataDir to keep data")
	}
	return errors.Join(errs...)
}

func removeAllRetry(dir string) error {
	var err error
	for i := 0; i < 5; i++ {
		if err = os.RemoveAll(dir); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("removing %s: %w", dir, err)
}

// spawnRequest asks the spawn loop to start a process.
type spawnRequest struct {
	cmd *exec.Cmd
	err chan error
}

// spawnLoop starts every container process from one locked OS thread:
// Pdeathsig fires when the *thread* that forked the child exits, and the Go
// runtime may retire ordinary threads. The thread ends (killing stragglers)
// only when Stop closes the channel.
func (s *Simulator) spawnLoop() {
	runtime.LockOSThread()
	for r := range s.spawnCh {
		r.err <- r.cmd.Start()
	}
}

func (s *Simulator) spawn(cmd *exec.Cmd) error {
	r := spawnRequest{cmd: cmd, err: make(chan error, 1)}
	select {
	case s.spawnCh <- r:
	case <-s.ctx.Done():
		return errors.New("simulator stopped")
	}
	return <-r.err
}

// podChanged routes pod events: ours go to their worker, unscheduled ones may get bound.
func (s *Simulator) podChanged(pod *corev1.Pod) {
	if pod.Spec.NodeName == "" {
		s.maybeBind(pod)
		return
	}
	if pod.Spec.NodeName != s.o.NodeName {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	if w, ok := s.workers[pod.UID]; ok {
		w.update(pod)
		return
	}
	terminal := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
	if terminal && pod.DeletionTimestamp == nil {
		return
	}
	w := newPodWorker(s, pod)
	s.workers[pod.UID] = w
	s.byName[w.key] = w
	s.workWG.Add(1)
	go func() {
		defer s.workWG.Done()
		w.run()
		s.mu.Lock()
		delete(s.workers, pod.UID)
		if s.byName[w.key] == w {
			delete(s.byName, w.key)
		}
		s.mu.Unlock()
	}()
}

// podRemoved handles a pod that left the API without our finalising it
// (force deletion): its containers are killed as kubelet's housekeeping would.
func (s *Simulator) podRemoved(pod *corev1.Pod) {
	s.mu.Lock()
	w := s.workers[pod.UID]
	s.mu.Unlock()
	if w != nil {
		w.removedFromAPI()
	}
}

func (s *Simulator) maybeBind(pod *corev1.Pod) {
	if s.o.DisableScheduling || pod.DeletionTimestamp != nil {
		return
	}
	if pod.Spec.SchedulerName != "" && pod.Spec.SchedulerName != corev1.DefaultSchedulerName {
		return
	}
	s.mu.Lock()
	if s.binding[pod.UID] || s.stopped {
		s.mu.Unlock()
		return
	}
	s.binding[pod.UID] = true
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		b := &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: s.o.NodeName},
		}
		err := s.client.CoreV1().Pods(pod.Namespace).Bind(s.ctx, b, metav1.CreateOptions{})
		if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			s.log.Error(err, "binding pod", "pod", pod.Namespace+"/"+pod.Name)
			s.mu.Lock()
			delete(s.binding, pod.UID)
			s.mu.Unlock()
			return
		}
		s.log.V(1).Info("bound pod", "pod", pod.Namespace+"/"+pod.Name)
	}()
}

func (s *Simulator) refreshDNS() {
	if err := s.dns.refresh(); err != nil {
		s.log.Error(err, "refreshing hosts files")
	}
}

// Resolve answers what cluster DNS would for name (pod and Service names of
// this simulator's pods), so host processes can reach pods by name.
func (s *Simulator) Resolve(name string) []string { return s.dns.resolve(name) }

// DialContext dials addr, resolving cluster names through Resolve first; use
// it as a client's dialer on the host (e.g. grpc.WithContextDialer).
func (s *Simulator) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if ips := s.Resolve(host); len(ips) > 0 {
		addr = net.JoinHostPort(ips[0], port)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// objects implementation backed by informer caches.
func (s *Simulator) secret(ns, name string) (*corev1.Secret, error) {
	return s.secrets.Secrets(ns).Get(name)
}

func (s *Simulator) configMap(ns, name string) (*corev1.ConfigMap, error) {
	return s.configMaps.ConfigMaps(ns).Get(name)
}

// registerNode creates or refreshes our Node, as kubelet does on start.
func (s *Simulator) registerNode(ctx context.Context) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: s.o.NodeName,
		Labels: map[string]string{
			"kubernetes.io/hostname": s.o.NodeName,
			"kubernetes.io/os":       "linux",
			"kubernetes.io/arch":     runtime.GOARCH,
			"nodesim.etcd-conductor": "true",
		},
	}}
	_, err := s.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("registering node %s: %w", s.o.NodeName, err)
	}
	if err := s.updateNodeStatus(ctx); err != nil {
		return err
	}
	return s.renewLease(ctx)
}

func (s *Simulator) updateNodeStatus(ctx context.Context) error {
	node, err := s.client.CoreV1().Nodes().Get(ctx, s.o.NodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading node %s: %w", s.o.NodeName, err)
	}
	now := metav1.Now()
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("16"),
		corev1.ResourceMemory:           resource.MustParse("64Gi"),
		corev1.ResourcePods:             resource.MustParse("250"),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	}
	cond := func(t corev1.NodeConditionType, st corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		c := corev1.NodeCondition{Type: t, Status: st, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
		for _, old := range node.Status.Conditions {
			if old.Type == t && old.Status == st {
				c.LastTransitionTime = old.LastTransitionTime
			}
		}
		return c
	}
	node.Status.Capacity = capacity
	node.Status.Allocatable = capacity
	node.Status.Conditions = []corev1.NodeCondition{
		cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
		cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
		cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
		cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "nodesim is posting ready status"),
	}
	node.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: s.network.GatewayIP()},
		{Type: corev1.NodeHostName, Address: s.o.NodeName},
	}
	node.Status.NodeInfo = corev1.NodeSystemInfo{
		KubeletVersion:          "v1.36.4-nodesim",
		OperatingSystem:         "linux",
		Architecture:            runtime.GOARCH,
		ContainerRuntimeVersion: "nodesim://1",
		OSImage:                 "nodesim",
	}
	if _, err := s.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating node %s status: %w", s.o.NodeName, err)
	}
	return nil
}

const leaseNamespace = "kube-node-lease"

func (s *Simulator) renewLease(ctx context.Context) error {
	leases := s.client.CoordinationV1().Leases(leaseNamespace)
	now := metav1.NewMicroTime(time.Now())
	duration := int32(40)
	lease, err := leases.Get(ctx, s.o.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		node, nerr := s.client.CoreV1().Nodes().Get(ctx, s.o.NodeName, metav1.GetOptions{})
		if nerr != nil {
			return fmt.Errorf("reading node for lease owner: %w", nerr)
		}
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Name: s.o.NodeName, Namespace: leaseNamespace,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}},
			},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &s.o.NodeName, LeaseDurationSeconds: &duration, RenewTime: &now},
		}
		if _, err := leases.Create(ctx, lease, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating node lease: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading node lease: %w", err)
	}
	lease.Spec.HolderIdentity = &s.o.NodeName
	lease.Spec.LeaseDurationSeconds = &duration
	lease.Spec.RenewTime = &now
	if _, err := leases.Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("renewing node lease: %w", err)
	}
	return nil
}

// heartbeatLoop renews the Lease every 10s and reposts node status every
// minute, the kubelet defaults the node-lifecycle controller expects.
func (s *Simulator) heartbeatLoop() {
	defer s.wg.Done()
	lease := time.NewTicker(10 * time.Second)
	defer lease.Stop()
	status := time.NewTicker(time.Minute)
	defer status.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-lease.C:
			if err := s.renewLease(s.ctx); err != nil && s.ctx.Err() == nil {
				s.log.Error(err, "renewing lease")
			}
		case <-status.C:
			if err := s.updateNodeStatus(s.ctx); err != nil && s.ctx.Err() == nil {
				s.log.Error(err, "updating node status")
			}
		}
	}
}

// worker finds the current worker for "namespace/name".
func (s *Simulator) worker(pod string) (*podWorker, error) {
	if !strings.Contains(pod, "/") {
		return nil, fmt.Errorf("pod %q: want namespace/name", pod)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.byName[pod]
	if !ok {
		return nil, fmt.Errorf("pod %s is not running on node %s", pod, s.o.NodeName)
	}
	return w, nil
}
