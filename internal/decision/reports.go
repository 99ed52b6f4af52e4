package decision

import (
	"strconv"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	"github.com/etcd-conductor/etcd-conductor/internal/roles"
)

// ReportsFromClusterStatus turns one round of member answers into roles.Resolve's input: a report
// per member the member list names (its ID is known even when it does not answer) or that was
// asked. It lives here, next to the RoleInputs its callers implement, so that roles stays pure:
// it never sees an etcdclient type.
func ReportsFromClusterStatus(cs etcdclient.ClusterStatus) []roles.MemberReport {
	var out []roles.MemberReport
	index := map[string]int{}
	for _, m := range cs.MemberList {
		if m.Name == "" {
			continue // added to the cluster but never started, so it has no name yet
		}
		index[m.Name] = len(out)
		out = append(out, roles.MemberReport{Name: m.Name, ID: hexID(m.ID), IsLearner: m.IsLearner})
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
