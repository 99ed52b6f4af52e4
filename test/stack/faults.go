package stack

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/etcd-conductor/etcd-conductor/internal/resources"
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
