package backupcopy

import (
	"sort"
	"strings"
	"time"

	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

// Filter is an EtcdCopyBackupsTask's choice of backups, as etcd-backup-restore's copy command
// reads it. A backup is one full snapshot and the deltas that continue it up to the next full
// snapshot.
type Filter struct {
	// MaxBackups copies at most this many backups, the newest first; nil: all (0 copies none,
	// as in etcd-druid).
	MaxBackups *int
	// MaxBackupAgeDays leaves out every backup whose full snapshot was taken that many days or
	// more before Now; nil: none is too old.
	MaxBackupAgeDays *int
	// Now is when the age is counted from (the caller's clock: this package reads none).
	Now time.Time
}

// Item is one object to copy: its key in the source and in the target (both below each store's
// prefix) and its size as listed.
type Item struct {
	Source, Target string
	Size           int64
}

// Selection is what Select chose.
type Selection struct {
	// Items are the objects to copy, in the order they must be copied (see Select).
	Items []Item
	// Backups is the number of backups (full snapshots) chosen.
	Backups int
	// Left are the source keys not copied, each with why, for the log.
	Left map[string]string
}

// Why an object of the source is not copied.
const (
	leftOwner      = "the store claim: the Etcd that uses the target claims it"
	leftNotSnap    = "not a snapshot (e.g. a part of an unfinished chunked upload)"
	leftNoFull     = "a delta older than every full snapshot: nothing to apply it to"
	leftFiltered   = "its backup is left out by maxBackups or maxBackupAge"
	leftOrphanMeta = "the record of a full snapshot that is not copied"
)

// Select picks, from the source's listing of snapshot.Dir and snapshot.MetaDir, the objects to
// copy and their order.
//
// The order is what makes a target that a crash left half-copied safe to restore from. A restore
// (snapshot.Latest) takes the newest full snapshot and the deltas that continue it without a gap.
// So the objects go in revision order, oldest first, with each full snapshot after every delta
// that ends at or before its revision and right after its own record: at every moment the target
// holds a gap-free prefix of the source's history, its newest full snapshot already has the record
// a restore checks the deltas' origin against, and no full snapshot is visible before the deltas
// that precede it. A partial target restores to an older revision, never to a chain with a hole
// in it, and the task is not Succeeded until the last object is in. Records that belong to no
// snapshot go last: no restore reads them.
//
// A full snapshot etcd-backup-restore named ".final" is copied without the suffix (as its copy
// command does): for the Etcd that will use the target it is an ordinary full snapshot, and a
// later task waiting on the target for a final snapshot must not take it for one.
func Select(source []backupstore.Object, f Filter) Selection {
	sel := Selection{Left: map[string]string{}}
	var snaps []snapshot.Snapshot
	sizes := map[string]int64{}
	metas := map[string]backupstore.Object{} // full snapshot name → its record
	var otherMeta []backupstore.Object
	for _, obj := range source {
		sizes[obj.Key] = obj.Size
		switch {
		case obj.Key == snapshot.OwnerKey:
			sel.Left[obj.Key] = leftOwner
		case strings.HasPrefix(obj.Key, snapshot.MetaDir):
			if full, ok := snapshot.FullOfMetaKey(obj.Key); ok {
				metas[full.Name()] = obj
			} else {
				otherMeta = append(otherMeta, obj)
			}
		default:
			s, err := snapshot.Parse(obj.Key)
			if err != nil || s.Key() != obj.Key {
				sel.Left[obj.Key] = leftNotSnap
				continue
			}
			snaps = append(snaps, s)
		}
	}

	backups := group(snaps, sel.Left)
	chosen := choose(backups, f, sel.Left)
	sel.Backups = len(chosen)

	// Revision order across the chosen backups (group kept each backup's own order).
	sort.Slice(chosen, func(i, j int) bool { return chosen[i].full.EndRevision < chosen[j].full.EndRevision })
	for _, b := range chosen {
		// A backup's deltas continue its full snapshot; the previous backup's deltas end at or
		// before it. So: the full snapshot's record, the full snapshot, its deltas.
		full := b.full
		target := full
		target.Final = false
		if m, ok := metas[full.Name()]; ok {
			sel.Items = append(sel.Items, Item{Source: m.Key, Target: snapshot.FullMetaKey(target), Size: m.Size})
			delete(metas, full.Name())
		}
		sel.Items = append(sel.Items, Item{Source: full.Key(), Target: target.Key(), Size: sizes[full.Key()]})
		for _, d := range b.deltas {
			sel.Items = append(sel.Items, Item{Source: d.Key(), Target: d.Key(), Size: sizes[d.Key()]})
		}
	}
	for _, m := range metas {
		sel.Left[m.Key] = leftOrphanMeta
	}
	for _, m := range otherMeta {
		sel.Items = append(sel.Items, Item{Source: m.Key, Target: m.Key, Size: m.Size})
	}
	return sel
}

// backup is a full snapshot and the deltas taken after it, before the next full snapshot.
type backup struct {
	full   snapshot.Snapshot
	deltas []snapshot.Snapshot
}

// group cuts the snapshots, in revision order, into backups. A delta ending at a full snapshot's
// revision belongs to the backup before it (it leads up to that revision); deltas before the
// first full snapshot belong to none and are left.
func group(snaps []snapshot.Snapshot, left map[string]string) []backup {
	sort.SliceStable(snaps, func(i, j int) bool {
		a, b := snaps[i], snaps[j]
		if a.EndRevision != b.EndRevision {
			return a.EndRevision < b.EndRevision
		}
		if a.Kind != b.Kind {
			return a.Kind == snapshot.KindDelta
		}
		if a.StartRevision != b.StartRevision {
			return a.StartRevision < b.StartRevision
		}
		return a.CreatedOn.Before(b.CreatedOn)
	})
	var out []backup
	for _, s := range snaps {
		switch {
		case s.Kind == snapshot.KindFull:
			out = append(out, backup{full: s})
		case len(out) == 0:
			left[s.Key()] = leftNoFull
		default:
			out[len(out)-1].deltas = append(out[len(out)-1].deltas, s)
		}
	}
	return out
}

// choose applies the filter as etcd-backup-restore does: the backups newest first (by their full
// snapshot's time), those too old passed over, until MaxBackups are taken.
func choose(backups []backup, f Filter, left map[string]string) []backup {
	order := make([]int, len(backups))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool {
		return backups[order[i]].full.CreatedOn.After(backups[order[j]].full.CreatedOn)
	})
	var out []backup
	for _, i := range order {
		b := backups[i]
		tooOld := f.MaxBackupAgeDays != nil && !b.full.CreatedOn.After(f.Now.AddDate(0, 0, -*f.MaxBackupAgeDays))
		full := f.MaxBackups != nil && len(out) >= *f.MaxBackups
		if tooOld || full {
			left[b.full.Key()] = leftFiltered
			for _, d := range b.deltas {
				left[d.Key()] = leftFiltered
			}
			continue
		}
		out = append(out, b)
	}
	return out
}
