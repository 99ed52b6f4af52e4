// Package envtestutil starts controller-runtime's envtest (etcd and
// kube-apiserver, our pinned binaries) for integration tests, with the Etcd
// CRD installed and, when asked, the real kube-controller-manager running the
// StatefulSet controller against it.
package envtestutil

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/test/envtestutil/internal/cachehome"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster/proc"
)

// envtestControllers are what a StatefulSet needs to get pods and to have
// them garbage-collected with it. envtest disables the ServiceAccount
// admission plugin, so no service-account controllers are needed.
const envtestControllers = "statefulset-controller,garbage-collector-controller"

// Options configures Start.
type Options struct {
	// CRDDirs are installed before Start returns. Default:
	// <repo root>/charts/etcd-conductor/crds. Missing or empty dirs are
	// skipped: the CRD is generated and may not exist yet.
	CRDDirs []string
	// WithControllerManager also runs kube-controller-manager (statefulset
	// and garbage-collector controllers) against the envtest apiserver.
	WithControllerManager bool
	// FeatureGates go to kube-apiserver and, if it runs, to
	// kube-controller-manager, e.g. "MaxUnavailableStatefulSet=true".
	FeatureGates string
	// BinDir defaults to localcluster.DefaultBinDir().
	BinDir string
}

// Env is a running envtest control plane; t.Cleanup stops it.
type Env struct {
	// Config authenticates as envtest's admin (system:masters).
	Config *rest.Config
	// Client knows client-go's types and druid.gardener.cloud/v1alpha1.
	Client client.Client
	Scheme *runtime.Scheme
	// Environment gives access to envtest itself, e.g. AddUser.
	Environment *envtest.Environment
}

// NewScheme returns client-go's types plus the druid v1alpha1 Etcd API.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("add client-go types to scheme: %w", err)
	}
	if err := druidv1alpha1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("add druid v1alpha1 to scheme: %w", err)
	}
	return s, nil
}

// Start runs envtest and registers its teardown with t.Cleanup. Without the
// binaries it skips the test, except under CI=true where it fails.
func Start(t testing.TB, o Options) *Env {
	t.Helper()
	binDir := o.BinDir
	if binDir == "" {
		dir, err := localcluster.DefaultBinDir()
		if err != nil {
			t.Fatalf("locate binaries: %v", err)
		}
		binDir = dir
	}
	localcluster.SkipWithoutBinaries(t, binDir)

	assets, err := assetsDir(t.TempDir(), binDir)
	if err != nil {
		t.Fatalf("prepare envtest binaries: %v", err)
	}
	crdDirs, err := existingCRDDirs(o.CRDDirs)
	if err != nil {
		t.Fatalf("find CRDs: %v", err)
	}
	scheme, err := NewScheme()
	if err != nil {
		t.Fatalf("%v", err)
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     crdDirs,
		ErrorIfCRDPathMissing: false,
		Scheme:                scheme,
		// Cold starts on a loaded 2-core machine take longer than the 20 s default.
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	// The apiserver's store is thrown away with the test.
	// Explicit paths: envtest prefers an inherited KUBEBUILDER_ASSETS or
	// TEST_ASSET_* over BinaryAssetsDirectory, and those may name other versions.
	env.ControlPlane.Etcd = &envtest.Etcd{Path: filepath.Join(assets, "etcd")}
	env.ControlPlane.GetAPIServer().Path = filepath.Join(assets, "kube-apiserver")
	env.ControlPlane.Etcd.Configure().Set("unsafe-no-fsync", "true")
	if o.FeatureGates != "" {
		env.ControlPlane.GetAPIServer().Configure().Set("feature-gates", o.FeatureGates)
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start envtest (binaries from %s, cache %s): %v", binDir, cachehome.Dir, err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop envtest: %v", err)
		}
	})

	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatalf("controller-runtime client: %v", err)
	}
	e := &Env{Config: cfg, Client: c, Scheme: scheme, Environment: env}
	if o.WithControllerManager {
		if err := e.startControllerManager(t, binDir, o.FeatureGates); err != nil {
			t.Fatalf("%v", err)
		}
	}
	return e
}

// assetsDir builds the folder envtest expects: binaries named exactly etcd
// and kube-apiserver. Each is a small wrapper that sets a parent-death signal
// before exec'ing ours, because envtest starts them without one and a test
// binary killed by `go test -timeout` would otherwise leave them running.
// Without setpriv they are plain symlinks.
func assetsDir(dir, binDir string) (string, error) {
	links := map[string]string{
		"etcd":           filepath.Join(binDir, localcluster.EtcdBinary),
		"kube-apiserver": filepath.Join(binDir, localcluster.APIServerBinary),
	}
	setpriv, lookErr := exec.LookPath("setpriv")
	for name, target := range links {
		target, err := filepath.EvalSymlinks(target)
		if err != nil {
			return "", fmt.Errorf("resolve %s: %w", name, err)
		}
		path := filepath.Join(dir, name)
		if lookErr != nil {
			if err := os.Symlink(target, path); err != nil {
				return "", fmt.Errorf("link %s: %w", name, err)
			}
			continue
		}
		script := fmt.Sprintf("#!/bin/sh\nexec %s --pdeathsig KILL -- %s \"$@\"\n", shellQuote(setpriv), shellQuote(target))
		if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
			return "", fmt.Errorf("write %s wrapper: %w", name, err)
		}
	}
	return dir, nil
}

// shellQuote makes s one single-quoted sh word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// existingCRDDirs keeps the dirs that hold at least one file.
func existingCRDDirs(dirs []string) ([]string, error) {
	if len(dirs) == 0 {
		root, err := localcluster.RepoRoot()
		if err != nil {
			return nil, err
		}
		dirs = []string{filepath.Join(root, "charts", "etcd-conductor", "crds")}
	}
	var out []string
	for _, d := range dirs {
		entries, err := os.ReadDir(d)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read CRD dir %s: %w", d, err)
		}
		if len(entries) > 0 {
			out = append(out, d)
		}
	}
	return out, nil
}

// startControllerManager runs kube-controller-manager as a system:masters
// user of envtest and waits for its /healthz.
func (e *Env) startControllerManager(t testing.TB, binDir, featureGates string) error {
	user, err := e.Environment.AddUser(envtest.User{
		Name:   "kube-controller-manager",
		Groups: []string{"system:masters"},
	}, nil)
	if err != nil {
		return fmt.Errorf("envtest user for kube-controller-manager: %w", err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig for kube-controller-manager: %w", err)
	}
	dir := t.TempDir()
	kubeconfigPath := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		return fmt.Errorf("write kube-controller-manager kubeconfig: %w", err)
	}
	port, err := freeLoopbackPort()
	if err != nil {
		return err
	}
	certDir := filepath.Join(dir, "certs")
	args := []string{
		"--kubeconfig=" + kubeconfigPath,
		"--authentication-kubeconfig=" + kubeconfigPath,
		"--authorization-kubeconfig=" + kubeconfigPath,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + certDir,
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		"--controllers=" + envtestControllers,
		// Otherwise it creates /usr/libexec/kubernetes/kubelet-plugins.
		"--flex-volume-plugin-dir=" + filepath.Join(dir, "flexvolume"),
		"--profiling=false",
	}
	if featureGates != "" {
		args = append(args, "--feature-gates="+featureGates)
	}
	p, err := proc.Start(proc.Spec{
		Name:    "kube-controller-manager",
		Binary:  filepath.Join(binDir, localcluster.ControllerManagerBinary),
		Args:    args,
		Env:     append(os.Environ(), "HOME="+dir, "XDG_CACHE_HOME="+filepath.Join(dir, "cache")),
		LogPath: filepath.Join(dir, "kube-controller-manager.log"),
	})
	if err != nil {
		return err
	}
	// Registered after envtest's Stop, so it runs first: the controller-manager
	// goes before the apiserver it talks to.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kube-controller-manager log tail:\n%s", p.LogTail(4000))
		}
		if err := p.Stop(proc.DefaultGrace); err != nil {
			t.Errorf("stop kube-controller-manager: %v", err)
		}
	})
	healthz := "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) + "/healthz"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		if err := p.ExitError(); err != nil {
			return fmt.Errorf("kube-controller-manager: %w; last output:\n%s", err, p.LogTail(3000))
		}
		if ok, _ := localcluster.ControllerManagerHealthy(ctx, certDir, healthz); ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube-controller-manager not healthy: %w; last output:\n%s", ctx.Err(), p.LogTail(3000))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ServiceAccountConfig returns a client configuration that authenticates with a real token of the
// ServiceAccount namespace/name (created if missing; admin creates it), the credential a pod
// running as it would get: the API server authorizes it by that account's RBAC alone, with no
// admin fallback. The token is cfg.BearerToken.
func ServiceAccountConfig(ctx context.Context, admin *rest.Config, namespace, name string) (*rest.Config, error) {
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return nil, fmt.Errorf("building clientset: %w", err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if _, err := cs.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating ServiceAccount %s/%s: %w", namespace, name, err)
	}
	expiry := int64(3600)
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}
	tok, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, req, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("requesting a token for ServiceAccount %s/%s: %w", namespace, name, err)
	}
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = tok.Status.Token
	return cfg, nil
}
