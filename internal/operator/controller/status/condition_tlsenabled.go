package status

import (
	"fmt"
	"strings"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/transport"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// runningTransport is what the members run: the StatefulSet's, which a refused TLS change leaves
// as it was and a move to TLS takes there stage by stage, else (before it exists) what the spec
// asks for.
func runningTransport(o Inputs) transport.Stages {
	if t, ok := resources.RunningTransport(o.StatefulSet); ok {
		return t
	}
	return resources.TransportOf(o.Etcd)
}

// tlsEnabledCondition is True while client and peer traffic are both TLS; False names what is
// plain HTTP, which anyone on the pod network can read and write.
func tlsEnabledCondition(t transport.Stages) druidv1alpha1.Condition {
	c := druidv1alpha1.Condition{Type: druidv1alpha1.ConditionTypeTLSEnabled}
	plain := resources.PlaintextKinds(t)
	if len(plain) == 0 {
		c.Status, c.Reason, c.Message = druidv1alpha1.ConditionTrue, ReasonTLS, "client and peer traffic use mutual TLS"
		return c
	}
	c.Status, c.Reason = druidv1alpha1.ConditionFalse, ReasonPlaintextTraffic
	c.Message = fmt.Sprintf("%s traffic is unencrypted and unauthenticated (plain HTTP)", strings.Join(plain, " and "))
	if t.Client == transport.Adding || t.Peer == transport.Adding {
		c.Reason = ReasonMovingToTLS
		c.Message += fmt.Sprintf("; moving to TLS (%s)", t)
	}
	return c
}
