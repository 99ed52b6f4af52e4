package reportauth

import (
	"context"
	"fmt"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultCheckInterval is how long a look at the policy and its binding is taken as current: a
// policy removed is noticed within it, and a fleet of Etcds that lost quorum costs two reads per
// interval, not per reconcile.
const DefaultCheckInterval = time.Minute

// Config configures a Checker.
type Config struct {
	// Reader reads the policy and its binding (cluster-scoped; uncached: the manager's cache
	// may be confined to namespaces).
	Reader client.Reader
	// AdmissionPolicy names the policy and its binding ("": none authenticates the reports).
	AdmissionPolicy string
	// TrustUnauthenticated takes every report as authentic, policy or not (the opt-out).
	TrustUnauthenticated bool
	// CheckInterval is DefaultCheckInterval when 0.
	CheckInterval time.Duration
}

// Checker answers, for every controller that acts on a member's report, whether reports are
// authenticated now. Safe for concurrent use.
type Checker struct {
	cfg Config
	now func() time.Time

	mu      sync.Mutex
	checked time.Time
	known   bool
	verdict string
}

// NewChecker builds a Checker.
func NewChecker(cfg Config) *Checker {
	if cfg.CheckInterval == 0 {
		cfg.CheckInterval = DefaultCheckInterval
	}
	return &Checker{cfg: cfg, now: time.Now}
}

// Unauthenticated says why a member's report proves nothing now, "" when it does. A read that
// fails for another reason than the objects' absence or a refusal keeps the last verdict (and is
// retried at the next call); with none yet, it is the reason.
func (c *Checker) Unauthenticated(ctx context.Context) string {
	if c.cfg.TrustUnauthenticated {
		return ""
	}
	name := c.cfg.AdmissionPolicy
	if name == "" {
		return "no admission policy is configured to authenticate them (operator configuration memberReports.admissionPolicy, the chart's memberReportPolicy)"
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if c.known && now.Sub(c.checked) < c.cfg.CheckInterval {
		return c.verdict
	}
	verdict, err := c.look(ctx, name)
	if err != nil {
		if c.known {
			return c.verdict
		}
		return err.Error()
	}
	c.checked, c.known, c.verdict = now, true, verdict
	return verdict
}

// The policy and its binding are cluster-scoped: a ClusterRole in every mode (the report-auth
// rules), watchNamespaces or not.
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies;validatingadmissionpolicybindings,verbs=get

func (c *Checker) look(ctx context.Context, name string) (string, error) {
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	found, verdict, err := c.get(ctx, "ValidatingAdmissionPolicy", name, policy)
	if verdict != "" || err != nil {
		return verdict, err
	}
	if !found {
		policy = nil
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	found, verdict, err = c.get(ctx, "ValidatingAdmissionPolicyBinding", name, binding)
	if verdict != "" || err != nil {
		return verdict, err
	}
	if !found {
		binding = nil
	}
	return Verify(name, policy, binding), nil
}

// get reads the cluster-scoped obj of that kind and name: found, or absent (Verify names it), or
// a verdict on its own (a refusal), or an error that decides nothing.
func (c *Checker) get(ctx context.Context, kind, name string, obj client.Object) (found bool, verdict string, err error) {
	err = c.cfg.Reader.Get(ctx, client.ObjectKey{Name: name}, obj)
	if err == nil {
		return true, "", nil
	}
	verdict, definite := readVerdict(err, kind, name)
	if !definite {
		return false, "", fmt.Errorf("could not read the %s %s: %w", kind, name, err)
	}
	return false, verdict, nil
}

// readVerdict sorts a failed read: not found is definite (Verify names it), a refusal too (the
// operator may not look, so it cannot know); anything else is not.
func readVerdict(err error, kind, name string) (verdict string, definite bool) {
	switch {
	case apierrors.IsNotFound(err):
		return "", true
	case apierrors.IsForbidden(err):
		return fmt.Sprintf("the operator may not read the %s %s (%v)", kind, name, err), true
	}
	return "", false
}
