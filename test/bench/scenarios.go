package main

import (
	"context"
	"fmt"

	"github.com/etcd-conductor/etcd-conductor/test/bench/report"
)

// scenario is the state a rollout starts in.
type scenario struct {
	id       string
	replicas int32
	// strategies this scenario runs under (every strategy unless set).
	strategies []string
	// fault is injected before the instruments start: the figures measure the rollout under
	// the fault, not the fault itself.
	fault func(ctx context.Context, e *runEnv) error
	// beforeBump acts with the instruments running, just before the image changes.
	beforeBump func(ctx context.Context, e *runEnv) error
	// agentInterval is the member agents' lease renewal interval (framework default when empty).
	agentInterval string
	// onRequest: only run when named in -scenarios.
	onRequest bool
}

const staleRoleAgentInterval = "12s"

// The default set: healthy, one member dead and stale roles on 3, 5 and 7 members. Our
// concurrent strategy runs where the headroom allows more than one member at a time (5 and 7).
// The hung and partitioned scenarios run when named (-scenarios).
var (
	rollingAndOurs = []string{report.StrategyRollingUpdate, report.StrategyRollingUpdateMaxUnavailable, report.StrategyOnDeleteDirect}
	withConcurrent = append(append([]string{}, rollingAndOurs...), report.StrategyOnDeleteConcurrent)
	staleRoleOurs  = []string{report.StrategyOnDeleteLease, report.StrategyOnDeleteDirect}
)

func allScenarios() []scenario {
	staleRole := func(replicas int32) scenario {
		return scenario{id: fmt.Sprintf("%d-%s", replicas, report.ScenarioStaleRole), replicas: replicas, strategies: staleRoleOurs,
			beforeBump: forceLeaderToFirstFollower, agentInterval: staleRoleAgentInterval}
	}
	return []scenario{
		{id: "3-healthy", replicas: 3, strategies: rollingAndOurs},
		{id: "3-one-dead", replicas: 3, fault: dead(0), strategies: rollingAndOurs},
		staleRole(3),
		{id: "5-healthy", replicas: 5, strategies: withConcurrent},
		{id: "5-one-dead", replicas: 5, fault: dead(0), strategies: withConcurrent},
		staleRole(5),
		{id: "7-healthy", replicas: 7, strategies: withConcurrent},
		{id: "7-one-dead", replicas: 7, fault: dead(0), strategies: withConcurrent},
		staleRole(7),
		{id: "3-one-hung", replicas: 3, fault: hung(0), onRequest: true},
		{id: "3-one-partitioned", replicas: 3, fault: partitioned(0), onRequest: true},
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

// hung freezes member i's etcd (SIGSTOP; stack.EtcdCluster.HangMember).
func hung(i int) func(ctx context.Context, e *runEnv) error {
	return func(ctx context.Context, e *runEnv) error { return e.cluster.HangMember(ctx, i) }
}

// partitioned drops all of member i's pod traffic (stack.EtcdCluster.PartitionMember).
func partitioned(i int) func(ctx context.Context, e *runEnv) error {
	return func(ctx context.Context, e *runEnv) error { return e.cluster.PartitionMember(ctx, i) }
}
