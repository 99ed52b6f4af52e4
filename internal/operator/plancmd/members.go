package plancmd

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/roles"
	membershipctl "github.com/etcd-conductor/etcd-conductor/internal/operator/controller/membership"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/decision"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/memberaccess"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

// AskMembers is a MemberSource that asks the members the pipeline chose, the way the
// controller does. addresses overrides a target's "podIP:clientPort" by pod name, for members
// reached through `kubectl port-forward`; the certificate is still verified against the
// member's DNS name. When no member answers, the reports say so (all unreachable) and the
// error is returned too, so the output shows it while roles fall back to the Leases.
func AskMembers(pool memberaccess.Pool, creds conductortls.ClientMaterial, addresses map[string]string) MemberSource {
	return func(ctx context.Context, etcd *druidv1alpha1.Etcd, targets []memberaccess.Target) ([]roles.MemberReport, error) {
		if len(targets) == 0 {
			return nil, memberaccess.ErrNoMemberAddress
		}
		dialled := make([]memberaccess.Target, len(targets))
		for i, t := range targets {
			if address, ok := addresses[t.Name]; ok {
				t.Address = address
			}
			dialled[i] = t
		}
		cs, err := memberaccess.NewCluster(pool, etcd, memberaccess.ForMembers, creds, dialled).Statuses(ctx)
		return decision.ReportsFromClusterStatus(etcd, cs), err
	}
}

// AskAllMembers is an AnswerSource that asks every member pod, as the membership, recovery and
// defragmentation controllers do, and, when the membership plan waits on it, which voters the
// leader hears (membershipctl.Hear). addresses overrides targets as for AskMembers. A question
// no member answers is no error: the controllers decide on that too, and the output says why.
func AskAllMembers(pool memberaccess.Pool, creds conductortls.ClientMaterial, addresses map[string]string) AnswerSource {
	return func(ctx context.Context, etcd *druidv1alpha1.Etcd, pods []corev1.Pod) (Answers, error) {
		targets := memberaccess.Targets(etcd, pods)
		for i, t := range targets {
			if address, ok := addresses[t.Name]; ok {
				targets[i].Address = address
			}
		}
		// Its own connections: the target set differs from the rollout's question.
		members := memberaccess.NewCluster(pool, etcd, memberaccess.ForPlan, creds, targets)
		answers := Answers{Asked: true}
		if len(targets) == 0 {
			answers.QueryErr = memberaccess.ErrNoMemberAddress
			return answers, nil
		}
		cs, err := members.Statuses(ctx)
		answers.Status, answers.QueryErr = &cs, err
		answers.Heard = func(ctx context.Context) map[uint64]bool {
			return membershipctl.Hear(ctx, members, etcd, answers.answered())
		}
		return answers, nil
	}
}
