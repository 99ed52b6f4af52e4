package helm

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
	"github.com/etcd-conductor/etcd-conductor/tls/testpki"
)

// How long a step may take before the test gives up. Generous: a shared 2-core machine; these
// are deadlines for progress, not measured durations.
const progressDeadline = 2 * time.Minute

// The real manager binary, started exactly with the arguments and configuration the chart
// installs, authenticated as the chart's ServiceAccount with a real token. It must start, serve
// the probe and metrics paths the Deployment uses, reconcile an Etcd without a single forbidden
// request, and after a `helm upgrade` that flips the gate plus a restart (what the checksum
// annotation makes the Deployment do), flip the StatefulSet's update strategy.
func TestManagerRunsWithInstalledChart(t *testing.T) {
	helmBinary(t)
	cluster := apiServer(t)
	managerBin, err := localcluster.ProjectBinary()
	if err != nil {
		t.Fatal(err)
	}
	admin, kubeconfig := cluster.RESTConfig(), cluster.KubeconfigPath()
	ctx := t.Context()
	adminClient := kubernetes.NewForConfigOrDie(admin)
	fullname := releaseName + "-etcd-conductor"

	createNamespace(ctx, t, cluster, releaseNamespace)
	install := []string{"install", releaseName, chartDir(t), "--kubeconfig", kubeconfig, "--namespace", releaseNamespace,
		"--set", "featureGates.QuorumAwareUpdatesWithOnDelete=true"}
	if _, err := runHelm(t, install...); err != nil {
		t.Fatalf("helm install: %v", err)
	}
	etcd := createEtcd(ctx, t, cluster, adminClient)
	saKubeconfig, managerToken := serviceAccountKubeconfig(ctx, t, admin, releaseNamespace, fullname)
	scraperToken := metricsScraperToken(ctx, t, cluster, adminClient, fullname+"-metrics-reader")

	gateOn := t.Run("gate on", func(t *testing.T) {
		m := startInstalledManager(ctx, t, managerBin, adminClient, fullname, saKubeconfig)
		m.waitServing(ctx, t, scraperToken)
		waitForStrategy(ctx, t, adminClient, etcd, appsv1.OnDeleteStatefulSetStrategyType, m)
		waitForStatus(ctx, t, cluster, etcd, m)
		m.requireMetricsAuthorization(ctx, t, managerToken)
		m.stop(t)
		m.requireNoForbidden(t)
		requireLeaderLeaseReleased(ctx, t, adminClient)
	})

	if !gateOn {
		return // flipping back proves nothing if the first start failed
	}
	t.Run("gate off after helm upgrade and restart", func(t *testing.T) {
		upgrade := []string{"upgrade", releaseName, chartDir(t), "--kubeconfig", kubeconfig,
			"--namespace", releaseNamespace, "--reuse-values",
			"--set", "featureGates.QuorumAwareUpdatesWithOnDelete=false"}
		if _, err := runHelm(t, upgrade...); err != nil {
			t.Fatalf("helm upgrade: %v", err)
		}
		m := startInstalledManager(ctx, t, managerBin, adminClient, fullname, saKubeconfig)
		waitForStrategy(ctx, t, adminClient, etcd, appsv1.RollingUpdateStatefulSetStrategyType, m)
		m.stop(t)
		m.requireNoForbidden(t)
	})
}

// requireLeaderLeaseReleased: a manager that stopped gave its leader-election Lease up, so the
// next one (a rolled pod) leads at once rather than after the Lease expired.
func requireLeaderLeaseReleased(ctx context.Context, t *testing.T, c *kubernetes.Clientset) {
	t.Helper()
	leases, err := c.CoordinationV1().Leases(releaseNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing Leases: %v", err)
	}
	if len(leases.Items) == 0 {
		t.Fatal("no leader-election Lease in the release namespace")
	}
	for _, l := range leases.Items {
		if holder := ptr.Deref(l.Spec.HolderIdentity, ""); holder != "" {
			t.Errorf("Lease %s still held by %s after the manager stopped", l.Name, holder)
		}
	}
}

// createEtcd creates a three-member Etcd whose TLS Secret holds the keys the reconciler checks for.
func createEtcd(ctx context.Context, t *testing.T, cluster *localcluster.Cluster, c *kubernetes.Clientset) *druidv1alpha1.Etcd {
	t.Helper()
	const ns = "team-a"
	createNamespace(ctx, t, cluster, ns)
	// Only the keys matter here: no member runs, so nothing reads the certificates.
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd-main-tls", Namespace: ns},
		Data:       map[string][]byte{"ca.crt": []byte("ca"), "tls.crt": []byte("crt"), "tls.key": []byte("key")},
	}
	if _, err := c.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating TLS Secret: %v", err)
	}
	tlsConfig := func() *druidv1alpha1.TLSConfig {
		return &druidv1alpha1.TLSConfig{
			TLSCASecretRef:     druidv1alpha1.SecretReference{SecretReference: corev1.SecretReference{Name: secret.Name}},
			ServerTLSSecretRef: corev1.SecretReference{Name: secret.Name},
			ClientTLSSecretRef: corev1.SecretReference{Name: secret.Name},
		}
	}
	etcd := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "etcd-main", Namespace: ns}}
	etcd.Spec.Replicas = 3
	etcd.Spec.Etcd.ClientUrlTLS = tlsConfig()
	etcd.Spec.Etcd.PeerUrlTLS = &druidv1alpha1.PeerTLSConfig{TLSConfig: *tlsConfig()}

	if err := cluster.Client().Create(ctx, etcd); err != nil {
		t.Fatalf("creating Etcd: %v", err)
	}
	return etcd
}

// serviceAccountKubeconfig writes a kubeconfig holding a real token of the ServiceAccount, the
// credential a pod of the Deployment would get: no impersonation, no admin fallback. It returns
// the file and the token.
func serviceAccountKubeconfig(ctx context.Context, t *testing.T, admin *rest.Config, namespace, name string) (string, string) {
	t.Helper()
	saCfg, err := localcluster.ServiceAccountConfig(ctx, admin, namespace, name)
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: admin.Host, CertificateAuthorityData: admin.CAData}
	cfg.AuthInfos["manager"] = &clientcmdapi.AuthInfo{Token: saCfg.BearerToken}
	cfg.Contexts["manager"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "manager", Namespace: namespace}
	cfg.CurrentContext = "manager"
	path := filepath.Join(t.TempDir(), "manager.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatalf("writing ServiceAccount kubeconfig: %v", err)
	}
	return path, saCfg.BearerToken
}

// metricsScraperToken is the token of a Prometheus-like ServiceAccount bound to the chart's
// metrics-reader ClusterRole, and to nothing else.
func metricsScraperToken(ctx context.Context, t *testing.T, cluster *localcluster.Cluster, c *kubernetes.Clientset, readerRole string) string {
	t.Helper()
	const ns, name = "monitoring", "prometheus"
	admin := cluster.RESTConfig()
	createNamespace(ctx, t, cluster, ns)
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: readerRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}},
	}
	if _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("binding %s: %v", readerRole, err)
	}
	cfg, err := localcluster.ServiceAccountConfig(ctx, admin, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.BearerToken
}

// runningManager is one manager process and everything it printed.
type runningManager struct {
	cmd         *exec.Cmd
	output      *lockedBuffer
	exited      chan struct{}
	exitErr     error
	healthAddr  string
	metricsAddr string
	// metricsClient trusts the CA of the certificate the test gives the metrics endpoint.
	metricsClient *http.Client
	stopOnce      sync.Once
}

// startInstalledManager runs the binary with the container args and the configuration the
// cluster holds. Two things differ from a pod, both because the test shares the host with other
// tests: the config file lives in a temp dir, the bind addresses are free loopback ports instead
// of :8443/:8081, and the metrics certificate (metrics.tls.secretName in a cluster) is a file the
// test writes.
func startInstalledManager(ctx context.Context, t *testing.T, bin string, c *kubernetes.Clientset, fullname, kubeconfig string) *runningManager {
	t.Helper()
	deploy, err := c.AppsV1().Deployments(releaseNamespace).Get(ctx, fullname, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading Deployment: %v", err)
	}
	cm, err := c.CoreV1().ConfigMaps(releaseNamespace).Get(ctx, fullname+"-config", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading config ConfigMap: %v", err)
	}
	m := &runningManager{output: &lockedBuffer{}, exited: make(chan struct{}),
		healthAddr: freeLoopbackAddr(t), metricsAddr: freeLoopbackAddr(t)}
	config := cm.Data[configKey]
	certDir := metricsCertificate(t, m)
	for from, to := range map[string]string{
		`metricsBindAddress: ":8443"`:     fmt.Sprintf("metricsBindAddress: %q\nmetricsCertDir: %q", m.metricsAddr, certDir),
		`healthProbeBindAddress: ":8081"`: fmt.Sprintf("healthProbeBindAddress: %q", m.healthAddr),
	} {
		if strings.Count(config, from) != 1 {
			t.Fatalf("installed config does not hold %s once; update this test with the chart:\n%s", from, config)
		}
		config = strings.Replace(config, from, to, 1)
	}
	configPath := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		t.Fatalf("writing config: %v", err)
	}

	container := deploy.Spec.Template.Spec.Containers[0]
	args := make([]string, 0, len(container.Args)+2)
	for i, a := range container.Args {
		if i > 0 && container.Args[i-1] == "--config" {
			a = configPath
		}
		args = append(args, a)
	}
	args = append(args, "--kubeconfig", kubeconfig)
	m.cmd = exec.Command(bin, args...)
	m.cmd.Stdout, m.cmd.Stderr = m.output, m.output
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("starting manager: %v", err)
	}
	go func() {
		m.exitErr = m.cmd.Wait()
		close(m.exited)
	}()
	t.Cleanup(func() { m.stop(t) })
	return m
}

// metricsCertificate writes a serving certificate for the metrics address into a directory and
// points m.metricsClient at its CA.
func metricsCertificate(t *testing.T, m *runningManager) string {
	t.Helper()
	ca, err := testpki.NewCA("metrics-ca")
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.ServerCert("metrics", []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := testpki.WriteFiles(dir, ca, serving); err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	m.metricsClient = &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}},
	}
	return dir
}

// getMetrics is GET /metrics with token as bearer (none when empty).
func (m *runningManager) getMetrics(ctx context.Context, token string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+m.metricsAddr+"/metrics", nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := m.metricsClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// requireMetricsAuthorization: the metrics are served only to a token the API server accepts and
// whose holder may GET /metrics. The manager's own ServiceAccount may not (it is not bound to
// metrics-reader), so it stands for "authenticated but not authorized".
func (m *runningManager) requireMetricsAuthorization(ctx context.Context, t *testing.T, unauthorizedToken string) {
	t.Helper()
	for _, c := range []struct {
		name, token string
		want        int
	}{
		{"no token", "", http.StatusUnauthorized},
		// The API server reports an error for a malformed token, which controller-runtime's
		// filter answers with 500: refused all the same (0 = any refusal).
		{"a token the API server does not know", "not-a-token", 0},
		{"a ServiceAccount not bound to metrics-reader", unauthorizedToken, http.StatusForbidden},
	} {
		code, body, err := m.getMetrics(ctx, c.token)
		refused := code == c.want || (c.want == 0 && code >= 400)
		if err != nil || !refused || strings.Contains(body, "controller_runtime_") {
			t.Errorf("GET /metrics with %s: status %d, err %v, want %d (0: any refusal)\n%.300s", c.name, code, err, c.want, body)
		}
	}
}

// stop ends the manager as the kubelet would: SIGTERM, then SIGKILL if it does not exit.
func (m *runningManager) stop(t *testing.T) {
	m.stopOnce.Do(func() {
		_ = m.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-m.exited:
		case <-time.After(30 * time.Second):
			_ = m.cmd.Process.Kill()
			<-m.exited
			t.Errorf("manager ignored SIGTERM for 30 s\n%s", m.output.tail())
		}
	})
}

// waitServing waits until the probe paths the Deployment uses answer, and the metrics path
// answers a scraper holding metrics-reader, over verified HTTPS.
func (m *runningManager) waitServing(ctx context.Context, t *testing.T, scraperToken string) {
	t.Helper()
	m.poll(ctx, t, "GET /metrics over HTTPS with the scraper's token to answer 200 with metrics", func() bool {
		code, body, err := m.getMetrics(ctx, scraperToken)
		return err == nil && code == http.StatusOK && strings.Contains(body, "controller_runtime_")
	})
	endpoints := []struct{ addr, path, body string }{
		{m.healthAddr, "/healthz", "ok"},
		{m.healthAddr, "/readyz", "ok"},
	}
	for _, e := range endpoints {
		url := "http://" + e.addr + e.path
		m.poll(ctx, t, "GET "+url+" to answer 200", func() bool {
			resp, err := http.Get(url)
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode == http.StatusOK && (e.body == "" || string(body) == e.body)
		})
	}
}

// poll retries cond until it holds, failing early if the manager exits.
func (m *runningManager) poll(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, progressDeadline, true, func(context.Context) (bool, error) {
		select {
		case <-m.exited:
			return false, fmt.Errorf("manager exited: %v", m.exitErr)
		default:
		}
		// A missing RBAC rule would otherwise surface only when a cache sync times out, minutes later.
		if line := m.forbiddenLine(); line != "" {
			return false, fmt.Errorf("API server refused the manager a request: %s", line)
		}
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v\nmanager output:\n%s", what, err, m.output.tail())
	}
}

// requireNoForbidden fails if the API server refused the manager anything: with least-privilege
// RBAC a missing rule shows up only as a 403 in the log (and a cache that never syncs).
func (m *runningManager) requireNoForbidden(t *testing.T) {
	t.Helper()
	if line := m.forbiddenLine(); line != "" {
		t.Errorf("API server refused the manager a request: %s", line)
	}
}

func (m *runningManager) forbiddenLine() string {
	for _, line := range strings.Split(m.output.String(), "\n") {
		if strings.Contains(strings.ToLower(line), "forbidden") {
			return line
		}
	}
	return ""
}

func waitForStrategy(ctx context.Context, t *testing.T, c *kubernetes.Clientset, etcd *druidv1alpha1.Etcd, want appsv1.StatefulSetUpdateStrategyType, m *runningManager) {
	t.Helper()
	m.poll(ctx, t, fmt.Sprintf("StatefulSet %s/%s with updateStrategy %s", etcd.Namespace, etcd.Name, want), func() bool {
		sts, err := c.AppsV1().StatefulSets(etcd.Namespace).Get(ctx, etcd.Name, metav1.GetOptions{})
		if err != nil {
			if !apierrors.IsNotFound(err) {
				t.Logf("reading StatefulSet: %v", err)
			}
			return false
		}
		return sts.Spec.UpdateStrategy.Type == want
	})
}

// waitForStatus waits until the Etcd reconciler recorded the generation it converged and the status
// controller wrote the member counts: both controllers got past their first reads of Secrets,
// StatefulSets, pods and leases with the chart's rights.
func waitForStatus(ctx context.Context, t *testing.T, cluster *localcluster.Cluster, etcd *druidv1alpha1.Etcd, m *runningManager) {
	t.Helper()
	c := cluster.Client()
	m.poll(ctx, t, fmt.Sprintf("status of Etcd %s/%s", etcd.Namespace, etcd.Name), func() bool {
		got := &druidv1alpha1.Etcd{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(etcd), got); err != nil {
			return false
		}
		s := got.Status
		return s.ObservedGeneration != nil && *s.ObservedGeneration == got.Generation && len(s.LastErrors) == 0 &&
			len(s.Conditions) > 0 && s.Selector != nil
	})
}

func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}

// lockedBuffer collects the output of a process whose pipes are copied by other goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// tail is the end of the output, enough to see why the manager failed.
func (b *lockedBuffer) tail() string {
	const keep = 8000
	s := b.String()
	if len(s) > keep {
		return "...\n" + s[len(s)-keep:]
	}
	return s
}
