package maintenance

import "testing"

func TestRegistry(t *testing.T) {
	var none *Registry
	if _, ok := none.Busy("ns/etcd"); ok {
		t.Fatal("a nil registry reports a member busy")
	}
	r := NewRegistry()
	end := r.Begin("ns/etcd", "etcd-1")
	if m, ok := r.Busy("ns/etcd"); !ok || m != "etcd-1" {
		t.Fatalf("Busy = %q %v, want etcd-1", m, ok)
	}
	if _, ok := r.Busy("ns/other"); ok {
		t.Fatal("another cluster reported busy")
	}
	// A later Begin for the same cluster is not undone by the earlier one's end.
	endLater := r.Begin("ns/etcd", "etcd-2")
	end()
	if m, ok := r.Busy("ns/etcd"); !ok || m != "etcd-2" {
		t.Fatalf("after the first end: Busy = %q %v, want etcd-2", m, ok)
	}
	endLater()
	if _, ok := r.Busy("ns/etcd"); ok {
		t.Fatal("still busy after every end")
	}
}
