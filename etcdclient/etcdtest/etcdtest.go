package etcdtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
	"github.com/etcd-conductor/etcd-conductor/tls/testpki"
)

const (
	// DefaultVersion is what Kubernetes 1.36 tests with.
	DefaultVersion = "3.6.8"
	// BinDirEnv overrides where the etcd binaries are found.
	BinDirEnv = "ETCD_CONDUCTOR_BIN_DIR"

	healthyTimeout = 60 * time.Second
	stopTimeout    = 10 * time.Second
)

// TB is the part of testing.TB the helper needs, so this package does not import testing.
type TB interface {
	Helper()
	Logf(format string, args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
	TempDir() string
}

// Config describes the cluster. Zero values take the defaults.
type Config struct {
	// Members defaults to 3.
	Members int
	// Version picks bin/etcd-<Version>; defaults to DefaultVersion.
	Version string
	// EtcdName and Namespace name the Etcd the members pretend to belong to: member i is
	// "<EtcdName>-<i>" with server name "<EtcdName>-<i>.<EtcdName>-peer.<Namespace>.svc".
	// Defaults "etcd-test" and "default".
	EtcdName  string
	Namespace string
	// CA signs all certificates; a new one is made when nil.
	CA *testpki.CA
	// PeerCert overrides the certificate member name (at ip) presents on peer connections.
	PeerCert func(ca *testpki.CA, name string, ip net.IP) (testpki.KeyPair, error)
	// ExtraArgs are appended to every member's command line.
	ExtraArgs []string
	// Env adds KEY=VALUE variables to every member's environment, as an Etcd's ConfigMap does in
	// a pod (etcd reads ETCD_<FLAG> for each flag not given on the command line).
	Env []string
	// SkipWaitHealthy returns from Start as soon as the processes run.
	SkipWaitHealthy bool
	// SameClientPort gives every member the same client port (on its own address), as pods of
	// one StatefulSet have; code that dials podIP:spec.etcd.clientPort can then reach them.
	SameClientPort bool
	// Plaintext runs the members without TLS, clients and peers on plain HTTP, as an Etcd
	// without clientUrlTls and peerUrlTls runs; Cluster.Client is then plaintext material.
	Plaintext bool
}

// Cluster is a running set of etcd processes.
type Cluster struct {
	Name      string
	Namespace string
	CA        *testpki.CA
	// Client is client material the members accept.
	Client  conductortls.ClientMaterial
	Members []*Member

	tb     TB
	cfg    Config
	binary string
	scheme string
	root   string
	token  string
}

// Member is one etcd process.
type Member struct {
	Name       string
	IP         string
	ClientURL  string
	PeerURL    string
	ServerName string
	DataDir    string
	LogFile    string

	binary string
	args   []string
	env    []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// Target is how etcdclient reaches this member.
func (m *Member) Target() etcdclient.Target {
	_, address, _ := strings.Cut(m.ClientURL, "://")
	return etcdclient.Target{Name: m.Name, Address: address, ServerName: m.ServerName}
}

// Start launches the cluster, waits until every member agrees on a leader (unless
// cfg.SkipWaitHealthy) and stops it in tb.Cleanup.
func Start(tb TB, cfg Config) *Cluster {
	tb.Helper()
	c, err := start(tb, cfg)
	if err != nil {
		tb.Fatalf("etcdtest: %v", err)
	}
	return c
}

func start(tb TB, cfg Config) (*Cluster, error) {
	if cfg.Members <= 0 {
		cfg.Members = 3
	}
	if cfg.Version == "" {
		cfg.Version = DefaultVersion
	}
	if cfg.EtcdName == "" {
		cfg.EtcdName = "etcd-test"
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "default"
	}
	binary, err := EtcdBinary(cfg.Version)
	if err != nil {
		return nil, err
	}
	ca := cfg.CA
	if ca == nil {
		if ca, err = testpki.NewCA(cfg.EtcdName + "-ca"); err != nil {
			return nil, err
		}
	}
	clientPair, err := ca.ClientCert("etcdtest-client")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Name: cfg.EtcdName, Namespace: cfg.Namespace, CA: ca, Client: ca.ClientMaterial(clientPair), tb: tb}
	scheme := "https"
	if cfg.Plaintext {
		scheme, c.Client = "http", conductortls.PlaintextMaterial()
	}
	tb.Cleanup(c.stopAll)

	c.cfg, c.binary, c.scheme, c.root = cfg, binary, scheme, tb.TempDir()
	c.token = filepath.Base(c.root)
	var initial []string
	sharedClientPort := 0
	for i := 0; i < cfg.Members; i++ {
		m, err := c.newMember(i, sharedClientPort)
		if err != nil {
			return nil, err
		}
		if cfg.SameClientPort && sharedClientPort == 0 {
			_, port, _ := net.SplitHostPort(m.Target().Address)
			sharedClientPort, _ = strconv.Atoi(port)
		}
		c.Members = append(c.Members, m)
		initial = append(initial, m.Name+"="+m.PeerURL)
	}
	for _, m := range c.Members {
		if err := c.configure(m, initial, "new"); err != nil {
			return nil, err
		}
		if err := m.start(); err != nil {
			return nil, err
		}
	}
	if cfg.SkipWaitHealthy {
		return c, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), healthyTimeout)
	defer cancel()
	if err := c.WaitHealthy(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// newMember gives member i its name, its own loopback address, ports and directories; clientPort
// 0 picks a free one.
func (c *Cluster) newMember(i, clientPort int) (*Member, error) {
	ip := net.IPv4(127, 0, 0, byte(2+i))
	var err error
	if clientPort == 0 {
		if clientPort, err = FreePort(ip.String()); err != nil {
			return nil, err
		}
	}
	peerPort, err := FreePort(ip.String())
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("%s-%d", c.cfg.EtcdName, i)
	return &Member{
		Name:       name,
		IP:         ip.String(),
		ClientURL:  fmt.Sprintf("%s://%s", c.scheme, net.JoinHostPort(ip.String(), strconv.Itoa(clientPort))),
		PeerURL:    fmt.Sprintf("%s://%s", c.scheme, net.JoinHostPort(ip.String(), strconv.Itoa(peerPort))),
		ServerName: testpki.MemberServerName(name, c.cfg.EtcdName, c.cfg.Namespace),
		DataDir:    filepath.Join(c.root, name, "data"),
		LogFile:    filepath.Join(c.root, name, "etcd.log"),
		binary:     c.binary,
		env:        c.cfg.Env,
	}, nil
}

// configure writes m's certificates and its command line; state is etcd's
// --initial-cluster-state ("new" or "existing").
func (c *Cluster) configure(m *Member, initial []string, state string) error {
	dir := filepath.Dir(m.DataDir)
	ip := net.ParseIP(m.IP)
	// Like in a cluster, the serving certificate does not carry the pod IP: clients must
	// verify the member's DNS name.
	dnsNames := testpki.MemberServerDNSNames(c.cfg.EtcdName, c.cfg.Namespace)
	server, err := c.CA.ServerCert(m.Name, dnsNames, testpki.MemberServerIPs())
	if err != nil {
		return err
	}
	// Peers dial each other's IP URLs here (there is no cluster DNS), so the peer
	// certificate needs the IP.
	peerCert := c.cfg.PeerCert
	if peerCert == nil {
		peerCert = func(ca *testpki.CA, name string, ip net.IP) (testpki.KeyPair, error) {
			return ca.PeerCert(name, dnsNames, append(testpki.MemberServerIPs(), ip))
		}
	}
	peer, err := peerCert(c.CA, m.Name, ip)
	if err != nil {
		return err
	}
	serverFiles, err := testpki.WriteFiles(filepath.Join(dir, "server"), c.CA, server)
	if err != nil {
		return err
	}
	peerFiles, err := testpki.WriteFiles(filepath.Join(dir, "peer"), c.CA, peer)
	if err != nil {
		return err
	}
	m.args = []string{
		"--name=" + m.Name,
		"--data-dir=" + m.DataDir,
		"--listen-client-urls=" + m.ClientURL,
		"--advertise-client-urls=" + m.ClientURL,
		"--listen-peer-urls=" + m.PeerURL,
		"--initial-advertise-peer-urls=" + m.PeerURL,
		"--initial-cluster=" + strings.Join(initial, ","),
		"--initial-cluster-state=" + state,
		"--initial-cluster-token=" + c.token,
		// Test data need not survive a power cut; skipping fsync spares the shared disk.
		"--unsafe-no-fsync",
		"--log-level=warn",
	}
	if !c.cfg.Plaintext {
		m.args = append(m.args,
			"--client-cert-auth",
			"--trusted-ca-file="+serverFiles.CA,
			"--cert-file="+serverFiles.Cert,
			"--key-file="+serverFiles.Key,
			"--peer-client-cert-auth",
			"--peer-trusted-ca-file="+peerFiles.CA,
			"--peer-cert-file="+peerFiles.Cert,
			"--peer-key-file="+peerFiles.Key,
		)
	}
	m.args = append(m.args, c.cfg.ExtraArgs...)
	return nil
}

// NewJoiningMember readies the next member (ordinal len(c.Members)) to join the running cluster
// as etcd wants a joining member started: --initial-cluster-state=existing and an
// --initial-cluster naming the current members plus itself. The current members are the running
// ones: stop a member once it is removed. It is not started and not yet a member: the caller
// adds it (MemberAdd with m.PeerURL), may prepare m.DataDir, then calls StartMember.
func (c *Cluster) NewJoiningMember() (*Member, error) {
	clientPort := 0
	if c.cfg.SameClientPort && len(c.Members) > 0 {
		// On its own address, as a new pod of the StatefulSet would have it.
		u, err := url.Parse(c.Members[0].ClientURL)
		if err != nil {
			return nil, err
		}
		if clientPort, err = strconv.Atoi(u.Port()); err != nil {
			return nil, err
		}
	}
	m, err := c.newMember(len(c.Members), clientPort)
	if err != nil {
		return nil, err
	}
	initial := make([]string, 0, len(c.Members)+1)
	for _, existing := range c.Members {
		if existing.running() {
			initial = append(initial, existing.Name+"="+existing.PeerURL)
		}
	}
	initial = append(initial, m.Name+"="+m.PeerURL)
	if err := c.configure(m, initial, "existing"); err != nil {
		return nil, err
	}
	c.Members = append(c.Members, m)
	return m, nil
}

// StartMember starts member i for the first time (a member from NewJoiningMember).
func (c *Cluster) StartMember(i int) error { return c.Members[i].start() }

// Targets lists every member, running or not, in ordinal order.
func (c *Cluster) Targets() []etcdclient.Target {
	out := make([]etcdclient.Target, 0, len(c.Members))
	for _, m := range c.Members {
		out = append(out, m.Target())
	}
	return out
}

// Stop ends member i with SIGTERM (etcd hands leadership over on the way out) and waits.
func (c *Cluster) Stop(i int) error { return c.Members[i].stop(syscall.SIGTERM) }

// Kill ends member i with SIGKILL and waits.
func (c *Cluster) Kill(i int) error { return c.Members[i].stop(syscall.SIGKILL) }

// Restart starts a stopped member i again on its existing data directory.
func (c *Cluster) Restart(i int) error { return c.Members[i].start() }

// Running reports whether member i's process is alive.
func (c *Cluster) Running(i int) bool { return c.Members[i].running() }

// WaitHealthy waits until every running member answers and all of them name the same leader.
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	var lastErr error
	for {
		lastErr = c.checkHealthy(ctx)
		if lastErr == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster %s not healthy: %w\n%s", c.Name, lastErr, c.logTails())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (c *Cluster) checkHealthy(ctx context.Context) error {
	var leader uint64
	for _, m := range c.Members {
		if !m.running() {
			continue
		}
		mc, err := etcdclient.DialMember(c.Client, m.Target(), etcdclient.Options{CallTimeout: time.Second})
		if err != nil {
			return err
		}
		s, err := mc.Status(ctx)
		_ = mc.Close()
		if err != nil {
			return err
		}
		if s.LeaderID == 0 {
			return fmt.Errorf("member %s has no leader", m.Name)
		}
		if leader != 0 && s.LeaderID != leader {
			return fmt.Errorf("members disagree on the leader (%x vs %x)", leader, s.LeaderID)
		}
		leader = s.LeaderID
	}
	if leader == 0 {
		return errors.New("no member is running")
	}
	return nil
}

func (c *Cluster) logTails() string {
	var b strings.Builder
	for _, m := range c.Members {
		data, _ := os.ReadFile(m.LogFile)
		if len(data) > 2000 {
			data = data[len(data)-2000:]
		}
		fmt.Fprintf(&b, "--- %s (%s) ---\n%s\n", m.Name, m.LogFile, data)
	}
	return b.String()
}

// stopAll ends every member at the end of the test with SIGKILL: nothing of the cluster is looked
// at afterwards. SIGTERM made each teardown cost about 7 s: a leader stopping hands its leadership
// to a follower, which was stopping too, and waited out etcd's request timeout (5 s + 2 election
// timeouts) for a handover that could not happen.
func (c *Cluster) stopAll() {
	var wg sync.WaitGroup
	for _, m := range c.Members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := m.stop(syscall.SIGKILL); err != nil {
				c.tb.Logf("etcdtest: stop %s: %v", m.Name, err)
			}
		}()
	}
	wg.Wait()
}

func (m *Member) start() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil {
		return fmt.Errorf("member %s is already running", m.Name)
	}
	if err := os.MkdirAll(filepath.Dir(m.LogFile), 0o700); err != nil {
		return err
	}
	logFile, err := os.OpenFile(m.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(m.binary, m.args...)
	if len(m.env) > 0 {
		cmd.Env = append(os.Environ(), m.env...)
	}
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	// A crashed test must not leave etcd processes behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("start member %s: %w", m.Name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(exited)
	}()
	m.cmd, m.exited = cmd, exited
	return nil
}

func (m *Member) stop(sig syscall.Signal) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return nil
	}
	cmd, exited := m.cmd, m.exited
	m.cmd, m.exited = nil, nil
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
		return nil
	case <-time.After(stopTimeout):
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("member %s ignored %v for %v, killed", m.Name, sig, stopTimeout)
	}
}

func (m *Member) running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return false
	}
	select {
	case <-m.exited:
		return false
	default:
		return true
	}
}

// FreePort asks the kernel for a free TCP port on host. Another process may take it before the
// caller binds it; callers that start a server on it retry (see localcluster).
func FreePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("find a free port on %s: %w", host, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// BinDir is ETCD_CONDUCTOR_BIN_DIR (made absolute), or bin/ at the repository root.
func BinDir() (string, error) {
	if dir := os.Getenv(BinDirEnv); dir != "" {
		return filepath.Abs(dir)
	}
	root, err := RepoRoot()
	if err != nil {
		return "", fmt.Errorf("%w; set %s", err, BinDirEnv)
	}
	return filepath.Join(root, "bin"), nil
}

// RepoRoot walks up from the working directory to the directory holding go.mod. Every test
// helper that needs the checkout (binaries, charts) finds it here.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find repo root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find repo root: no go.mod above the working directory")
		}
		dir = parent
	}
}

// EtcdBinary is the path of bin/etcd-<version>; it errors when the file is missing.
func EtcdBinary(version string) (string, error) {
	dir, err := BinDir()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "etcd-"+version)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("etcd %s binary (build it with test/tools/build-binaries.sh): %w", version, err)
	}
	return path, nil
}

// MemberConn dials member i with the cluster's client certificate, as the operator and the
// member-agent do; it is closed in tb.Cleanup.
func (c *Cluster) MemberConn(i int, opts etcdclient.Options) (*etcdclient.MemberConn, error) {
	conn, err := etcdclient.DialMember(c.Client, c.Members[i].Target(), opts)
	if err != nil {
		return nil, err
	}
	c.tb.Cleanup(func() { _ = conn.Close() })
	return conn, nil
}

// Dial opens a gRPC connection to member i that verifies the member's DNS name, for tests that
// need etcd's KV or Maintenance API directly. It is closed in tb.Cleanup.
func (c *Cluster) Dial(i int) (*grpc.ClientConn, error) {
	m := c.Members[i]
	cfg, err := c.Client.ConfigOrPlain(m.ServerName)
	if err != nil {
		return nil, err
	}
	creds := insecure.NewCredentials()
	if cfg != nil {
		creds = credentials.NewTLS(cfg)
	}
	cc, err := grpc.NewClient(m.Target().Address,
		grpc.WithTransportCredentials(creds), grpc.WithAuthority(m.ServerName),
		// As etcd's own client: a watch response or a range may be as large as the member holds.
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32)))
	if err != nil {
		return nil, fmt.Errorf("dial member %s: %w", m.Name, err)
	}
	c.tb.Cleanup(func() { _ = cc.Close() })
	return cc, nil
}

// PID is the process id of the running member, 0 when it does not run: benchmarks read a
// member's CPU time from /proc with it.
func (m *Member) PID() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil || m.cmd.Process == nil {
		return 0
	}
	return m.cmd.Process.Pid
}

// SentTo reads member i's peer traffic counters for peer id from its /metrics: the bytes it sent
// it (raft streams and snapshots, etcd_network_peer_sent_bytes_total) and the raft snapshots
// (etcd_network_snapshot_send_success). Benchmarks and tests of a joining member read the
// leader's.
func (c *Cluster) SentTo(i int, id uint64) (bytes, snapshots float64, err error) {
	m := c.Members[i]
	cfg, err := c.Client.ConfigOrPlain(m.ServerName)
	if err != nil {
		return 0, 0, err
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
	resp, err := client.Get(m.ClientURL + "/metrics")
	if err != nil {
		return 0, 0, fmt.Errorf("metrics of %s: %w", m.Name, err)
	}
	defer resp.Body.Close()
	to := fmt.Sprintf(`{To="%x"} `, id)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), to)
		if !ok {
			continue
		}
		v, _ := strconv.ParseFloat(value, 64)
		switch name {
		case "etcd_network_peer_sent_bytes_total":
			bytes = v
		case "etcd_network_snapshot_send_success":
			snapshots = v
		}
	}
	return bytes, snapshots, sc.Err()
}
