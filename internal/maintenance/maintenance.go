// Package maintenance records which member of which cluster is blocked by a maintenance call
// (defragmentation) right now, so that other controllers of the same operator process do not take
// a second member away meanwhile. A defragmenting member still looks ready until its readiness
// probe times out; the record closes that window.
package maintenance

import "sync"

// Registry is safe for concurrent use. The zero value is not; use NewRegistry.
type Registry struct {
	mu   sync.Mutex
	busy map[string]string // cluster → member under maintenance
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{busy: map[string]string{}} }

// Begin records that member of cluster is under maintenance until the returned func is called.
func (r *Registry) Begin(cluster, member string) (end func()) {
	r.mu.Lock()
	r.busy[cluster] = member
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.busy[cluster] == member {
			delete(r.busy, cluster)
		}
	}
}

// Busy names the member of cluster under maintenance, if any. A nil registry has none.
func (r *Registry) Busy(cluster string) (member string, ok bool) {
	if r == nil {
		return "", false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	member, ok = r.busy[cluster]
	return member, ok
}
