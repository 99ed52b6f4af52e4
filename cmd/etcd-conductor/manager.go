package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	configv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/config/v1alpha1"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	etcdcontroller "github.com/etcd-conductor/etcd-conductor/internal/controller/etcd"
	"github.com/etcd-conductor/etcd-conductor/internal/controller/ondelete"
	"github.com/etcd-conductor/etcd-conductor/internal/controller/status"
	"github.com/etcd-conductor/etcd-conductor/internal/features"
	"github.com/etcd-conductor/etcd-conductor/internal/roles"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

// version is set at build time; it also names the default member-agent image.
var version = "v0.1.0"

type managerFlags struct {
	configFile          string
	kubeconfig          string
	memberAgentImage    string
	memberAgentInterval string
	development         bool
}

func runManager(args []string) int {
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	var f managerFlags
	fs.StringVar(&f.configFile, "config", "", "path to the OperatorConfiguration file (required)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig to use instead of the in-cluster configuration")
	fs.StringVar(&f.memberAgentImage, "member-agent-image", "ghcr.io/etcd-conductor/etcd-conductor:"+version,
		"image of the member-agent sidecar (this binary's image)")
	fs.StringVar(&f.memberAgentInterval, "member-agent-interval", "2s", "how often member-agents renew their Lease")
	fs.BoolVar(&f.development, "development", false, "human-readable logs")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	// Configuration errors are the user's to fix: one line naming the problem, no stack trace.
	cfg, gates, err := loadConfig(f.configFile)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd-conductor manager: %v\n", err)
		return 1
	}
	log := zap.New(zap.UseDevMode(f.development))
	ctrl.SetLogger(log)
	if err := startManager(ctrl.SetupSignalHandler(), log, f, cfg, gates); err != nil {
		log.Error(err, "Manager stopped with an error")
		fmt.Fprintf(os.Stderr, "etcd-conductor manager: %v\n", err)
		return 1
	}
	return 0
}

// loadConfig reads the configuration file strictly and parses its feature gates.
func loadConfig(path string) (*configv1alpha1.OperatorConfiguration, features.Gates, error) {
	if path == "" {
		return nil, features.Gates{}, errors.New("--config is required")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, features.Gates{}, fmt.Errorf("reading configuration: %w", err)
	}
	cfg, err := configv1alpha1.Decode(data)
	if err != nil {
		return nil, features.Gates{}, fmt.Errorf("%s: %w", path, err)
	}
	gates, err := features.New(cfg.FeatureGates)
	if err != nil {
		return nil, features.Gates{}, fmt.Errorf("%s: featureGates: %w", path, err)
	}
	return cfg, gates, nil
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	return ctrl.GetConfig()
}

// newScheme holds every type the manager reads or writes.
func newScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := druidv1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return scheme, nil
}

func startManager(ctx context.Context, log logr.Logger, f managerFlags, cfg *configv1alpha1.OperatorConfiguration, gates features.Gates) error {
	log.Info("Starting etcd-conductor manager", "version", version, "featureGates", gates.String(),
		"memberRoleSource", cfg.Controllers.OnDelete.MemberRoleSource)

	restCfg, err := restConfig(f.kubeconfig)
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	scheme, err := newScheme()
	if err != nil {
		return fmt.Errorf("building scheme: %w", err)
	}
	le := cfg.LeaderElection
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                  scheme,
		Logger:                  log,
		Metrics:                 metricsserver.Options{BindAddress: cfg.MetricsBindAddress},
		HealthProbeBindAddress:  cfg.HealthProbeBindAddress,
		LeaderElection:          le.Enabled,
		LeaderElectionID:        le.ResourceName,
		LeaderElectionNamespace: le.ResourceNamespace,
		LeaseDuration:           durationOrNil(le.LeaseDuration.Duration),
		RenewDeadline:           durationOrNil(le.RenewDeadline.Duration),
		RetryPeriod:             durationOrNil(le.RetryPeriod.Duration),
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}

	etcdReconciler := etcdcontroller.NewReconciler(mgr.GetClient(), mgr.GetEventRecorderFor("etcd-conductor"), etcdcontroller.Config{
		Gates:               gates,
		MemberAgentImage:    f.memberAgentImage,
		MemberAgentInterval: f.memberAgentInterval,
	})
	if err := etcdReconciler.RegisterWithManager(mgr, cfg.Controllers.Etcd.ConcurrentSyncs); err != nil {
		return fmt.Errorf("registering etcd controller: %w", err)
	}
	if err := status.NewReconciler(mgr.GetClient()).RegisterWithManager(mgr, cfg.Controllers.Etcd.ConcurrentSyncs); err != nil {
		return fmt.Errorf("registering status controller: %w", err)
	}

	onDeleteMetrics, err := ondelete.NewMetrics(metrics.Registry)
	if err != nil {
		return fmt.Errorf("registering ondelete metrics: %w", err)
	}
	pool := etcdclient.NewPool(etcdclient.Options{Logger: log.WithName("etcdclient")})
	defer pool.Close()
	onDelete := ondelete.NewReconciler(ondelete.Config{
		Client:           mgr.GetClient(),
		Reader:           mgr.GetAPIReader(),
		Recorder:         mgr.GetEventRecorderFor("etcd-conductor"),
		Members:          pool,
		Metrics:          onDeleteMetrics,
		RoleSource:       roles.Mode(cfg.Controllers.OnDelete.MemberRoleSource),
		DefaultClientTLS: defaultClientTLS(cfg.MemberClientTLS),
		RequeueInterval:  cfg.Controllers.OnDelete.RequeueInterval.Duration,
	})
	if err := onDelete.RegisterWithManager(mgr, cfg.Controllers.OnDelete.ConcurrentSyncs); err != nil {
		return fmt.Errorf("registering ondelete controller: %w", err)
	}

	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("adding health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("adding ready check: %w", err)
	}
	return mgr.Start(ctx)
}

// defaultClientTLS reads the operator-wide key pair on every use, so a rotated Secret mounted into
// the manager pod is picked up without a restart.
func defaultClientTLS(files *configv1alpha1.MemberClientTLS) func() (conductortls.ClientMaterial, error) {
	if files == nil {
		return nil
	}
	return func() (conductortls.ClientMaterial, error) {
		return conductortls.LoadFiles(files.CAFile, files.CertFile, files.KeyFile)
	}
}

func durationOrNil(d time.Duration) *time.Duration {
	if d == 0 {
		return nil
	}
	return &d
}
