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

func (e *endings) record(_ types.NamespacedName, outcome string) { e.ch <- outcome }

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

// expect fails the test unless the next watch to end ended with want.
func (e *endings) expect(t *testing.T, want string) {
	t.Helper()
	if got := e.next(t); got != want {
		t.Fatalf("ended %s, want %s", got, want)
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
		ends.expect(t, RejoinWatchServed)
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

	for _, tc := range []struct {
		name       string
		forAtLeast time.Duration
		cancel     bool
		want       string
	}{
		{name: "a watch no reconcile extends expires", forAtLeast: 30 * time.Millisecond, want: RejoinWatchExpired},
		{name: "the context ending ends the watch", forAtLeast: time.Minute, cancel: true, want: RejoinWatchStopped},
	} {
		t.Run(tc.name+" without waking anyone", func(t *testing.T) {
			ends := newEndings()
			w := newRejoinWatch(pace, ends.record)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			never := &servesAfter{n: 1 << 30}
			w.watch(ctx, sts, at("etcd-main-1"), tc.forAtLeast, never.read)
			if tc.cancel {
				cancel()
			}
			ends.expect(t, tc.want)
			if len(w.events) != 0 {
				t.Errorf("woken by a watch that ended %s", tc.want)
			}
		})
	}

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
		ends.expect(t, RejoinWatchExpired)
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

	t.Run("stop ends the watch without waking anyone, and returns once no read is in flight", func(t *testing.T) {
		ends := newEndings()
		w := newRejoinWatch(pace, ends.record)
		var inFlight atomic.Int32
		slow := func(ctx context.Context) bool {
			inFlight.Add(1)
			defer inFlight.Add(-1)
			<-ctx.Done()
			time.Sleep(20 * time.Millisecond) // a read that takes a while to notice
			return false
		}
		w.watch(context.Background(), sts, at("etcd-main-1"), time.Minute, slow)
		time.Sleep(3 * pace)
		w.stop(key)
		if n := inFlight.Load(); n != 0 {
			t.Errorf("%d reads in flight after stop returned", n)
		}
		ends.expect(t, RejoinWatchStopped)
		if len(w.events) != 0 {
			t.Error("woken by a stopped watch")
		}
	})
}
