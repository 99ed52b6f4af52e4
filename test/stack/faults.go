package stack

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// KillUntilReplaced makes member i dead until its pod is replaced: its etcd is killed and crashes
// on every start, and the fault is lifted the moment the pod is deleted, so the replacement (at
// the new revision) starts cleanly while the old pod never recovers on its own, whatever the
// update strategy waits for. It returns once the pod is not Ready. lift ends the fault (call it
// when the run ends; it is safe to call more than once).
func (c *EtcdCluster) KillUntilReplaced(ctx context.Context, i int) (lift func(), err error) {
	key, name := c.PodKey(i), c.PodName(i)
	pod, err := c.stack.Kube.CoreV1().Pods(c.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", key, err)
	}
	sim := c.stack.Sim
	sim.CrashOnStart(key, resources.EtcdContainerName, true)
	watchCtx, stopWatching := context.WithCancel(context.WithoutCancel(ctx))
	lift = func() {
		stopWatching()
		sim.CrashOnStart(key, resources.EtcdContainerName, false)
	}
	// Polled fast: the StatefulSet controller creates the replacement within a second.
	go func() {
		_ = wait.PollUntilContextCancel(watchCtx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			p, err := c.stack.Kube.CoreV1().Pods(c.Namespace).Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) || (err == nil && (p.UID != pod.UID || p.DeletionTimestamp != nil)) {
				sim.CrashOnStart(key, resources.EtcdContainerName, false)
				return true, nil
			}
			return false, nil
		})
	}()
	if err := sim.Kill(key, resources.EtcdContainerName); err != nil {
		lift()
		return nil, fmt.Errorf("killing %s: %w", key, err)
	}
	if err := c.WaitNotReady(ctx, i); err != nil {
		lift()
		return nil, err
	}
	return lift, nil
}

// The fault catalogue: every fault the e2e scenarios, the e2e operation × fault matrix and the
// benchmark inject on a member, defined once here (KillUntilReplaced above is the benchmark's
// and the e2e's "dead" member). Pods are addressed by ordinal.

// KillMember SIGKILLs member i's etcd once; the pod's restartPolicy brings it back with its data,
// as after an OOM kill or a crash.
func (c *EtcdCluster) KillMember(i int) error {
	if err := c.stack.Sim.Kill(c.PodKey(i), resources.EtcdContainerName); err != nil {
		return fmt.Errorf("killing %s: %w", c.PodKey(i), err)
	}
	return nil
}

// HangMember freezes member i's etcd (SIGSTOP) and returns once its pod is not Ready.
func (c *EtcdCluster) HangMember(ctx context.Context, i int) error {
	if err := c.stack.Sim.Hang(c.PodKey(i), resources.EtcdContainerName); err != nil {
		return fmt.Errorf("hanging %s: %w", c.PodKey(i), err)
	}
	return c.WaitNotReady(ctx, i)
}

// PartitionMember drops all of member i's pod traffic (peers, clients, the kubelet's probes) and
// returns once its pod is not Ready. HealMember lifts it.
func (c *EtcdCluster) PartitionMember(ctx context.Context, i int) error {
	if err := c.stack.Sim.Partition(c.PodKey(i)); err != nil {
		return fmt.Errorf("partitioning %s: %w", c.PodKey(i), err)
	}
	return c.WaitNotReady(ctx, i)
}

// HealMember lifts the network faults on member i's pod. A pod replaced meanwhile has a new
// network without the fault: nothing to lift then.
func (c *EtcdCluster) HealMember(i int) error {
	if err := c.stack.Sim.Heal(c.PodKey(i)); err != nil {
		return fmt.Errorf("healing %s: %w", c.PodKey(i), err)
	}
	return nil
}
