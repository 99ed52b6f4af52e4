package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
)

// DefaultCallTimeout bounds the status call when the flags do not; the renewal interval's default
// is memberlease.DefaultRenewInterval, which the operator's timing allows for.
const DefaultCallTimeout = 2 * time.Second

// Config is what the sidecar's flags carry.
type Config struct {
	// Endpoint is the local member's client URL, https://$(POD_IP):2379 (http:// with
	// ClientFiles.Plaintext).
	Endpoint string
	// ServerName is verified against the member's certificate: $(POD_NAME).<etcd>-peer.<ns>.svc.
	ServerName string
	ClientFiles
	// Lease is this pod's Lease (its pod name) in Namespace.
	Lease     string
	Namespace string
	// Interval between renewals; CallTimeout bounds the status call (and the dial).
	Interval    time.Duration
	CallTimeout time.Duration
}

// Validate reports every missing required setting.
func (c Config) Validate() error {
	errs := []error{c.ClientFiles.Validate()}
	for _, f := range []struct{ flag, value string }{
		{"endpoint", c.Endpoint}, {"server-name", c.ServerName}, {"lease", c.Lease}, {"namespace", c.Namespace},
	} {
		if f.value == "" {
			errs = append(errs, fmt.Errorf("--%s is required", f.flag))
		}
	}
	return errors.Join(errs...)
}

// Agent renews one Lease on behalf of one member.
type Agent struct {
	cfg    Config
	leases coordinationv1client.LeaseInterface
	log    logr.Logger
	now    func() time.Time

	member      *etcdclient.MemberConn
	fingerprint string
}

// New checks cfg and prepares an agent; it does not contact anything yet.
func New(cfg Config, leases coordinationv1client.LeasesGetter, log logr.Logger) (*Agent, error) {
	if cfg.Interval <= 0 {
		cfg.Interval = memberlease.DefaultRenewInterval
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Agent{
		cfg:    cfg,
		leases: leases.Leases(cfg.Namespace),
		log:    log.WithValues("lease", cfg.Namespace+"/"+cfg.Lease, "endpoint", cfg.Endpoint),
		now:    time.Now,
	}, nil
}

// Run renews at once and then every interval until ctx is done. Failures are logged and retried
// at the next tick; Run returns nil when ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	defer a.close()
	a.log.Info("Member agent started", "interval", a.cfg.Interval)
	ticker := time.NewTicker(a.cfg.Interval)
	defer ticker.Stop()
	for {
		if err := a.Renew(ctx); err != nil && ctx.Err() == nil {
			// Expected while the member is down or starting: no stack trace every interval.
			a.log.Info("Lease not renewed", "reason", err.Error())
		}
		select {
		case <-ctx.Done():
			a.log.Info("Member agent stopping")
			return nil
		case <-ticker.C:
		}
	}
}

// Renew asks the member for its status and, if it answers, writes holderIdentity and renewTime.
func (a *Agent) Renew(ctx context.Context) error {
	member, err := a.memberClient()
	if err != nil {
		return err
	}
	status, err := member.Status(ctx)
	if err != nil {
		// Not renewing is the point: the Lease expires and tells the operator.
		return fmt.Errorf("member did not answer, leaving the lease to expire: %w", err)
	}
	holder := memberlease.HolderIdentity(status.ID, status.ClusterID, status.IsLeader())
	if status.IsLearner {
		holder = memberlease.LearnerHolderIdentity(status.ID, status.ClusterID)
	}
	if err := a.patchLease(ctx, holder); err != nil {
		return err
	}
	a.log.V(1).Info("Lease renewed", "holderIdentity", holder)
	return nil
}

func (a *Agent) patchLease(ctx context.Context, holder string) error {
	renew := metav1.NewMicroTime(a.now())
	patch, err := json.Marshal(map[string]any{
		"spec": map[string]any{"holderIdentity": holder, "renewTime": renew},
	})
	if err != nil {
		return fmt.Errorf("encode lease patch: %w", err)
	}
	// A merge patch of a missing object fails with NotFound instead of creating it, which
	// keeps Lease creation (and ownership) with the Etcd reconciler.
	_, err = a.leases.Patch(ctx, a.cfg.Lease, types.MergePatchType, patch, metav1.PatchOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("lease %s/%s does not exist yet (the Etcd reconciler creates it): %w", a.cfg.Namespace, a.cfg.Lease, err)
	case err != nil:
		return fmt.Errorf("renew lease %s/%s: %w", a.cfg.Namespace, a.cfg.Lease, err)
	}
	return nil
}

// memberClient reloads the certificate files on every round, since a mounted Secret is rotated
// in place, and only redials when their content changed.
func (a *Agent) memberClient() (*etcdclient.MemberConn, error) {
	creds, err := a.cfg.ClientFiles.Load()
	if err != nil {
		return nil, fmt.Errorf("load client certificates: %w", err)
	}
	if a.member != nil && creds.Fingerprint() == a.fingerprint {
		return a.member, nil
	}
	member, err := etcdclient.DialMember(creds, etcdclient.Target{
		Name: a.cfg.Lease, Address: a.cfg.Endpoint, ServerName: a.cfg.ServerName,
	}, etcdclient.Options{DialTimeout: a.cfg.CallTimeout, CallTimeout: a.cfg.CallTimeout})
	if err != nil {
		return nil, err
	}
	if a.member != nil {
		a.log.Info("Client certificates changed, reconnecting")
		a.close()
	}
	a.member, a.fingerprint = member, creds.Fingerprint()
	return member, nil
}

func (a *Agent) close() {
	if a.member == nil {
		return
	}
	if err := a.member.Close(); err != nil {
		a.log.Error(err, "Closing the member connection")
	}
	a.member = nil
}
