package takeover

import (
	"fmt"
	"slices"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/ruleid"
)

// DruidFinalizer is the finalizer etcd-druid puts on every Etcd it reconciles (and removes only
// when it has deleted the Etcd's objects): the mark that druid manages the Etcd. It stays when
// druid is stopped or uninstalled, so it also marks an Etcd whose objects are still druid's.
const DruidFinalizer = "druid.gardener.cloud/etcd-druid"

// Rule ids.
const (
	RuleNotDruid         ruleid.ID = "takeover/not-druid-managed"
	RuleHoldDruidManaged ruleid.ID = "takeover/hold-druid-managed"
)

// Decision says whether the controllers leave the Etcd alone.
type Decision struct {
	Held   bool
	Rule   ruleid.ID
	Reason string
}

// Decide holds an Etcd that carries etcd-druid's finalizer: no controller reads its members,
// writes its objects or its status; the Etcd reconciler says why in an Event.
func Decide(etcd *druidv1alpha1.Etcd) Decision {
	if etcd == nil || !slices.Contains(etcd.Finalizers, DruidFinalizer) {
		return Decision{Rule: RuleNotDruid, Reason: "no etcd-druid finalizer"}
	}
	return Decision{Held: true, Rule: RuleHoldDruidManaged, Reason: fmt.Sprintf(
		"etcd-druid manages this Etcd (finalizer %s): etcd-conductor leaves it and its objects as they are; "+
			"switching a running cluster in place is not built yet (docs/design/druid-takeover.md), switching through its backup is (docs/druid-compatibility.md)",
		DruidFinalizer)}
}
