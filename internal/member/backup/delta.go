package backup

import (
	"context"

	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
)

// MaxDeltaBytes bounds the keys and values (with the old values the digest needs) one delta
// holds: a delta is built in memory, about 9 times that (test/bench/memory), and the agent's
// memory limit must hold it. More written in one period makes several deltas in a row.
const MaxDeltaBytes = 16 << 20

// BuildDelta reads the changes of revisions from..to from member and makes their delta, which
// records origin and the keyspace at its end, for a restore to check itself against. It ends
// before to when the changes pass MaxDeltaBytes (at a revision's end: EndRevision says where).
// keyspace is the count at from-1 (nil: counted on the member now); the count at the delta's end
// is returned, nil when it cannot be known (the member could not count it, or an event lacks its
// key's old value): the delta then records none and the next one counts afresh.
func BuildDelta(ctx context.Context, member Member, from, to int64, keyspace *snapshot.Accumulator, origin *snapshot.Origin) (snapshot.DeltaFile, *snapshot.Accumulator, error) {
	events, err := member.Events(ctx, from, to, MaxDeltaBytes)
	if err != nil {
		return snapshot.DeltaFile{}, nil, err
	}
	if n := len(events); n > 0 && events[n-1].ModRevision < to {
		to = events[n-1].ModRevision
	}
	f := snapshot.DeltaFile{StartRevision: from, EndRevision: to, Events: events, Origin: origin}
	if keyspace == nil {
		d, err := member.KeyspaceDigest(ctx, from-1)
		if err != nil {
			return f, nil, nil
		}
		acc, err := snapshot.AccumulatorFrom(d)
		if err != nil {
			return f, nil, nil
		}
		keyspace = &acc
	}
	next := *keyspace
	if !next.Apply(events) {
		return f, nil, nil
	}
	d := next.Digest(to)
	f.End = &d
	return f, &next, nil
}
