package rollout

import "sort"

// classRank orders non-participating pods: what contributes least goes first. Unknown sits
// before Alive because only a live process is known to help restore quorum.
var classRank = map[ContainerClass]int{
	ContainerDead:      0,
	ContainerTransient: 1,
	ContainerUnknown:   2,
	ContainerAlive:     3,
}

// roleRank orders participating pods: followers cost no election, a pod of unknown role might
// be the leader, the known leader goes last.
var roleRank = map[Role]int{
	RoleFollower: 0,
	RoleUnknown:  1,
	RoleLeader:   2,
}

// rankNonParticipating sorts candidates by container class, then lowest ordinal, then name.
func rankNonParticipating(pods []PodState) []PodState {
	return rankBy(pods, func(p PodState) int {
		if r, ok := classRank[p.Container]; ok {
			return r
		}
		return classRank[ContainerUnknown]
	})
}

func rankBy(pods []PodState, rank func(PodState) int) []PodState {
	out := append([]PodState(nil), pods...)
	sort.SliceStable(out, func(i, j int) bool {
		ri, rj := rank(out[i]), rank(out[j])
		if ri != rj {
			return ri < rj
		}
		if out[i].Ordinal != out[j].Ordinal {
			return out[i].Ordinal < out[j].Ordinal
		}
		return out[i].Name < out[j].Name
	})
	return out
}
