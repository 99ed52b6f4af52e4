package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	configv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/config/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/features"
	"github.com/etcd-conductor/etcd-conductor/internal/operator"
	"github.com/etcd-conductor/etcd-conductor/internal/version"
)

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
	fs.StringVar(&f.memberAgentImage, "member-agent-image", "ghcr.io/etcd-conductor/etcd-conductor:"+version.Version,
		"image of the member-agent sidecar (this binary's image)")
	fs.StringVar(&f.memberAgentInterval, "member-agent-interval", "2s", "how often member-agents renew their Lease")
	fs.BoolVar(&f.development, "development", false, "human-readable logs")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	// Configuration errors are the user's to fix: one line naming the problem, no stack trace.
	cfg, gates, err := loadConfig(f.configFile)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd-conductor manager: %s\n", oneLine(err))
		return 1
	}
	log := newConfiguredLogger(f.development, cfg.Logging)
	ctrl.SetLogger(log)
	logIgnored(log, cfg)
	if err := startManager(ctrl.SetupSignalHandler(), log, f, cfg, gates); err != nil {
		log.Error(err, "Manager stopped with an error")
		fmt.Fprintf(os.Stderr, "etcd-conductor manager: %v\n", err)
		return 1
	}
	return 0
}

// logIgnored names, in one line, each etcd-druid key the configuration sets that the manager
// accepts without acting on, and why: a file written for etcd-druid starts the manager, and
// what in it no longer does anything is said once rather than never.
func logIgnored(log logr.Logger, cfg *configv1alpha1.OperatorConfiguration) {
	if ignored := configv1alpha1.Ignored(cfg); len(ignored) > 0 {
		log.Info("Configuration keys of etcd-druid accepted and ignored", "ignored", ignored)
	}
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
	// etcd-druid's gates are accepted and ignored (listed by Ignored); a name that is neither
	// theirs nor ours is still refused.
	gates, err := features.New(cfg.ConductorFeatureGates())
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

func startManager(ctx context.Context, log logr.Logger, f managerFlags, cfg *configv1alpha1.OperatorConfiguration, gates features.Gates) error {
	log.Info("Starting etcd-conductor manager", "version", version.Current().String(), "featureGates", gates.String(),
		"memberRoleSource", cfg.Controllers.OnDelete.MemberRoleSource, "rolloutPolicy", fmt.Sprintf("%+v", operator.RolloutPolicy(cfg.Controllers.OnDelete)))
	restCfg, err := restConfig(f.kubeconfig)
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	op, err := operator.New(restCfg, operator.Options{
		Config:              cfg,
		Gates:               gates,
		MemberAgentImage:    f.memberAgentImage,
		MemberAgentInterval: f.memberAgentInterval,
		Logger:              log,
		Registry:            metrics.Registry,
	})
	if err != nil {
		return err
	}
	defer op.Pool.Close()
	return op.Manager.Start(ctx)
}
