package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"k8s.io/apimachinery/pkg/runtime"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberpod"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/member/agent"
)

// runMemberAgent is the sidecar: it renews its pod's member Lease while the local etcd answers.
// `member-agent init` is the member pod's init step instead (runMemberInit).
func runMemberAgent(args []string) int {
	if len(args) > 0 && args[0] == "init" {
		return runMemberInit(args[1:])
	}
	fs := flag.NewFlagSet("member-agent", flag.ContinueOnError)
	var cfg agent.Config
	var kubeconfig string
	var development bool
	fs.StringVar(&cfg.Endpoint, "endpoint", "", "client URL of the local member, https://$(POD_IP):2379 (http:// with --plaintext)")
	fs.StringVar(&cfg.ServerName, "server-name", "", "name verified against the member's certificate, $(POD_NAME).<etcd>-peer.<namespace>.svc")
	cfg.ClientFiles.Register(fs)
	fs.StringVar(&cfg.Lease, "lease", "", "name of this member's Lease, $(POD_NAME)")
	fs.StringVar(&cfg.Namespace, "namespace", "", "namespace of the Lease, $(POD_NAMESPACE)")
	fs.DurationVar(&cfg.Interval, "interval", memberlease.DefaultRenewInterval, "how often to renew the Lease")
	fs.DurationVar(&cfg.CallTimeout, "call-timeout", agent.DefaultCallTimeout, "bound on each status call to the member")
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig to use instead of the in-cluster configuration")
	fs.BoolVar(&development, "development", false, "human-readable logs")
	var backupOpts backupOptions
	backupOpts.register(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "etcd-conductor member-agent: %v\n", err)
		return 2
	}
	backupCfg, err := backupOpts.config(cfg.Namespace)
	if backupCfg.Store.Provider != "" && err != nil {
		fmt.Fprintf(os.Stderr, "etcd-conductor member-agent: %v\n", err)
		return 2
	}
	log := newLogger(development).WithName("member-agent")

	restConfig, err := kubeRESTConfig(kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd-conductor member-agent: %v\n", err)
		return 1
	}
	restConfig.UserAgent = "etcd-conductor-member-agent"
	leases, err := coordinationv1client.NewForConfig(restConfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd-conductor member-agent: kubernetes client: %v\n", err)
		return 1
	}
	sidecar, err := agent.New(cfg, leases, log)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd-conductor member-agent: %v\n", err)
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if backupCfg.Store.Provider != "" {
		if err := startBackup(ctx, backupCfg, cfg, backupOpts.metricsAddr, leases, log); err != nil {
			fmt.Fprintf(os.Stderr, "etcd-conductor member-agent: %v\n", err)
			return 1
		}
	}
	if err := sidecar.Run(ctx); err != nil {
		log.Error(err, "Member agent failed")
		return 1
	}
	return 0
}

func kubeRESTConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster configuration (or pass --kubeconfig): %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	return cfg, nil
}

// runMemberInit decides how the member starts (restart, bootstrap, join, wait for the operator)
// and writes the etcd configuration file the etcd container starts with. Flags after "--" are
// the member's etcd flags; shared settings come from the ETCD_* environment.
func runMemberInit(args []string) int {
	fs := flag.NewFlagSet("member-agent init", flag.ContinueOnError)
	var cfg agent.InitConfig
	var kubeconfig string
	var development bool
	fs.StringVar(&cfg.ConfigFile, "config-file", "", "where to write the etcd configuration")
	fs.IntVar(&cfg.ClientPort, "client-port", 2379, "the members' client port")
	cfg.ClientFiles.Register(fs)
	fs.StringVar(&cfg.Lease, "lease", "", "this member's Lease, where the decision is reported (optional)")
	fs.StringVar(&cfg.Namespace, "namespace", "", "namespace of the Lease")
	fs.StringVar(&cfg.PodUID, "pod-uid", "", "this pod's UID, $(POD_UID): a restore order names the pod incarnation it is for")
	fs.DurationVar(&cfg.PollInterval, "poll-interval", agent.DefaultInitPollInterval, "how often a waiting init step asks again")
	fs.StringVar(&cfg.AdditionalPeerURLs, memberpod.AdditionalPeerURLsFlag, "",
		"every member's additional peer URLs, name=url,name=url: this member advertises its own after its --initial-advertise-peer-urls")
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig to use instead of the in-cluster configuration")
	fs.BoolVar(&development, "development", false, "human-readable logs")
	var restore restoreOptions
	restore.register(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg.EtcdFlags = fs.Args()
	cfg.BackupStore = restore.opener()
	cfg.BackupOwner = snapshot.Owner{Etcd: restore.store.Etcd, EtcdUID: restore.store.EtcdUID}
	cfg.Environment = map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "ETCD_") {
			cfg.Environment[k] = v
		}
	}
	log := newLogger(development).WithName("member-init")

	var leases coordinationv1client.LeasesGetter
	var etcds ctrlclient.Reader
	if cfg.Lease != "" {
		restConfig, err := kubeRESTConfig(kubeconfig)
		if err != nil {
			fmt.Fprintf(os.Stderr, "etcd-conductor member-agent init: %v\n", err)
			return 1
		}
		restConfig.UserAgent = "etcd-conductor-member-init"
		client, err := coordinationv1client.NewForConfig(restConfig)
		if err != nil {
			fmt.Fprintf(os.Stderr, "etcd-conductor member-agent init: kubernetes client: %v\n", err)
			return 1
		}
		leases = client
		// The restore order is read from the owning Etcd's status: the member's Role allows a
		// get of that one Etcd, nothing else of it.
		scheme := runtime.NewScheme()
		if err := druidv1alpha1.AddToScheme(scheme); err != nil {
			fmt.Fprintf(os.Stderr, "etcd-conductor member-agent init: scheme: %v\n", err)
			return 1
		}
		if etcds, err = ctrlclient.New(restConfig, ctrlclient.Options{Scheme: scheme}); err != nil {
			fmt.Fprintf(os.Stderr, "etcd-conductor member-agent init: kubernetes client: %v\n", err)
			return 1
		}
	}
	init, err := agent.NewInitializer(cfg, leases, etcds, log)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd-conductor member-agent init: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := init.Run(ctx); err != nil {
		log.Error(err, "Member init failed")
		return 1
	}
	return 0
}
