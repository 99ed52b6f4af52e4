package decision

import (
	"strconv"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/roles"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/memberaccess"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// ReportsFromClusterStatus turns one round of member answers into roles.Resolve's input: a report
// per pod whose member the member list names (its ID is known even when it does not answer) or
// that was asked, by pod name (targets are pods; a member's etcd name is mapped to its pod by
// resources.PodOfMember). A listed member of no pod of etcd is left out: roles are resolved for
// pods only. It lives here, next to the RoleInputs its callers implement, so that roles stays
// pure: it never sees an etcdclient type.
func ReportsFromClusterStatus(etcd *druidv1alpha1.Etcd, cs memberaccess.ClusterStatus) []roles.MemberReport {
	var out []roles.MemberReport
	index := map[string]int{}
	for _, m := range cs.MemberList {
		// A member added but never started has no name yet; it has no role either.
		pod, ok := resources.PodOfMember(etcd, m.Name)
		if !ok {
			continue
		}
		index[pod] = len(out)
		out = append(out, roles.MemberReport{Name: pod, ID: hexID(m.ID), IsLearner: m.IsLearner})
	}
	for _, s := range cs.Members {
		i, ok := index[s.Name]
		if !ok {
			i = len(out)
			index[s.Name] = i
			out = append(out, roles.MemberReport{Name: s.Name})
		}
		if s.Reachable {
			out[i].Reachable = true
			out[i].ID = hexID(s.ID)
			out[i].LeaderID = hexID(s.LeaderID)
			out[i].AppliedIndex = s.RaftAppliedIndex
			out[i].IsLearner = out[i].IsLearner || s.IsLearner
		}
	}
	return out
}

func hexID(id uint64) string {
	if id == 0 {
		return ""
	}
	return strconv.FormatUint(id, 16)
}
