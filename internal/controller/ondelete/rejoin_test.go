package ondelete

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
)

// endings hands on how watches ended, in order.
type endings struct{ ch chan string }

func newEndings() *endings { return &endings{ch: make(chan string, 16)} }

func (e *endings) record(outcome string) { e.ch <- outcome }

func (e *endings) next(t *testing.T) string {
	t.Helper()
	select {
	case o := <-e.ch:
		return o
	case <-time.After(5 * time.Second):
		t.Fatal("no watch ended within 5s")
		return ""
	}
}

// servesAfter is a read that serves from its n-th round on, counting rounds.
type servesAfter struct {
	n      int32
	rounds atomic.Int32
}

func (s *servesAfter) read(context.Context) bool { return s.rounds.Add(1) >= s.n }

// at names the targets of members at their first address.
func at(names ...string) []etcdclient.Target {
	out := make([]etcdclient.Target, len(names))
	for i, n := range names {
		out[i] = etcdclient.Target{Name: n, Address: n + ":2379"}
	}
	return out
}

func testStatefulSet() *appsv1.StatefulSet {
	return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "etcd-main"}}
}

func TestRejoinWatch(t *testing.T) {
	const pace = 5 * time.Millisecond
	sts := testStatefulSet()
	key := types.NamespacedName{Namespace: sts.Namespace, Name: sts.Name}

	t.Run("wakes the controller once a member serves, and only then", func(t *testing.T) {
		ends := newEndings()
		w := newRejoinWatch(pace, ends.record)
		read := &servesAfter{n: 4}
		w.watch(context.Background(), sts, at("etcd-main-1"), time.Minute, read.read)
		if got := ends.next(t); got != RejoinWatchServed {
			t.Fatalf("ended %s, want %s", got, RejoinWatchServed)
		}
		select {
		case ev := <-w.events:
			if ev.Object.GetName() != sts.Name || ev.Object.GetNamespace() != sts.Namespace {
				t.Errorf("woken for %s/%s, want %s", ev.Object.GetNamespace(), ev.Object.GetName(), key)
			}
		default:
			t.Fatal("no wake-up sent")
		}
		if n := read.rounds.Load(); n != 4 {
			t.Errorf("%d rounds of reads, want 4 (the 4th served)", n)
		}
		if got := w.watching(key); got != nil {
			t.Errorf("still watching %v after it ended", got)
		}
	})

	t.Run("a watch no reconcile extends expires without waking anyone", func(t *testing.T) {
		ends := newEndings()
		w := newRejoinWatch(pace, ends.record)
		never := &servesAfter{n: 1 << 30}
		w.watch(context.Background(), sts, at("etcd-main-1"), 30*time.Millisecond, never.read)
		if got := ends.next(t); got != RejoinWatchExpired {
			t.Fatalf("ended %s, want %s", got, RejoinWatchExpired)
		}
		if len(w.events) != 0 {
			t.Error("woken by a watch that expired")
		}
	})

	t.Run("watching the same members again extends the watch instead of starting another", func(t *testing.T) {
		ends := newEndings()
		w := newRejoinWatch(pace, ends.record)
		first, second := &servesAfter{n: 1 << 30}, &servesAfter{n: 1}
		w.watch(context.Background(), sts, at("etcd-main-2", "etcd-main-1"), 60*time.Millisecond, first.read)
		time.Sleep(30 * time.Millisecond)
		w.watch(context.Background(), sts, at("etcd-main-1", "etcd-main-2"), 200*time.Millisecond, second.read)
		time.Sleep(60 * time.Millisecond)
		if got := w.watching(key); !slices.Equal(got, []string{"etcd-main-1", "etcd-main-2"}) {
			t.Fatalf("watching %v past the first deadline, want both members still", got)
		}
		if got := ends.next(t); got != RejoinWatchExpired {
			t.Fatalf("ended %s, want %s", got, RejoinWatchExpired)
		}
		if n := second.rounds.Load(); n != 0 {
			t.Errorf("the second read ran %d rounds; the running watch should have been kept", n)
		}
	})

	t.Run("other members, or a member at a new address, replace the watch", func(t *testing.T) {
		ends := newEndings()
		w := newRejoinWatch(pace, ends.record)
		old, moved, next := &servesAfter{n: 1 << 30}, &servesAfter{n: 1 << 30}, &servesAfter{n: 1}
		w.watch(context.Background(), sts, at("etcd-main-1"), time.Minute, old.read)
		time.Sleep(20 * time.Millisecond)
		w.watch(context.Background(), sts, []etcdclient.Target{{Name: "etcd-main-1", Address: "10.0.0.9:2379"}}, time.Minute, moved.read)
		if got := ends.next(t); got != RejoinWatchReplaced {
			t.Fatalf("ended %s, want %s: the member moved", got, RejoinWatchReplaced)
		}
		w.watch(context.Background(), sts, at("etcd-main-3"), time.Minute, next.read)
		if got := []string{ends.next(t), ends.next(t)}; !slices.Equal(got, []string{RejoinWatchReplaced, RejoinWatchServed}) {
			t.Fatalf("ended %v, want the second replaced, then the third served", got)
		}
		if len(w.events) != 1 {
			t.Errorf("%d wake-ups, want 1 (the third watch's)", len(w.events))
		}
	})

	t.Run("stop ends the watch without waking anyone", func(t *testing.T) {
		ends := newEndings()
		w := newRejoinWatch(pace, ends.record)
		never := &servesAfter{n: 1 << 30}
		w.watch(context.Background(), sts, at("etcd-main-1"), time.Minute, never.read)
		w.stop(key)
		if got := ends.next(t); got != RejoinWatchStopped {
			t.Fatalf("ended %s, want %s", got, RejoinWatchStopped)
		}
		if len(w.events) != 0 {
			t.Error("woken by a stopped watch")
		}
	})

	t.Run("the context ending ends the watch", func(t *testing.T) {
		ends := newEndings()
		w := newRejoinWatch(pace, ends.record)
		ctx, cancel := context.WithCancel(context.Background())
		never := &servesAfter{n: 1 << 30}
		w.watch(ctx, sts, at("etcd-main-1"), time.Minute, never.read)
		cancel()
		if got := ends.next(t); got != RejoinWatchStopped {
			t.Fatalf("ended %s, want %s", got, RejoinWatchStopped)
		}
	})
}
