package main

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/config/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/features"
	"github.com/etcd-conductor/etcd-conductor/test/bench/report"
	"github.com/etcd-conductor/etcd-conductor/test/stack"
)

// maxUnavailableGate is the Kubernetes feature gate behind StatefulSet maxUnavailable (alpha in
// 1.36). The kube-apiserver keeps it on for the whole run (it only decides whether the field is
// stored); the kube-controller-manager runs with it only for the maxUnavailable strategy,
// because with the gate on the StatefulSet controller takes its maxUnavailable path (default 1)
// for every RollingUpdate StatefulSet, which would make plain rolling-update another strategy.
const maxUnavailableGate = "MaxUnavailableStatefulSet=true"

// strategy is one way to roll the members.
type strategy struct {
	id string
	// onDelete turns our gate on: the StatefulSet becomes OnDelete and our controller deletes.
	onDelete   bool
	roleSource configv1alpha1.MemberRoleSource
	// maxUnavailable patches rollingUpdate.maxUnavailable: 1 into the StatefulSet and needs the
	// controller-manager gate.
	maxUnavailable bool
	// tune adjusts the OnDelete controller's configuration beyond the role source.
	tune func(*configv1alpha1.OnDeleteControllerConfiguration)
	// concurrency is the maxConcurrentMemberUpdates tune sets, for the deletion auditor.
	concurrency int
}

// benchConcurrency is ours with concurrency: as many participating members at once as the
// quorum's headroom allows (2 of 5, 3 of 7), never the leader.
const benchConcurrency = 3

var strategies = map[string]strategy{
	report.StrategyRollingUpdate:               {id: report.StrategyRollingUpdate},
	report.StrategyRollingUpdateMaxUnavailable: {id: report.StrategyRollingUpdateMaxUnavailable, maxUnavailable: true},
	report.StrategyOnDeleteLease:               {id: report.StrategyOnDeleteLease, onDelete: true, roleSource: configv1alpha1.MemberRoleSourceLeaseOnly},
	report.StrategyOnDeleteDirect:              {id: report.StrategyOnDeleteDirect, onDelete: true, roleSource: configv1alpha1.MemberRoleSourceAuto},
	report.StrategyOnDeleteConcurrent: {id: report.StrategyOnDeleteConcurrent, onDelete: true, roleSource: configv1alpha1.MemberRoleSourceAuto,
		tune: setConcurrency(benchConcurrency), concurrency: benchConcurrency},
}

// kcmGate wants the controller-manager gate on (true), off (false), or does not care (nil).
func (s strategy) kcmGate() *bool {
	if s.onDelete {
		return nil // OnDelete StatefulSets never reach the rolling-update code
	}
	on := s.maxUnavailable
	return &on
}

func (s strategy) gates() map[string]bool {
	return map[string]bool{string(features.QuorumAwareUpdatesWithOnDelete): s.onDelete}
}

// order arranges the strategies of one scenario so the controller-manager restarts at most once:
// the RollingUpdate variant matching the current gate first, ours in the middle, the other last.
func order(ids []string, gateOn bool) []string {
	var first, middle, last []string
	for _, id := range ids {
		g := strategies[id].kcmGate()
		switch {
		case g == nil:
			middle = append(middle, id)
		case *g == gateOn:
			first = append(first, id)
		default:
			last = append(last, id)
		}
	}
	return append(append(first, middle...), last...)
}

// controllerManager tracks the gate the kube-controller-manager runs with and restarts it when a
// strategy needs the other setting.
type controllerManager struct {
	stack  *stack.Stack
	gateOn bool
	// Restarts counts the switches, for the log.
	Restarts int
}

func (c *controllerManager) ensure(ctx context.Context, s strategy) error {
	want := s.kcmGate()
	if want == nil || *want == c.gateOn {
		return nil
	}
	gates := ""
	if *want {
		gates = maxUnavailableGate
	}
	if err := c.stack.Cluster.RestartControllerManager(ctx, gates); err != nil {
		return fmt.Errorf("switching the controller-manager's %s to %v: %w", maxUnavailableGate, *want, err)
	}
	c.gateOn = *want
	c.Restarts++
	return nil
}

// setMaxUnavailable patches rollingUpdate.maxUnavailable: 1 into the StatefulSet the operator
// created (it keeps an existing rollingUpdate block) and checks the apiserver stored it: without
// the gate it silently drops the field.
func setMaxUnavailable(ctx context.Context, c client.Client, namespace, name string) error {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	sts := &appsv1.StatefulSet{}
	deadline := time.Now().Add(time.Minute)
	for {
		err := c.Get(ctx, key, sts)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting for StatefulSet %s: %w", key, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if sts.Spec.UpdateStrategy.Type != appsv1.RollingUpdateStatefulSetStrategyType {
		return fmt.Errorf("StatefulSet %s has update strategy %s, want RollingUpdate", key, sts.Spec.UpdateStrategy.Type)
	}
	patch := []byte(`{"spec":{"updateStrategy":{"rollingUpdate":{"maxUnavailable":1}}}}`)
	if err := c.Patch(ctx, sts, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("setting maxUnavailable on StatefulSet %s: %w", key, err)
	}
	if err := c.Get(ctx, key, sts); err != nil {
		return err
	}
	ru := sts.Spec.UpdateStrategy.RollingUpdate
	if ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 1 {
		return fmt.Errorf("StatefulSet %s did not keep maxUnavailable: 1 (is %s on for the kube-apiserver?)", key, maxUnavailableGate)
	}
	return nil
}
