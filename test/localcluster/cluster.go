// Package localcluster runs a real Kubernetes control plane on this machine:
// etcd, kube-apiserver and kube-controller-manager, no kubelet and no
// scheduler. Tests, the demo and benchmarks use it to exercise the real
// StatefulSet controller; the node simulator plays the kubelet.
package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
	"github.com/etcd-conductor/etcd-conductor/internal/operator"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster/proc"
	"github.com/etcd-conductor/etcd-conductor/tls/testpki"
)

// startupTimeout bounds Start when the caller's context has no deadline.
// Cold starts take 3–6 s; the machine is shared with parallel compiles.
const startupTimeout = 3 * time.Minute

// DefaultServiceCIDR holds ~250 ClusterIPs; a fleet benchmark asks for a wider range
// (Options.ServiceCIDR). It must not overlap the node simulator's pod subnets (10.213.x.0/24).
const DefaultServiceCIDR = "10.0.0.0/24"

const (
	saIssuer         = "https://kubernetes.default.svc.cluster.local"
	logTailBytes     = 3000
	pollInterval     = 200 * time.Millisecond
	processesFile    = "processes.json"
	adminKubeconfig  = "kubeconfig"
	kcmKubeconfig    = "controller-manager.kubeconfig"
	adminCommonName  = "localcluster-admin"
	kcmCommonName    = "system:kube-controller-manager"
	clusterCommonCA  = "localcluster-ca"
	mastersGroupName = "system:masters"
)

// Cluster is a running control plane. Stop it with Stop (or use StartForTest).
type Cluster struct {
	opts    Options
	workDir string

	paths     paths
	etcdURL   string
	apiPort   int
	restCfg   *rest.Config
	clientset kubernetes.Interface
	client    client.Client

	mu       sync.Mutex
	etcd     *proc.Process
	api      *proc.Process
	kcm      *proc.Process
	kcmGates string
	stopped  bool
}

// paths are the files the processes are configured with, all under WorkDir.
type paths struct {
	pki, logs, etcdData, apiCertDir, kcmCertDir, flexVolume, cache, home string
	caCert, apiCert, apiKey, saKey                                       string
	adminKubeconfig, kcmKubeconfig                                       string
}

func newPaths(workDir string) paths {
	pki := filepath.Join(workDir, "pki")
	return paths{
		pki:             pki,
		logs:            filepath.Join(workDir, "logs"),
		etcdData:        filepath.Join(workDir, "etcd"),
		apiCertDir:      filepath.Join(workDir, "kube-apiserver"),
		kcmCertDir:      filepath.Join(workDir, "kube-controller-manager", "certs"),
		flexVolume:      filepath.Join(workDir, "kube-controller-manager", "flexvolume"),
		cache:           filepath.Join(workDir, "cache"),
		home:            filepath.Join(workDir, "home"),
		caCert:          filepath.Join(pki, "ca.crt"),
		apiCert:         filepath.Join(pki, "apiserver.crt"),
		apiKey:          filepath.Join(pki, "apiserver.key"),
		saKey:           filepath.Join(pki, "service-account.key"),
		adminKubeconfig: filepath.Join(workDir, adminKubeconfig),
		kcmKubeconfig:   filepath.Join(workDir, kcmKubeconfig),
	}
}

// Start brings up etcd, kube-apiserver and (unless NoControllerManager)
// kube-controller-manager and returns once /readyz answers exactly "ok", the
// CRDs asked for are served, and the `default` ServiceAccount exists (pods
// are admitted only then). ctx bounds the startup only; the
// processes run until Stop. On error everything started is stopped again.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	workDir, err := prepareWorkDir(o.WorkDir)
	if err != nil {
		return nil, err
	}
	ctx, cancel := withStartupTimeout(ctx)
	defer cancel()
	for attempt := 1; ; attempt++ {
		c := &Cluster{opts: o, workDir: workDir, paths: newPaths(workDir), kcmGates: o.FeatureGates}
		err := c.start(ctx)
		if err == nil {
			return c, nil
		}
		if stopErr := c.stopProcesses(); stopErr != nil {
			return nil, errors.Join(err, stopErr)
		}
		// Ports are picked free and bound later by the child; another test
		// may take one in between. Such a loss is worth another try.
		if attempt < maxStartAttempts && strings.Contains(err.Error(), "address already in use") && ctx.Err() == nil {
			fmt.Fprintf(o.Log, "localcluster: port taken during startup, retrying: %v\n", firstLine(err))
			if err := emptyDir(workDir); err != nil {
				return nil, err
			}
			continue
		}
		if !o.KeepWorkDir {
			if rmErr := os.RemoveAll(workDir); rmErr != nil {
				err = errors.Join(err, fmt.Errorf("remove work dir: %w", rmErr))
			}
		}
		return nil, err
	}
}

const maxStartAttempts = 3

// withStartupTimeout applies startupTimeout unless ctx has a deadline already.
func withStartupTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, startupTimeout)
}

func firstLine(err error) string {
	line, _, _ := strings.Cut(err.Error(), "\n")
	return line
}

func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("read work dir: %w", err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("clear work dir: %w", err)
		}
	}
	return nil
}

func prepareWorkDir(dir string) (string, error) {
	if dir == "" {
		d, err := os.MkdirTemp("", "localcluster-")
		if err != nil {
			return "", fmt.Errorf("create work dir: %w", err)
		}
		return d, nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("work dir %s: %w", dir, err)
	}
	entries, err := os.ReadDir(abs)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return "", fmt.Errorf("read work dir: %w", err)
	case len(entries) > 0:
		// Stale etcd data or certs from another run would be silently reused.
		return "", fmt.Errorf("work dir %s is not empty", abs)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return "", fmt.Errorf("create work dir: %w", err)
	}
	return abs, nil
}

func (c *Cluster) start(ctx context.Context) error {
	p := c.paths
	for _, d := range []string{p.pki, p.logs, p.etcdData, p.apiCertDir, p.kcmCertDir, p.flexVolume, p.cache, p.home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	clients, err := c.writePKI()
	if err != nil {
		return err
	}
	if err := c.startEtcd(ctx); err != nil {
		return err
	}
	if err := c.startAPIServer(ctx, clients.admin); err != nil {
		return err
	}
	if c.opts.CRDs || c.opts.CRDDir != "" {
		if err := InstallCRDs(ctx, c.restCfg, c.opts.CRDDir); err != nil {
			return err
		}
	}
	if c.opts.NoControllerManager {
		return nil
	}
	if err := writeKubeconfig(p.kcmKubeconfig, c.ServerURL(), clients.caPEM, clients.kcm); err != nil {
		return err
	}
	if err := c.startControllerManager(ctx); err != nil {
		return err
	}
	return c.waitFor(ctx, "the default ServiceAccount", c.defaultServiceAccountExists)
}

// clientCredentials are the certificates for the kubeconfigs.
type clientCredentials struct {
	caPEM      []byte
	admin, kcm testpki.KeyPair
}

func (c *Cluster) writePKI() (clientCredentials, error) {
	p := c.paths
	ca, err := testpki.NewCA(clusterCommonCA)
	if err != nil {
		return clientCredentials{}, err
	}
	if err := os.WriteFile(p.caCert, ca.CertPEM, 0o644); err != nil {
		return clientCredentials{}, fmt.Errorf("write CA: %w", err)
	}
	loopback := net.ParseIP("127.0.0.1")
	svcIP, err := kubernetesServiceIP(c.opts.ServiceCIDR)
	if err != nil {
		return clientCredentials{}, err
	}
	ips := []net.IP{loopback, svcIP}
	if bind := net.ParseIP(c.opts.BindAddress); !bind.Equal(loopback) {
		ips = append(ips, bind)
	}
	serving, err := ca.Issue(testpki.Request{
		CommonName: "kube-apiserver",
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
		IPs:    ips,
		Usages: serverUsage,
	})
	if err != nil {
		return clientCredentials{}, err
	}
	if _, _, err := writeKeyPair(serving, p.pki, "apiserver"); err != nil {
		return clientCredentials{}, err
	}
	saKey, err := newServiceAccountKey()
	if err != nil {
		return clientCredentials{}, err
	}
	if err := os.WriteFile(p.saKey, saKey, 0o600); err != nil {
		return clientCredentials{}, fmt.Errorf("write service account key: %w", err)
	}
	admin, err := ca.Issue(testpki.Request{CommonName: adminCommonName, Organizations: []string{mastersGroupName}, Usages: clientUsage})
	if err != nil {
		return clientCredentials{}, err
	}
	// The controller-manager gets its own identity so RBAC applies to it as
	// in a real cluster; --use-service-account-credentials gives each
	// controller its own service account on top.
	kcm, err := ca.Issue(testpki.Request{CommonName: kcmCommonName, Usages: clientUsage})
	if err != nil {
		return clientCredentials{}, err
	}
	return clientCredentials{caPEM: ca.CertPEM, admin: admin, kcm: kcm}, nil
}

// childEnv keeps the spawned binaries from writing into $HOME.
func (c *Cluster) childEnv() []string {
	return append(os.Environ(),
		"HOME="+c.paths.home,
		"XDG_CACHE_HOME="+c.paths.cache,
		"KUBECACHEDIR="+filepath.Join(c.paths.cache, "kube"),
	)
}

func (c *Cluster) launch(name, binary string, args []string) (*proc.Process, error) {
	p, err := proc.Start(proc.Spec{
		Name:    name,
		Binary:  filepath.Join(c.opts.BinDir, binary),
		Args:    args,
		Env:     c.childEnv(),
		LogPath: filepath.Join(c.paths.logs, name+".log"),
		Detach:  c.opts.Detach,
	})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(c.opts.Log, "localcluster: started %s pid=%d log=%s\n", name, p.PID(), p.LogPath())
	return p, nil
}

func (c *Cluster) startEtcd(ctx context.Context) error {
	clientPort, err := freePort("127.0.0.1")
	if err != nil {
		return err
	}
	peerPort, err := freePort("127.0.0.1")
	if err != nil {
		return err
	}
	clientURL := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(clientPort))
	peerURL := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(peerPort))
	p, err := c.launch("etcd", EtcdBinary, []string{
		"--name=localcluster",
		"--data-dir=" + c.paths.etcdData,
		"--listen-client-urls=" + clientURL,
		"--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=localcluster=" + peerURL,
		// The apiserver's own store; losing it on a crash loses nothing we keep.
		"--unsafe-no-fsync",
		"--log-level=warn",
	})
	if err != nil {
		return err
	}
	c.setProcess(&c.etcd, p)
	c.etcdURL = clientURL
	return c.waitFor(ctx, "etcd /health", func(ctx context.Context) (bool, error) {
		return etcdHealthy(ctx, clientURL)
	})
}

func etcdHealthy(ctx context.Context, clientURL string) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, clientURL+"/health", nil)
	if err != nil {
		return false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"health":"true"`), nil
}

func (c *Cluster) startAPIServer(ctx context.Context, admin testpki.KeyPair) error {
	port, err := freePort(c.opts.BindAddress)
	if err != nil {
		return err
	}
	c.apiPort = port
	p := c.paths
	args := []string{
		"--etcd-servers=" + c.etcdURL,
		"--bind-address=" + c.opts.BindAddress,
		"--advertise-address=" + c.opts.BindAddress,
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + p.apiCertDir,
		"--tls-cert-file=" + p.apiCert,
		"--tls-private-key-file=" + p.apiKey,
		"--client-ca-file=" + p.caCert,
		"--authorization-mode=RBAC",
		"--service-account-issuer=" + saIssuer,
		"--service-account-key-file=" + p.saKey,
		"--service-account-signing-key-file=" + p.saKey,
		"--service-cluster-ip-range=" + c.opts.ServiceCIDR,
		// Nothing serves the kubernetes Service's endpoints; simulated pods
		// get KUBERNETES_SERVICE_HOST pointing straight at us instead.
		"--endpoint-reconciler-type=none",
		"--allow-privileged=true",
		"--profiling=false",
	}
	if c.opts.FeatureGates != "" {
		args = append(args, "--feature-gates="+c.opts.FeatureGates)
	}
	if c.opts.NoControllerManager {
		args = append(args, "--disable-admission-plugins=ServiceAccount")
	}
	apiProc, err := c.launch("kube-apiserver", APIServerBinary, args)
	if err != nil {
		return err
	}
	c.setProcess(&c.api, apiProc)

	c.restCfg = &rest.Config{
		Host: c.ServerURL(),
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   c.caPEM(),
			CertData: admin.CertPEM,
			KeyData:  admin.KeyPEM,
		},
		QPS:   100,
		Burst: 200,
	}
	c.clientset, err = kubernetes.NewForConfig(c.restCfg)
	if err != nil {
		return fmt.Errorf("client for kube-apiserver: %w", err)
	}
	if err := writeKubeconfig(p.adminKubeconfig, c.ServerURL(), c.caPEM(), admin); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "kube-apiserver /readyz", c.apiServerReady); err != nil {
		return err
	}
	// Client knows what the operator knows: client-go's types plus the druid v1alpha1 Etcd API.
	scheme, err := operator.NewScheme()
	if err != nil {
		return fmt.Errorf("scheme: %w", err)
	}
	if c.client, err = client.New(c.restCfg, client.Options{Scheme: scheme}); err != nil {
		return fmt.Errorf("client for kube-apiserver: %w", err)
	}
	return nil
}

func (c *Cluster) caPEM() []byte {
	data, err := os.ReadFile(c.paths.caCert)
	if err != nil {
		return nil
	}
	return data
}

// apiServerReady compares the whole body: a partial readiness report also
// contains "ok" lines.
func (c *Cluster) apiServerReady(ctx context.Context) (bool, error) {
	body, err := c.clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return false, nil
	}
	return string(body) == "ok", nil
}

func (c *Cluster) defaultServiceAccountExists(ctx context.Context) (bool, error) {
	_, err := c.clientset.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		// The admin certificate is in system:masters; this cannot heal.
		return false, fmt.Errorf("get default ServiceAccount: %w", err)
	}
	return err == nil, nil
}

func (c *Cluster) startControllerManager(ctx context.Context) error {
	port, err := freePort("127.0.0.1")
	if err != nil {
		return err
	}
	p := c.paths
	args := []string{
		"--kubeconfig=" + p.kcmKubeconfig,
		// Its /healthz tells us when it runs; delegated auth keeps the
		// serving side the same as in a real cluster.
		"--authentication-kubeconfig=" + p.kcmKubeconfig,
		"--authorization-kubeconfig=" + p.kcmKubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + p.kcmCertDir,
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + p.saKey,
		"--root-ca-file=" + p.caCert,
		"--leader-elect=false",
		"--controllers=" + controllerFlag(c.opts.Controllers),
		// Otherwise it creates /usr/libexec/kubernetes/kubelet-plugins.
		"--flex-volume-plugin-dir=" + p.flexVolume,
		"--kube-api-qps=100",
		"--kube-api-burst=200",
		"--profiling=false",
	}
	if c.kcmGates != "" {
		args = append(args, "--feature-gates="+c.kcmGates)
	}
	kcmProc, err := c.launch("kube-controller-manager", ControllerManagerBinary, args)
	if err != nil {
		return err
	}
	c.setProcess(&c.kcm, kcmProc)
	healthz := "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) + "/healthz"
	return c.waitFor(ctx, "kube-controller-manager /healthz", func(ctx context.Context) (bool, error) {
		return ControllerManagerHealthy(ctx, p.kcmCertDir, healthz)
	})
}

// setProcess stores a started process and records all PIDs on disk, so
// `localcluster down` (another process) can stop them.
func (c *Cluster) setProcess(slot **proc.Process, p *proc.Process) {
	c.mu.Lock()
	*slot = p
	c.mu.Unlock()
	if err := c.recordProcesses(); err != nil {
		fmt.Fprintf(c.opts.Log, "localcluster: %v\n", err)
	}
}

// waitFor polls check until it reports true, ctx ends, or one of our
// processes dies (then the error carries the tail of its log).
func (c *Cluster) waitFor(ctx context.Context, what string, check func(context.Context) (bool, error)) error {
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		for _, p := range c.processes() {
			if err := p.ExitError(); err != nil {
				return fmt.Errorf("waiting for %s: %w; last output (%s):\n%s", what, err, p.LogPath(), p.LogTail(logTailBytes))
			}
		}
		checkCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ok, err := check(checkCtx)
		cancel()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (logs in %s)", what, ctx.Err(), c.paths.logs)
		case <-ticker.C:
		}
	}
}

// processes returns the running processes in start order.
func (c *Cluster) processes() []*proc.Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*proc.Process
	for _, p := range []*proc.Process{c.etcd, c.api, c.kcm} {
		if p != nil {
			out = append(out, p)
		}
	}
	return out
}

// RestartControllerManager stops kube-controller-manager and starts it again
// with featureGates (replacing Options.FeatureGates for it; the apiserver
// keeps its gates). It returns once the new process answers /healthz.
func (c *Cluster) RestartControllerManager(ctx context.Context, featureGates string) error {
	if c.opts.NoControllerManager {
		return errors.New("restart kube-controller-manager: the cluster was started without one")
	}
	c.mu.Lock()
	old := c.kcm
	c.kcm = nil
	c.mu.Unlock()
	if old != nil {
		if err := old.Stop(proc.DefaultGrace); err != nil {
			return fmt.Errorf("stop kube-controller-manager: %w", err)
		}
		fmt.Fprintf(c.opts.Log, "localcluster: stopped kube-controller-manager pid=%d\n", old.PID())
	}
	c.kcmGates = featureGates
	ctx, cancel := withStartupTimeout(ctx)
	defer cancel()
	if err := c.startControllerManager(ctx); err != nil {
		return fmt.Errorf("restart kube-controller-manager: %w", err)
	}
	return nil
}

// Stop kills kube-controller-manager, kube-apiserver and etcd (SIGTERM to
// each process group, SIGKILL after a grace period) and removes WorkDir
// unless Options.KeepWorkDir. Calling it again does nothing.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return nil
	}
	c.stopped = true
	c.mu.Unlock()

	if err := c.stopProcesses(); err != nil {
		// Keep the dir: its process record is what `down` needs to retry.
		return err
	}
	if !c.opts.KeepWorkDir {
		if err := os.RemoveAll(c.workDir); err != nil {
			return fmt.Errorf("remove work dir: %w", err)
		}
	}
	return nil
}

// stopProcesses stops the controller-manager before the apiserver it talks
// to, and the apiserver before its etcd.
func (c *Cluster) stopProcesses() error {
	c.mu.Lock()
	procs := []*proc.Process{c.kcm, c.api, c.etcd}
	c.mu.Unlock()
	var errs []error
	for _, p := range procs {
		if p == nil {
			continue
		}
		if err := p.Stop(proc.DefaultGrace); err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintf(c.opts.Log, "localcluster: stopped %s pid=%d\n", p.Name(), p.PID())
	}
	return errors.Join(errs...)
}

// KubeconfigPath is an admin kubeconfig (client certificate in system:masters).
func (c *Cluster) KubeconfigPath() string { return c.paths.adminKubeconfig }

// RESTConfig returns a copy of the admin client configuration.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.restCfg) }

// Clientset is an admin client-go clientset.
func (c *Cluster) Clientset() kubernetes.Interface { return c.clientset }

// Client is an admin controller-runtime client that knows client-go's types and the druid API.
func (c *Cluster) Client() client.Client { return c.client }

// CAFile is the CA of the apiserver's serving certificate: the ca.crt that
// simulated pods mount.
func (c *Cluster) CAFile() string { return c.paths.caCert }

// APIServerHost is where kube-apiserver listens, for KUBERNETES_SERVICE_HOST
// and KUBERNETES_SERVICE_PORT in simulated pods.
func (c *Cluster) APIServerHost() (host string, port int) {
	return c.opts.BindAddress, c.apiPort
}

// ServerURL is the https URL of kube-apiserver.
func (c *Cluster) ServerURL() string {
	return "https://" + net.JoinHostPort(c.opts.BindAddress, strconv.Itoa(c.apiPort))
}

// WorkDir holds the cluster's state and its logs (WorkDir/logs).
func (c *Cluster) WorkDir() string { return c.workDir }

// PIDs maps each running component to its process id.
func (c *Cluster) PIDs() map[string]int {
	out := map[string]int{}
	for _, p := range c.processes() {
		out[p.Name()] = p.PID()
	}
	return out
}

// freePort is a variable so a test can hand out a taken port.
var freePort = etcdtest.FreePort
