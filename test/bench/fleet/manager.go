package fleet

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster/proc"
	"github.com/etcd-conductor/etcd-conductor/tls/testpki"
)

// managerConfig is what every start of one binary shares.
type managerConfig struct {
	binary     Binary
	kubeconfig string
	workDir    string
	// featureGates in OperatorConfiguration form, e.g. {"QuorumAwareUpdatesWithOnDelete": true}.
	featureGates map[string]bool
	// extraConfig is appended to the OperatorConfiguration (YAML, top-level fields); only a binary
	// that knows the fields accepts it (the file is decoded strictly).
	extraConfig string
	// scraperToken may GET /metrics (TokenReview + SubjectAccessReview by the apiserver).
	scraperToken string
}

// manager is one running manager process.
type manager struct {
	proc        *proc.Process
	started     time.Time
	metricsAddr string
	metrics     *http.Client
	token       string
}

// startManager runs `etcd-conductor manager` as the chart's container does, against the admin
// kubeconfig, with its metrics served over HTTPS from a certificate the benchmark trusts.
func startManager(cfg managerConfig, run int) (*manager, error) {
	dir := filepath.Join(cfg.workDir, fmt.Sprintf("manager-%d", run))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	metricsAddr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	healthAddr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	client, certDir, err := metricsCertificate(dir)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: config.druid.gardener.cloud/v1alpha1\nkind: OperatorConfiguration\n")
	fmt.Fprintf(&b, "metricsBindAddress: %q\nmetricsCertDir: %q\nhealthProbeBindAddress: %q\n", metricsAddr, certDir, healthAddr)
	if len(cfg.featureGates) > 0 {
		b.WriteString("featureGates:\n")
		for name, on := range cfg.featureGates {
			fmt.Fprintf(&b, "  %s: %t\n", name, on)
		}
	}
	if cfg.extraConfig != "" {
		b.WriteString(strings.TrimSpace(cfg.extraConfig) + "\n")
	}
	configPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(configPath, []byte(b.String()), 0o600); err != nil {
		return nil, err
	}
	p, err := proc.Start(proc.Spec{
		Name:   "etcd-conductor-" + cfg.binary.Label,
		Binary: cfg.binary.Path,
		Args: []string{"manager", "--config", configPath, "--kubeconfig", cfg.kubeconfig,
			"--member-agent-image", framework.MemberAgentImage},
		LogPath: filepath.Join(dir, "manager.log"),
	})
	if err != nil {
		return nil, err
	}
	return &manager{proc: p, started: time.Now(), metricsAddr: metricsAddr, metrics: client, token: cfg.scraperToken}, nil
}

// stop sends SIGTERM and waits (SIGKILL after the grace period), as the kubelet does.
func (m *manager) stop() error { return m.proc.Stop(30 * time.Second) }

// alive returns the process's exit as an error once it has ended.
func (m *manager) alive() error {
	if err := m.proc.ExitError(); err != nil {
		return fmt.Errorf("%w; last output (%s):\n%s", err, m.proc.LogPath(), m.proc.LogTail(3000))
	}
	return nil
}

// scrape reads the manager's /metrics.
func (m *manager) scrape(ctx context.Context) (Scrape, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+m.metricsAddr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+m.token)
	resp, err := m.metrics.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		return nil, fmt.Errorf("GET /metrics: %s: %s", resp.Status, body)
	}
	return ParseScrape(resp.Body)
}

// ProcStats are what /proc says of a process.
type ProcStats struct {
	RSSBytes     int64   `json:"rssBytes"`
	PeakRSSBytes int64   `json:"peakRssBytes"`
	CPUSeconds   float64 `json:"cpuSeconds"`
}

// clockTicks is USER_HZ, 100 on every Linux this runs on (sysconf is not reachable without cgo).
const clockTicks = 100

// procStats reads VmRSS/VmHWM from /proc/<pid>/status and utime+stime from /proc/<pid>/stat.
func procStats(pid int) (ProcStats, error) {
	var s ProcStats
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) < 1 {
			continue
		}
		kb, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			s.RSSBytes = kb * 1024
		case "VmHWM":
			s.PeakRSSBytes = kb * 1024
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	// The command name (field 2) may hold spaces; the fields after its closing paren are fixed.
	rest := string(stat)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	f := strings.Fields(rest)
	// After ")": state is field 3 of the file, so utime (14) and stime (15) are f[11], f[12].
	if len(f) < 13 {
		return s, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	s.CPUSeconds = (utime + stime) / clockTicks
	return s, nil
}

// metricsCertificate writes a serving certificate for 127.0.0.1 and returns a client that trusts
// only its CA.
func metricsCertificate(dir string) (*http.Client, string, error) {
	ca, err := testpki.NewCA("fleetbench-metrics-ca")
	if err != nil {
		return nil, "", err
	}
	serving, err := ca.ServerCert("metrics", []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, "", err
	}
	certDir := filepath.Join(dir, "metrics-tls")
	if _, err := testpki.WriteFiles(certDir, ca, serving); err != nil {
		return nil, "", err
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}, certDir, nil
}

func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}
