package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator"
)

// EtcdChange is one write to an Etcd seen during a restart: which fields differ from the object
// before it, with their old and new values (shortened).
type EtcdChange struct {
	Etcd    string   `json:"etcd"`
	Seconds float64  `json:"seconds"` // since the manager started
	Fields  []string `json:"fields"`
}

// etcdWatch follows every Etcd through a watch: when the last one changed (the fleet is settled
// once nothing has changed for a while) and, while recording, what each change was. Counting
// PATCHes at the apiserver says how many writes a restart cost; this says which Etcds and which
// fields, so a write that is not a no-op (a cluster still catching up when the manager stopped)
// can be told from one that is.
type etcdWatch struct {
	mu         sync.Mutex
	lastChange time.Time
	objects    map[types.NamespacedName]*druidv1alpha1.Etcd
	recordFrom time.Time // zero: not recording
	changes    []EtcdChange
	err        error
}

// watchEtcds lists the Etcds and follows them until ctx ends.
func watchEtcds(ctx context.Context, cfg *rest.Config) (*etcdWatch, error) {
	scheme, err := operator.NewScheme()
	if err != nil {
		return nil, err
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("building a watching client: %w", err)
	}
	w := &etcdWatch{lastChange: time.Now(), objects: map[types.NamespacedName]*druidv1alpha1.Etcd{}}
	rv, err := w.relist(ctx, c)
	if err != nil {
		return nil, err
	}
	go w.follow(ctx, c, rv)
	return w, nil
}

func (w *etcdWatch) relist(ctx context.Context, c client.WithWatch) (string, error) {
	var list druidv1alpha1.EtcdList
	if err := c.List(ctx, &list); err != nil {
		return "", fmt.Errorf("listing Etcds: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range list.Items {
		e := &list.Items[i]
		key := client.ObjectKeyFromObject(e)
		if old, ok := w.objects[key]; !ok || old.ResourceVersion != e.ResourceVersion {
			w.observe(key, old, e)
		}
	}
	return list.ResourceVersion, nil
}

// follow watches from rv, re-watching when the apiserver ends the watch and relisting when the
// resource version is too old.
func (w *etcdWatch) follow(ctx context.Context, c client.WithWatch, rv string) {
	for ctx.Err() == nil {
		var list druidv1alpha1.EtcdList
		wi, err := c.Watch(ctx, &list, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
		if err != nil {
			w.fail(err)
			if sleep(ctx, time.Second) != nil {
				return
			}
			continue
		}
		for ev := range wi.ResultChan() {
			switch ev.Type {
			case watch.Added, watch.Modified:
				e, ok := ev.Object.(*druidv1alpha1.Etcd)
				if !ok {
					continue
				}
				rv = e.ResourceVersion
				key := client.ObjectKeyFromObject(e)
				w.mu.Lock()
				w.observe(key, w.objects[key], e)
				w.mu.Unlock()
			case watch.Bookmark:
				if e, ok := ev.Object.(*druidv1alpha1.Etcd); ok {
					rv = e.ResourceVersion
				}
			case watch.Error:
				if status := apierrors.FromObject(ev.Object); apierrors.IsResourceExpired(status) || apierrors.IsGone(status) {
					if fresh, err := w.relist(ctx, c); err == nil {
						rv = fresh
					}
				}
			}
		}
		wi.Stop()
	}
}

// observe records e as key's latest version; w.mu is held.
func (w *etcdWatch) observe(key types.NamespacedName, old, e *druidv1alpha1.Etcd) {
	w.objects[key] = e
	now := time.Now()
	w.lastChange = now
	if w.recordFrom.IsZero() || old == nil {
		return
	}
	w.changes = append(w.changes, EtcdChange{Etcd: key.String(), Seconds: now.Sub(w.recordFrom).Seconds(), Fields: etcdDiff(old, e)})
}

func (w *etcdWatch) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.err = err
}

// quietFor is how long no Etcd has changed.
func (w *etcdWatch) quietFor() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return time.Since(w.lastChange)
}

// record starts keeping the changes, counting their time from start.
func (w *etcdWatch) record(start time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.recordFrom, w.changes = start, nil
}

// stopRecording returns the changes since record.
func (w *etcdWatch) stopRecording() []EtcdChange {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.changes
	w.recordFrom, w.changes = time.Time{}, nil
	return out
}

// etcdDiff names what differs between two versions of an Etcd: metadata labels and
// annotations, spec, and each status field; conditions and members by type and name. Values are
// shortened; times of a condition count as a difference too, since a rewritten time is a write.
func etcdDiff(old, e *druidv1alpha1.Etcd) []string {
	var out []string
	diff := func(path string, a, b any) {
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if string(ja) != string(jb) {
			out = append(out, fmt.Sprintf("%s: %s → %s", path, shorten(string(ja)), shorten(string(jb))))
		}
	}
	diff("metadata.labels", old.Labels, e.Labels)
	diff("metadata.annotations", old.Annotations, e.Annotations)
	diff("spec", old.Spec, e.Spec)
	fields := func(s druidv1alpha1.EtcdStatus) map[string]json.RawMessage {
		s.Conditions, s.Members = nil, nil
		data, _ := json.Marshal(s)
		m := map[string]json.RawMessage{}
		_ = json.Unmarshal(data, &m)
		return m
	}
	a, b := fields(old.Status), fields(e.Status)
	for _, k := range unionKeys(a, b) {
		diff("status."+k, a[k], b[k])
	}
	conds := func(cs []druidv1alpha1.Condition) map[string]any {
		m := map[string]any{}
		for _, c := range cs {
			m[string(c.Type)] = c
		}
		return m
	}
	ca, cb := conds(old.Status.Conditions), conds(e.Status.Conditions)
	for _, k := range unionKeys(ca, cb) {
		diff("status.conditions["+k+"]", ca[k], cb[k])
	}
	members := func(ms []druidv1alpha1.EtcdMemberStatus) map[string]any {
		m := map[string]any{}
		for _, x := range ms {
			m[x.Name] = x
		}
		return m
	}
	ma, mb := members(old.Status.Members), members(e.Status.Members)
	for _, k := range unionKeys(ma, mb) {
		diff("status.members["+k+"]", ma[k], mb[k])
	}
	if len(out) == 0 {
		out = append(out, "no field differs (resourceVersion only)")
	}
	return out
}

func unionKeys[V any](a, b map[string]V) []string {
	seen := map[string]bool{}
	for k := range a {
		seen[k] = true
	}
	for k := range b {
		seen[k] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

func shorten(s string) string {
	const limit = 240
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "…"
}

// summarizeChanges counts the changed Etcds and, per field path (values left out), how many
// changes touched it.
func summarizeChanges(changes []EtcdChange) (etcds int, byField map[string]int) {
	seen := map[string]bool{}
	byField = map[string]int{}
	for _, c := range changes {
		seen[c.Etcd] = true
		for _, f := range c.Fields {
			path, _, _ := strings.Cut(f, ":")
			byField[path]++
		}
	}
	return len(seen), byField
}
