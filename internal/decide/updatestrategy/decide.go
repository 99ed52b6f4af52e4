package updatestrategy

import (
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/ruleid"
)

// RuleID names the rule that decided, stable across releases (metric label, Event reason through
// CamelCase, package ruleid).
type RuleID = ruleid.ID

const (
	// RuleGateOn: the gate is on, so OnDelete (switching to it is always safe: it deletes nothing).
	RuleGateOn RuleID = "ondelete/gate-on"
	// RuleGateOff: the gate is off and no rollout step is in flight, so RollingUpdate.
	RuleGateOff RuleID = "rolling-update/gate-off"
	// RuleHoldAnnounce: the gate is off, the StatefulSet is OnDelete and the hold is not yet
	// recorded on it. The OnDelete controller deletes nothing while the hold is recorded, so the
	// switch waits one pass for a step the OnDelete controller may have started before it.
	RuleHoldAnnounce RuleID = "hold-ondelete/announce"
	// RuleHoldTerminating: a member pod is terminating; the StatefulSet controller would delete
	// the next one alongside it.
	RuleHoldTerminating RuleID = "hold-ondelete/pod-terminating"
	// RuleHoldMissing: a member pod is deleted and not recreated yet.
	RuleHoldMissing RuleID = "hold-ondelete/pod-missing"
	// RuleHoldUpdatedNotReady: a pod already at the update revision has not rejoined the quorum
	// (not ready).
	RuleHoldUpdatedNotReady RuleID = "hold-ondelete/updated-not-ready"
	// RuleHoldReplicasOutOfRange: the StatefulSet asks for a replica count no Etcd can have
	// (negative, or above druidv1alpha1.MaxReplicas: someone wrote it past the protection). Its
	// pods are not sized from it, and OnDelete is kept: the StatefulSet controller deletes nothing.
	RuleHoldReplicasOutOfRange RuleID = "hold-ondelete/replicas-out-of-range"
)

// Pod is what the decision needs of one member pod.
type Pod struct {
	Name        string
	Revision    string
	Terminating bool
	Ready       bool
}

// Input is one observation.
type Input struct {
	// GateOn is QuorumAwareUpdatesWithOnDelete.
	GateOn bool
	// Current is the StatefulSet's update strategy type, "" when it does not exist yet.
	Current appsv1.StatefulSetUpdateStrategyType
	// HoldRecorded: the StatefulSet already carries the hold annotation from an earlier pass.
	HoldRecorded bool
	// Name is the StatefulSet's name, Replicas its spec.replicas: the pods it should run are
	// <Name>-<ordinal> for every ordinal below Replicas.
	Name     string
	Replicas int32
	// UpdateRevision is the StatefulSet's status.updateRevision.
	UpdateRevision string
	Pods           []Pod
}

// Decision is the strategy to write and why.
type Decision struct {
	Type   appsv1.StatefulSetUpdateStrategyType
	Rule   RuleID
	Reason string
}

// Held is true when OnDelete is kept although the gate is off.
func (d Decision) Held() bool {
	return d.Type == appsv1.OnDeleteStatefulSetStrategyType && d.Rule != RuleGateOn
}

// Decide returns the strategy for one observation.
func Decide(in Input) Decision {
	if in.GateOn {
		return Decision{Type: appsv1.OnDeleteStatefulSetStrategyType, Rule: RuleGateOn,
			Reason: "feature gate QuorumAwareUpdatesWithOnDelete is on [" + string(RuleGateOn) + "]"}
	}
	rolling := Decision{Type: appsv1.RollingUpdateStatefulSetStrategyType, Rule: RuleGateOff,
		Reason: "feature gate QuorumAwareUpdatesWithOnDelete is off and no rollout step is in flight [" + string(RuleGateOff) + "]"}
	if in.Current != appsv1.OnDeleteStatefulSetStrategyType {
		return rolling
	}
	hold := func(rule RuleID, format string, args ...any) Decision {
		return Decision{Type: appsv1.OnDeleteStatefulSetStrategyType, Rule: rule,
			Reason: fmt.Sprintf("keeping OnDelete although feature gate QuorumAwareUpdatesWithOnDelete is off: "+format+
				"; RollingUpdate once no member pod is terminating, missing or updated but not ready [%s]", append(args, rule)...)}
	}
	// Before anything is sized by the count: a StatefulSet written at 2147483647 replicas would
	// otherwise be a list of two billion names.
	if in.Replicas < 0 || in.Replicas > druidv1alpha1.MaxReplicas {
		return hold(RuleHoldReplicasOutOfRange, "StatefulSet %s asks for %d replicas, an Etcd has at most %d members (set it back to the Etcd's spec.replicas)",
			in.Name, in.Replicas, druidv1alpha1.MaxReplicas)
	}
	var terminating, notReady []string
	present := map[string]bool{}
	outdated := 0
	for _, p := range in.Pods {
		if in.UpdateRevision == "" || p.Revision != in.UpdateRevision {
			outdated++
		}
		present[p.Name] = true
		switch {
		case p.Terminating:
			terminating = append(terminating, p.Name)
		case in.UpdateRevision != "" && p.Revision == in.UpdateRevision && !p.Ready:
			notReady = append(notReady, p.Name)
		}
	}
	var missing []string
	for ordinal := range in.Replicas {
		if name := fmt.Sprintf("%s-%d", in.Name, ordinal); !present[name] {
			missing = append(missing, name)
		}
	}
	// With every pod at the update revision RollingUpdate has nothing to delete, whatever the
	// members' health: a member down after a rollout must not keep OnDelete forever.
	inFlight := outdated > 0
	switch {
	case inFlight && len(terminating) > 0:
		return hold(RuleHoldTerminating, "%s terminating", list(terminating))
	case inFlight && len(missing) > 0:
		return hold(RuleHoldMissing, "%s deleted and not recreated yet", list(missing))
	case inFlight && len(notReady) > 0:
		return hold(RuleHoldUpdatedNotReady, "%s at revision %s and not ready (not back in the quorum)", list(notReady), in.UpdateRevision)
	case !in.HoldRecorded:
		return hold(RuleHoldAnnounce, "telling the OnDelete controller to start no step before the switch")
	}
	return rolling
}

func list(names []string) string {
	sort.Strings(names)
	return strings.Join(names, ", ")
}
