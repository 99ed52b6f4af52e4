package main

import (
	"context"
	"fmt"

	"github.com/etcd-conductor/etcd-conductor/internal/resources"
	"github.com/etcd-conductor/etcd-conductor/test/bench/report"
)

// scenario is the state a rollout starts in.
type scenario struct {
	id       string
	replicas int32
	// strategies this scenario runs under (all four unless set).
	strategies []string
	// fault is injected before the instruments start: the figures measure the rollout under
	// the fault, not the fault itself.
	fault func(ctx context.Context, e *runEnv) error
	// beforeBump acts with the instruments running, just before the image changes.
	beforeBump func(ctx context.Context, e *runEnv) error
	// agentInterval is the member agents' lease renewal interval (framework default when empty).
	agentInterval string
}

const staleRoleAgentInterval = "12s"

func allScenarios() []scenario {
	return []scenario{
		{id: "3-healthy", replicas: 3},
		{id: "3-one-dead", replicas: 3, fault: dead(0)},
		{id: "3-one-hung", replicas: 3, fault: hung(0)},
		{id: "3-one-partitioned", replicas: 3, fault: partitioned(0)},
		{id: "5-healthy", replicas: 5},
		{id: "5-one-dead", replicas: 5, fault: dead(0)},
		{id: report.ScenarioStaleRole, replicas: 3, strategies: []string{report.StrategyOnDeleteLease, report.StrategyOnDeleteDirect},
			beforeBump: forceLeaderToFirstFollower, agentInterval: staleRoleAgentInterval},
	}
}

func (s scenario) strategyIDs() []string {
	if len(s.strategies) > 0 {
		return s.strategies
	}
	return report.Strategies
}

// dead makes member i dead until its pod is replaced (stack.EtcdCluster.KillUntilReplaced).
func dead(i int) func(ctx context.Context, e *runEnv) error {
	return func(ctx context.Context, e *runEnv) error {
		lift, err := e.cluster.KillUntilReplaced(ctx, i)
		if err != nil {
			return err
		}
		e.cleanups = append(e.cleanups, lift)
		return nil
	}
}

// hung freezes member i's etcd (SIGSTOP).
func hung(i int) func(ctx context.Context, e *runEnv) error {
	return func(ctx context.Context, e *runEnv) error {
		if err := e.stack.Sim.Hang(e.cluster.PodKey(i), resources.EtcdContainerName); err != nil {
			return fmt.Errorf("hanging %s: %w", e.cluster.PodKey(i), err)
		}
		return e.cluster.WaitNotReady(ctx, i)
	}
}

// partitioned drops all of member i's pod traffic.
func partitioned(i int) func(ctx context.Context, e *runEnv) error {
	return func(ctx context.Context, e *runEnv) error {
		if err := e.stack.Sim.Partition(e.cluster.PodKey(i)); err != nil {
			return fmt.Errorf("partitioning %s: %w", e.cluster.PodKey(i), err)
		}
		return e.cluster.WaitNotReady(ctx, i)
	}
}
