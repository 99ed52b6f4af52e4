package backupcopy

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

var t0 = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

func full(rev int64, day int) snapshot.Snapshot { return snapshot.Full(rev, t0.AddDate(0, 0, day)) }
func delta(start, end int64, day int) snapshot.Snapshot {
	return snapshot.Delta(start, end, t0.AddDate(0, 0, day).Add(time.Minute))
}

// listing is a source listing of the given keys, each 10 bytes.
func listing(keys ...string) []backupstore.Object {
	out := make([]backupstore.Object, len(keys))
	for i, k := range keys {
		out[i] = backupstore.Object{Key: k, Size: 10}
	}
	return out
}

func ptr(i int) *int { return &i }

func TestSelect(t *testing.T) {
	f1, d1a, d1b := full(10, 0), delta(11, 20, 0), delta(21, 30, 0)
	f2, d2a := full(30, 1), delta(31, 40, 1)
	f3 := full(40, 3)
	final := f3
	final.Final = true
	orphanDelta := delta(1, 9, 0)
	chain := []string{f1.Key(), d1a.Key(), d1b.Key(), f2.Key(), d2a.Key(), f3.Key()}

	tests := []struct {
		name        string
		source      []backupstore.Object
		filter      Filter
		wantTargets []string
		wantBackups int
		wantLeft    map[string]string
	}{
		{
			name: "every backup, revision order, each full snapshot after its record and the deltas before it",
			source: listing(append(chain, snapshot.FullMetaKey(f1), snapshot.FullMetaKey(f3), snapshot.OwnerKey,
				snapshot.MetaDir+"notes/other.json")...),
			wantTargets: []string{snapshot.FullMetaKey(f1), f1.Key(), d1a.Key(), d1b.Key(), f2.Key(), d2a.Key(),
				snapshot.FullMetaKey(f3), f3.Key(), snapshot.MetaDir + "notes/other.json"},
			wantBackups: 3,
			wantLeft:    map[string]string{snapshot.OwnerKey: leftOwner},
		},
		{
			name:        "maxBackups keeps the newest",
			source:      listing(chain...),
			filter:      Filter{MaxBackups: ptr(2)},
			wantTargets: []string{f2.Key(), d2a.Key(), f3.Key()},
			wantBackups: 2,
			wantLeft:    map[string]string{f1.Key(): leftFiltered, d1a.Key(): leftFiltered, d1b.Key(): leftFiltered},
		},
		{
			name:        "maxBackups 0 copies nothing, as etcd-druid",
			source:      listing(chain...),
			filter:      Filter{MaxBackups: ptr(0)},
			wantBackups: 0,
			wantLeft: map[string]string{f1.Key(): leftFiltered, d1a.Key(): leftFiltered, d1b.Key(): leftFiltered,
				f2.Key(): leftFiltered, d2a.Key(): leftFiltered, f3.Key(): leftFiltered},
		},
		{
			name:        "maxBackupAge leaves out backups whose full snapshot is that old",
			source:      listing(chain...),
			filter:      Filter{MaxBackupAgeDays: ptr(2), Now: t0.AddDate(0, 0, 3)},
			wantTargets: []string{f3.Key()},
			wantBackups: 1,
			wantLeft: map[string]string{f1.Key(): leftFiltered, d1a.Key(): leftFiltered, d1b.Key(): leftFiltered,
				f2.Key(): leftFiltered, d2a.Key(): leftFiltered},
		},
		{
			name:        "a too-old backup does not count towards maxBackups",
			source:      listing(chain...),
			filter:      Filter{MaxBackups: ptr(1), MaxBackupAgeDays: ptr(5), Now: t0.AddDate(0, 0, 5)},
			wantTargets: []string{f3.Key()},
			wantBackups: 1,
			wantLeft: map[string]string{f1.Key(): leftFiltered, d1a.Key(): leftFiltered, d1b.Key(): leftFiltered,
				f2.Key(): leftFiltered, d2a.Key(): leftFiltered},
		},
		{
			name:        "a final full snapshot loses its suffix in the target, with its record",
			source:      listing(final.Key(), snapshot.FullMetaKey(final)),
			wantTargets: []string{snapshot.FullMetaKey(f3), f3.Key()},
			wantBackups: 1,
			wantLeft:    map[string]string{},
		},
		{
			name:        "chunk parts, deltas before any full snapshot and records of snapshots not copied are left",
			source:      listing(f1.Key()+"/1", orphanDelta.Key(), f2.Key(), snapshot.FullMetaKey(f1)),
			wantTargets: []string{f2.Key()},
			wantBackups: 1,
			wantLeft: map[string]string{f1.Key() + "/1": leftNotSnap, orphanDelta.Key(): leftNoFull,
				snapshot.FullMetaKey(f1): leftOrphanMeta},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sel := Select(tt.source, tt.filter)
			var got []string
			for _, it := range sel.Items {
				got = append(got, it.Target)
			}
			if !slices.Equal(got, tt.wantTargets) {
				t.Errorf("targets\n  %v\nwant\n  %v", got, tt.wantTargets)
			}
			if sel.Backups != tt.wantBackups {
				t.Errorf("backups %d, want %d", sel.Backups, tt.wantBackups)
			}
			if fmt.Sprint(sel.Left) != fmt.Sprint(tt.wantLeft) {
				t.Errorf("left\n  %v\nwant\n  %v", sel.Left, tt.wantLeft)
			}
		})
	}
}

// TestSelectOrderProperty: whatever the source holds, every prefix of the copy order, as a target
// a crash left behind, restores (snapshot.Latest) to a chain without a gap whose full snapshot's
// record is already there, no earlier than the prefix before it and no later than the full copy.
func TestSelectOrderProperty(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for round := 0; round < 300; round++ {
		var keys []string
		rev, day := int64(0), 0
		for b := 0; b < 1+rng.Intn(4); b++ {
			rev += int64(1 + rng.Intn(5))
			day += rng.Intn(2)
			f := full(rev, day)
			keys = append(keys, f.Key())
			if rng.Intn(3) > 0 {
				keys = append(keys, snapshot.FullMetaKey(f))
			}
			for d := 0; d < rng.Intn(4); d++ {
				end := rev + int64(1+rng.Intn(5))
				keys = append(keys, delta(rev+1, end, day).Key())
				rev = end
			}
		}
		rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		sel := Select(listing(keys...), Filter{})
		var all []snapshot.Snapshot
		for _, it := range sel.Items {
			if s, err := snapshot.Parse(it.Target); err == nil {
				all = append(all, s)
			}
		}
		complete, _ := snapshot.Latest(all)

		var held []snapshot.Snapshot
		records := map[string]bool{}
		reached := int64(0)
		for i, it := range sel.Items {
			if s, err := snapshot.Parse(it.Target); err == nil {
				held = append(held, s)
			} else {
				records[it.Target] = true
			}
			c, ok := snapshot.Latest(held)
			if !ok {
				continue
			}
			if c.Gap != "" {
				t.Fatalf("round %d: after %d of %v the target's chain has a gap: %s", round, i+1, sel.Items, c.Gap)
			}
			if slices.Contains(keys, snapshot.FullMetaKey(c.Full)) && !records[snapshot.FullMetaKey(c.Full)] {
				t.Fatalf("round %d: after %d items %s is restorable before its record", round, i+1, c.Full.Name())
			}
			if c.EndRevision() < reached {
				t.Fatalf("round %d: after %d items the target restores to %d, before it to %d", round, i+1, c.EndRevision(), reached)
			}
			reached = c.EndRevision()
			if c.EndRevision() > complete.EndRevision() {
				t.Fatalf("round %d: a partial target reaches %d, the complete one %d", round, c.EndRevision(), complete.EndRevision())
			}
		}
	}
}
