// Package framework holds what integration and e2e tests share: Etcd objects with generated TLS,
// an in-process operator, and waiting helpers.
package framework

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/config/v1alpha1"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/features"
	"github.com/etcd-conductor/etcd-conductor/internal/operator"
	"github.com/etcd-conductor/etcd-conductor/tls/testpki"
)

// MemberAgentImage is the project image the node simulator maps to the freshly built binary.
const MemberAgentImage = "ghcr.io/etcd-conductor/etcd-conductor:test"

// EtcdImage is the etcd image for a version, as the node simulator maps it to a built binary.
func EtcdImage(version string) string { return "quay.io/coreos/etcd:v" + version }

// NewEtcd returns an Etcd with client and peer mTLS from the Secrets that CreateTLSSecrets makes.
func NewEtcd(namespace, name string, replicas int32, image string) *druidv1alpha1.Etcd {
	names := testpki.DefaultSecretNames(name)
	ref := func(n string) corev1.SecretReference { return corev1.SecretReference{Name: n} }
	tlsConfig := func(server string) *druidv1alpha1.TLSConfig {
		return &druidv1alpha1.TLSConfig{
			TLSCASecretRef:     druidv1alpha1.SecretReference{SecretReference: ref(names.CA)},
			ServerTLSSecretRef: ref(server),
			ClientTLSSecretRef: ref(names.Client),
		}
	}
	return &druidv1alpha1.Etcd{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: druidv1alpha1.EtcdSpec{
			Replicas: replicas,
			Labels:   map[string]string{"role": "test"},
			Etcd: druidv1alpha1.EtcdConfig{
				Image:        ptr.To(image),
				ClientUrlTLS: tlsConfig(names.Server),
				PeerUrlTLS:   &druidv1alpha1.PeerTLSConfig{TLSConfig: *tlsConfig(names.Peer)},
			},
		},
	}
}

// CreateTLSSecrets generates a PKI for the Etcd and stores it as cert-manager-layout Secrets.
func CreateTLSSecrets(ctx context.Context, c client.Client, namespace, etcdName string) (*testpki.EtcdPKI, error) {
	pki, err := testpki.NewEtcdPKI(etcdName, namespace)
	if err != nil {
		return nil, fmt.Errorf("generating PKI: %w", err)
	}
	for _, s := range pki.Secrets(namespace, testpki.DefaultSecretNames(etcdName)) {
		if err := c.Create(ctx, s); err != nil {
			return nil, fmt.Errorf("creating Secret %s: %w", s.Name, err)
		}
	}
	return pki, nil
}

// OperatorOptions configure an in-process operator.
type OperatorOptions struct {
	FeatureGates map[string]bool
	// BackupStores is the operator's allow-list of store locations; nil: the tests' own, any
	// endpoint over http too (the test stores are versitygw over plain http) and the default
	// Local root.
	BackupStores *configv1alpha1.BackupStoresConfiguration
	// MemberNetworkPolicy is the operator's memberNetworkPolicy; nil: none is made.
	MemberNetworkPolicy *configv1alpha1.MemberNetworkPolicyConfiguration
	MemberRoleSource    configv1alpha1.MemberRoleSource
	MemberAgentImage    string
	// RequeueInterval of the ondelete controller (default 1s in tests).
	RequeueInterval time.Duration
	// MemberAgentInterval is the sidecar's lease renewal period (default 1s in tests).
	MemberAgentInterval string
	// TrustRecheck is how often TLS Secrets are read again for a change (0: the operator's
	// default, 2 minutes).
	TrustRecheck time.Duration
	// SecretPropagation is how long the operator gives the kubelet to refresh a changed Secret in
	// the pods (0: the operator's default, 2 minutes; the node simulator takes VolumeSyncPeriod).
	SecretPropagation time.Duration
	// InvalidInputRetry is how soon the Etcd controller looks again at an Etcd with bad input
	// (a Secret it cannot use: Secrets are not watched). 0: the operator's default, 30s.
	InvalidInputRetry time.Duration
	// WatchNamespaces restricts the operator to these namespaces (empty: all).
	WatchNamespaces []string
	Logger          logr.Logger
	// OnDelete, when set, adjusts the OnDelete controller's configuration (handover, catch-up
	// gate, concurrency) before defaults are applied; unset fields keep the defaults.
	OnDelete func(*configv1alpha1.OnDeleteControllerConfiguration)
	// SpecAutoReconcile is etcd-druid's controllers.etcd.enableEtcdSpecAutoReconcile (nil: on).
	SpecAutoReconcile *bool
	// CopyBackupsTasks runs the EtcdCopyBackupsTask controller (etcd-druid's
	// controllers.etcdCopyBackupsTask.enabled, off by default).
	CopyBackupsTasks bool
	// EtcdMember is etcd-druid's controllers.etcd.etcdMember (unknownThreshold, notReadyThreshold;
	// nil: their defaults, 1m and 5m).
	EtcdMember *configv1alpha1.EtcdMemberConfiguration
	// MemberReports is the operator's memberReports (zero: the member report policy the test
	// stack installs, StackMemberReportPolicy; a cluster without it gets no restore on a report).
	MemberReports configv1alpha1.MemberReportsConfiguration
	// APIServerLink, when set, carries the operator's connections to the apiserver, so that a
	// test can cut them (the apiserver unreachable from the operator) and restore them.
	APIServerLink *APIServerLink
}

// StackMemberReportPolicy is the chart's member report policy as test/stack installs it (release
// "stack"): the policy the in-process operator checks before it restores on a member's report.
const StackMemberReportPolicy = "stack-etcd-conductor-member-report"

// RunningOperator is an operator started by StartOperator.
type RunningOperator struct {
	Operator *operator.Operator
	Registry *prometheus.Registry
	cancel   context.CancelFunc
	done     chan error
}

// Stop stops the operator and waits for it, as a pod stop or restart would.
func (r *RunningOperator) Stop() error {
	if r.cancel == nil {
		return nil
	}
	r.cancel()
	r.cancel = nil
	err := <-r.done
	r.Operator.Pool.Close()
	return err
}

// StartOperator runs the operator in this process and stops it when the test ends.
func StartOperator(t testing.TB, restCfg *rest.Config, o OperatorOptions) *RunningOperator {
	t.Helper()
	if o.Logger.GetSink() == nil {
		// Controller logs drown test output; ask for them with ETCD_CONDUCTOR_TEST_LOG=1.
		o.Logger = logr.Discard()
		if os.Getenv("ETCD_CONDUCTOR_TEST_LOG") == "1" {
			o.Logger = testr.NewWithInterface(t, testr.Options{Verbosity: 1})
		}
	}
	r, err := RunOperator(restCfg, o)
	if err != nil {
		t.Fatalf("starting operator: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Stop(); err != nil {
			t.Errorf("operator stopped with an error: %v", err)
		}
	})
	return r
}

// RunOperator runs the operator in this process against restCfg, as `manager` would, until Stop.
func RunOperator(restCfg *rest.Config, o OperatorOptions) (*RunningOperator, error) {
	cfg := &configv1alpha1.OperatorConfiguration{
		TypeMeta:     metav1.TypeMeta{APIVersion: configv1alpha1.APIVersion, Kind: configv1alpha1.Kind},
		FeatureGates: o.FeatureGates,
	}
	cfg.Controllers.OnDelete.MemberRoleSource = o.MemberRoleSource
	cfg.Controllers.OnDelete.RequeueInterval.Duration = o.RequeueInterval
	if cfg.Controllers.OnDelete.RequeueInterval.Duration == 0 {
		cfg.Controllers.OnDelete.RequeueInterval.Duration = time.Second
	}
	if o.OnDelete != nil {
		o.OnDelete(&cfg.Controllers.OnDelete)
	}
	cfg.WatchNamespaces = o.WatchNamespaces
	cfg.Controllers.Etcd.EnableEtcdSpecAutoReconcile = o.SpecAutoReconcile
	cfg.Controllers.Etcd.EtcdMember = o.EtcdMember
	cfg.MemberReports = o.MemberReports
	if cfg.MemberReports == (configv1alpha1.MemberReportsConfiguration{}) {
		cfg.MemberReports.AdmissionPolicy = StackMemberReportPolicy
	}
	if o.CopyBackupsTasks {
		cfg.Controllers.EtcdCopyBackupsTask = &configv1alpha1.EtcdCopyBackupsTaskControllerConfiguration{Enabled: true}
	}
	cfg.BackupStores = configv1alpha1.BackupStoresConfiguration{AllowInsecureEndpoints: true}
	if o.BackupStores != nil {
		cfg.BackupStores = *o.BackupStores
	}
	cfg.MemberNetworkPolicy = o.MemberNetworkPolicy
	cfg.MetricsBindAddress = "0"
	cfg.HealthProbeBindAddress = "0"
	cfg.Default()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("operator configuration: %w", err)
	}
	gates, err := features.New(cfg.FeatureGates)
	if err != nil {
		return nil, err
	}
	logger := o.Logger
	if logger.GetSink() == nil {
		logger = logr.Discard()
	}
	image := o.MemberAgentImage
	if image == "" {
		image = MemberAgentImage
	}
	interval := o.MemberAgentInterval
	if interval == "" {
		interval = "1s"
	}
	if o.APIServerLink != nil {
		restCfg = rest.CopyConfig(restCfg)
		restCfg.Dial = o.APIServerLink.DialContext
	}
	reg := prometheus.NewRegistry()
	op, err := operator.New(restCfg, operator.Options{
		Config: cfg, Gates: gates, MemberAgentImage: image, MemberAgentInterval: interval, TrustRecheck: o.TrustRecheck, SecretPropagation: o.SecretPropagation, InvalidInputRetry: o.InvalidInputRetry,
		Logger: logger, Registry: reg,
		AllowSeveralInProcess: true,
	})
	if err != nil {
		return nil, fmt.Errorf("creating operator: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &RunningOperator{Operator: op, Registry: reg, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- op.Manager.Start(ctx) }()
	return r, nil
}

// Eventually polls cond until it returns true or the timeout passes, then fails the test with
// the last message cond gave.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (bool, string)) {
	t.Helper()
	last := ""
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, msg := cond(ctx)
		last = msg
		return ok, nil
	})
	if err != nil {
		t.Fatalf("timed out after %s waiting for %s: %s", timeout, what, last)
	}
}

// SetEtcdImage changes spec.etcd.image with a merge patch (no conflict with status writers).
func SetEtcdImage(ctx context.Context, c client.Client, etcd *druidv1alpha1.Etcd, image string) error {
	patch := client.MergeFrom(etcd.DeepCopy())
	etcd.Spec.Etcd.Image = ptr.To(image)
	if err := c.Patch(ctx, etcd, patch); err != nil {
		return fmt.Errorf("setting image of Etcd %s/%s to %s: %w", etcd.Namespace, etcd.Name, image, err)
	}
	return nil
}
