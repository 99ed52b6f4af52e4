package main

import (
	"context"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The history is small (the fixtures stay tens of KB) but has what a Kubernetes etcd has: keys
// created, updated and deleted, transactions of several events at one revision, a range delete,
// a key under a lease, values that are not ASCII.

// before is written before the full snapshot.
func before(ctx context.Context, s *source) error {
	for i := range 30 {
		if _, err := s.kv.Put(ctx, fmt.Sprintf("/registry/pods/default/pod-%02d", i), value("Pod", i, 1)); err != nil {
			return err
		}
	}
	for i := 0; i < 30; i += 7 {
		if _, err := s.kv.Delete(ctx, fmt.Sprintf("/registry/pods/default/pod-%02d", i)); err != nil {
			return err
		}
	}
	_, err := s.kv.Txn(ctx).Then(
		clientv3.OpPut("/registry/configmaps/kube-system/cm-a", "a"),
		clientv3.OpPut("/registry/configmaps/kube-system/cm-b", "b"),
	).Commit()
	return err
}

// betweenRevisionAndSnapshot is written after the full snapshot's revision is read and before
// the snapshot is taken, as happens to etcd-backup-restore under writes: its full snapshot then
// holds more than its name says, and its first delta repeats that event.
func betweenRevisionAndSnapshot(ctx context.Context, s *source) error {
	_, err := s.kv.Put(ctx, "/registry/events/default/after-the-revision-read", "in the full snapshot and the first delta")
	return err
}

// deltas are the writes of each delta, in order.
var deltas = []func(ctx context.Context, s *source) error{
	func(ctx context.Context, s *source) error { // updates, deletes, a transaction
		for i := 1; i < 30; i += 3 {
			if _, err := s.kv.Put(ctx, fmt.Sprintf("/registry/pods/default/pod-%02d", i), value("Pod", i, 2)); err != nil {
				return err
			}
		}
		if _, err := s.kv.Delete(ctx, "/registry/configmaps/kube-system/cm-a"); err != nil {
			return err
		}
		_, err := s.kv.Txn(ctx).Then(
			clientv3.OpPut("/registry/leases/kube-node-lease/node-1", "renewed"),
			clientv3.OpDelete("/registry/pods/default/pod-02"),
			clientv3.OpPut("/registry/configmaps/kube-system/cm-b", "b2"),
		).Commit()
		return err
	},
	func(ctx context.Context, s *source) error { // a lease, a range delete, UTF-8
		lease, err := s.lease.Grant(ctx, 24*3600)
		if err != nil {
			return err
		}
		if _, err := s.kv.Put(ctx, "/registry/events/default/leased", "expires in a day", clientv3.WithLease(lease.ID)); err != nil {
			return err
		}
		if _, err := s.kv.Delete(ctx, "/registry/pods/default/pod-1", clientv3.WithPrefix()); err != nil {
			return err
		}
		_, err = s.kv.Put(ctx, "/registry/secrets/default/ünïcödé", "värde — ✓")
		return err
	},
	func(ctx context.Context, s *source) error { // a key recreated after its delete, more puts
		if _, err := s.kv.Put(ctx, "/registry/configmaps/kube-system/cm-a", "a again"); err != nil {
			return err
		}
		for i := range 5 {
			if _, err := s.kv.Put(ctx, fmt.Sprintf("/registry/nodes/node-%d", i), value("Node", i, 3)); err != nil {
				return err
			}
		}
		return nil
	},
}

// value is a small JSON document standing for a Kubernetes object.
func value(kind string, i, generation int) string {
	return fmt.Sprintf(`{"kind":"%s","name":"%s-%02d","generation":%d,"spec":"%s"}`, kind, strings.ToLower(kind), i, generation, strings.Repeat("x", 20+i))
}
