package snapshot

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// with returns s compressed with c, and final when asked.
func with(s Snapshot, c Compression, final bool) Snapshot {
	s.Compression, s.Final = c, final
	return s
}

func TestNameRoundTrip(t *testing.T) {
	for _, s := range []Snapshot{
		Full(1234, t0), Delta(1235, 1300, t0.Add(time.Minute)), Full(123456789012, t0),
		with(Full(1234, t0), CompressionGzip, false), with(Delta(1235, 1300, t0), CompressionLZW, false),
		with(Delta(1235, 1300, t0), CompressionZlib, false), with(Full(1234, t0), CompressionNone, true),
		with(Full(1234, t0), CompressionZlib, true),
	} {
		t.Run(s.Name(), func(t *testing.T) {
			got, err := Parse("some/prefix/" + s.Key())
			if err != nil {
				t.Fatal(err)
			}
			if got != s {
				t.Fatalf("Parse(%s) = %+v, want %+v", s.Key(), got, s)
			}
		})
	}
	if got := Full(1234, t0).Key(); got != "v2/Full-00000000-00001234-1795348800" {
		t.Fatalf("key %s", got)
	}
}

// TestParseBackupRestoreNames reads names as etcd-backup-restore writes them
// (Kind-%08d-%08d-<unix><compression suffix><".final" for the last full snapshot>).
func TestParseBackupRestoreNames(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want Snapshot
	}{
		{"etcd-main/v2/Full-00000000-00000042-1795348800", Full(42, t0)},
		{"v2/Full-00000000-00000042-1795348800.gz", with(Full(42, t0), CompressionGzip, false)},
		{"v2/Full-00000000-00000042-1795348800.Z", with(Full(42, t0), CompressionLZW, false)},
		{"v2/Full-00000000-00000042-1795348800.zlib", with(Full(42, t0), CompressionZlib, false)},
		{"v2/Incr-00000043-00000050-1795348800.gz", with(Delta(43, 50, t0), CompressionGzip, false)},
		{"v2/Full-00000000-00000042-1795348800.final", with(Full(42, t0), CompressionNone, true)},
		{"v2/Full-00000000-00000042-1795348800.gz.final", with(Full(42, t0), CompressionGzip, true)},
		{"v2/Full-00000000-00000042-1795348800.Z.final", with(Full(42, t0), CompressionLZW, true)},
	} {
		t.Run(tc.key, func(t *testing.T) {
			got, err := Parse(tc.key)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("Parse = %+v, want %+v", got, tc.want)
			}
			if base := tc.key[strings.LastIndex(tc.key, "/")+1:]; got.Name() != base {
				t.Fatalf("Name() = %s, want %s (the object's key must round trip)", got.Name(), base)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	for _, key := range []string{
		"v2/Full-00000000-00001234", "v2/Snap-00000000-00001234-1", "v2/Full-00000001-00001234-1",
		"v2/Incr-00000000-00000001-1", "v2/Incr-00000005-00000004-1", "v2/Full-0-x-1", "v2/.tmp-Full-00000000-00000001-1-abc",
		// Suffixes etcd-backup-restore never writes, a final delta, and the parts of a chunked upload.
		"v2/Full-00000000-00000001-1.bz2", "v2/Full-00000000-00000001-1.gz.zlib", "v2/Full-00000000-00000001-1.final.gz",
		"v2/Full-00000000-00000001-1.", "v2/Full-00000000-00000001-.gz", "v2/Incr-00000001-00000002-1.final",
		"v2/Full-00000000-00000001-1.gz.final.final", "v2/Full-00000000-00000001-1/3", "v2/Full-00000000-00000001-1.gz/0000000001",
	} {
		t.Run(key, func(t *testing.T) {
			if s, err := Parse(key); err == nil {
				t.Fatalf("Parse(%q) = %+v, want an error", key, s)
			}
		})
	}
}

func TestLatest(t *testing.T) {
	tests := []struct {
		name     string
		snaps    []Snapshot
		wantFull Snapshot
		wantEnd  int64
		deltas   int
		gap      bool
	}{
		{"full only", []Snapshot{Full(10, t0)}, Full(10, t0), 10, 0, false},
		{"newest full wins, older deltas ignored", []Snapshot{Full(10, t0), Delta(11, 20, t0), Full(20, t0.Add(time.Hour))}, Full(20, t0.Add(time.Hour)), 20, 0, false},
		{"deltas chain", []Snapshot{Full(10, t0), Delta(11, 20, t0), Delta(21, 25, t0), Delta(26, 26, t0)}, Full(10, t0), 26, 3, false},
		{"overlap from two writers takes the furthest", []Snapshot{Full(10, t0), Delta(11, 20, t0), Delta(11, 23, t0), Delta(21, 30, t0), Delta(24, 28, t0)}, Full(10, t0), 30, 2, false},
		{"gap stops the chain", []Snapshot{Full(10, t0), Delta(11, 20, t0), Delta(22, 30, t0)}, Full(10, t0), 20, 1, true},
		{"delta starting inside the full", []Snapshot{Full(15, t0), Delta(11, 20, t0)}, Full(15, t0), 20, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ok := Latest(tt.snaps)
			if !ok {
				t.Fatal("no chain")
			}
			if c.Full != tt.wantFull || c.EndRevision() != tt.wantEnd || len(c.Deltas) != tt.deltas || (c.Gap != "") != tt.gap {
				t.Fatalf("chain %+v end %d, want full %s end %d with %d deltas, gap %v", c, c.EndRevision(), tt.wantFull, tt.wantEnd, tt.deltas, tt.gap)
			}
		})
	}
	if _, ok := Latest([]Snapshot{Delta(1, 5, t0)}); ok {
		t.Fatal("a chain without a full snapshot")
	}
}

func TestGarbageCollect(t *testing.T) {
	hour := time.Hour
	now := t0.Add(60 * 24 * hour)
	fullAt := func(rev int64, ago time.Duration) Snapshot { return Full(rev, now.Add(-ago)) }
	tests := []struct {
		name   string
		snaps  []Snapshot
		policy Policy
		want   map[string]string // name -> rule
	}{
		{"limit keeps the newest", []Snapshot{fullAt(1, 3*hour), fullAt(2, 2*hour), fullAt(3, hour)}, Policy{MaxFull: 2},
			map[string]string{fullAt(1, 3*hour).Name(): RuleBeyondLimit}},
		{"limit 0 still keeps the latest", []Snapshot{fullAt(1, 3*hour), fullAt(2, 2*hour)}, Policy{MaxFull: 0},
			map[string]string{fullAt(1, 3*hour).Name(): RuleBeyondLimit}},
		{"superseded deltas go, newer stay", []Snapshot{fullAt(10, 2*hour), Delta(5, 10, now), Delta(11, 12, now)}, Policy{MaxFull: 5},
			map[string]string{Delta(5, 10, now).Name(): RuleSuperseded}},
		{"deltas after the full before the latest stay, for a fallback", []Snapshot{
			fullAt(5, 3*hour), fullAt(20, hour), Delta(1, 5, now), Delta(6, 20, now), Delta(21, 22, now),
		}, Policy{MaxFull: 5}, map[string]string{Delta(1, 5, now).Name(): RuleSuperseded}},
		{"a full snapshot beyond the limit is no fallback", []Snapshot{
			fullAt(5, 3*hour), fullAt(20, hour), Delta(6, 20, now),
		}, Policy{MaxFull: 1}, map[string]string{fullAt(5, 3*hour).Name(): RuleBeyondLimit, Delta(6, 20, now).Name(): RuleSuperseded}},
		{"exponential: last hour all kept, one per older hour", []Snapshot{
			fullAt(1, 40*24*hour), fullAt(2, 3*hour+10*time.Minute), fullAt(3, 3*hour+5*time.Minute), fullAt(4, 30*time.Minute), fullAt(5, 10*time.Minute),
		}, Policy{Exponential: true}, map[string]string{
			fullAt(1, 40*24*hour).Name(): RuleThinned, fullAt(2, 3*hour+10*time.Minute).Name(): RuleThinned,
		}},
		{"one full is never collected", []Snapshot{fullAt(1, 90*24*hour)}, Policy{Exponential: true}, map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string]string{}
			for _, d := range GarbageCollect(tt.snaps, tt.policy, now) {
				got[d.Snapshot.Name()] = d.Rule
				if d.Reason == "" {
					t.Errorf("%s: no reason", d.Snapshot.Name())
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("deleted %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Fatalf("deleted %v, want %v", got, tt.want)
				}
			}
		})
	}
}

// TestGarbageCollectKeepsRestorableChain: whatever the policy and history, the chain Latest
// picks survives the collection.
func TestGarbageCollectKeepsRestorableChain(t *testing.T) {
	for seed := int64(1); seed <= 200; seed++ {
		var snaps []Snapshot
		rev := int64(1)
		at := t0
		for i := int64(0); i < 5+seed%17; i++ {
			at = at.Add(time.Duration(seed%7+1) * 37 * time.Minute)
			if (i+seed)%3 == 0 {
				snaps = append(snaps, Full(rev, at))
			} else {
				snaps = append(snaps, Delta(rev+1, rev+1+seed%5, at))
				rev += 1 + seed%5
			}
		}
		before, ok := Latest(snaps)
		if !ok {
			continue
		}
		for _, p := range []Policy{{MaxFull: int(seed % 3)}, {Exponential: true}} {
			deleted := map[Snapshot]bool{}
			for _, d := range GarbageCollect(snaps, p, at.Add(time.Duration(seed)*time.Hour)) {
				deleted[d.Snapshot] = true
			}
			if deleted[before.Full] {
				t.Fatalf("seed %d %+v: latest full %s deleted", seed, p, before.Full)
			}
			for _, d := range before.Deltas {
				if deleted[d] {
					t.Fatalf("seed %d %+v: delta %s of the latest chain deleted", seed, p, d)
				}
			}
		}
	}
}

func TestDeltaRoundTripAndTamper(t *testing.T) {
	events := []Event{
		{Type: EventPut, Key: []byte("a"), Value: []byte("1"), CreateRevision: 11, ModRevision: 11, Version: 1},
		{Type: EventPut, Key: []byte("b"), Value: []byte{0, 255}, CreateRevision: 12, ModRevision: 12, Version: 1},
		{Type: EventDelete, Key: []byte("a"), ModRevision: 13},
	}
	var buf bytes.Buffer
	if err := EncodeDelta(&buf, 11, 13, events); err != nil {
		t.Fatal(err)
	}
	f, err := DecodeDelta(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if f.StartRevision != 11 || f.EndRevision != 13 || len(f.Events) != 3 || string(f.Events[1].Value) != "\x00\xff" {
		t.Fatalf("decoded %+v", f)
	}
	tampered := strings.Replace(buf.String(), `"type":"DELETE"`, `"type":"PUT"`, 1)
	if _, err := DecodeDelta(strings.NewReader(tampered)); err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("tampered delta: %v", err)
	}
	if _, err := DecodeDelta(strings.NewReader(buf.String()[:buf.Len()/2])); err == nil {
		t.Fatal("truncated delta accepted")
	}
	if err := EncodeDelta(&buf, 11, 12, events); err == nil {
		t.Fatal("event beyond the range accepted")
	}
	if err := EncodeDelta(&bytes.Buffer{}, 14, 14, nil); err != nil {
		t.Fatalf("empty delta: %v", err)
	}
}
