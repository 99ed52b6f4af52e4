package snapshot

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// brDelta writes events as etcd-backup-restore's snapshotter does: each clientv3.Event wrapped
// with its time and marshalled by encoding/json, joined into one array, the SHA-256 of the
// array's bytes appended raw.
func brDelta(t *testing.T, events []*clientv3.Event) []byte {
	t.Helper()
	var data []byte
	for i, e := range events {
		b, err := json.Marshal(struct {
			EtcdEvent *clientv3.Event `json:"etcdEvent"`
			Time      time.Time       `json:"time"`
		}{e, t0})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			data = append(data, '[')
		} else {
			data = append(data, ',')
		}
		data = append(data, b...)
	}
	data = append(data, ']')
	sum := sha256.Sum256(data)
	return append(data, sum[:]...)
}

func put(key, value string, create, mod, version, lease int64) *clientv3.Event {
	return &clientv3.Event{Type: mvccpb.Event_PUT, Kv: &mvccpb.KeyValue{Key: []byte(key), Value: []byte(value),
		CreateRevision: create, ModRevision: mod, Version: version, Lease: lease}}
}

func del(key string, mod int64) *clientv3.Event {
	return &clientv3.Event{Type: mvccpb.Event_DELETE, Kv: &mvccpb.KeyValue{Key: []byte(key), ModRevision: mod}}
}

// brSample is a short history: puts, an update, a lease, a binary value, a delete and a
// transaction of two events at one revision.
func brSample() []*clientv3.Event {
	return []*clientv3.Event{
		put("a", "1", 11, 11, 1, 0),
		put("a", "2", 11, 12, 2, 0),
		put("leased", "x", 13, 13, 1, 0x1234),
		put("bin\x00", "\x00\xff", 14, 14, 1, 0),
		del("a", 15),
		put("txn-1", "p", 16, 16, 1, 0),
		del("leased", 16),
	}
}

func TestReadDeltaBackupRestore(t *testing.T) {
	raw := brDelta(t, brSample())
	if raw[0] != '[' || !strings.Contains(string(raw), `"etcdEvent":{"kv":{"key":"YQ==","create_revision":11`) {
		t.Fatalf("the fixture is not etcd-backup-restore's encoding: %.120s", raw)
	}
	want := []Event{
		{Type: EventPut, Key: []byte("a"), Value: []byte("1"), CreateRevision: 11, ModRevision: 11, Version: 1},
		{Type: EventPut, Key: []byte("a"), Value: []byte("2"), CreateRevision: 11, ModRevision: 12, Version: 2},
		{Type: EventPut, Key: []byte("leased"), Value: []byte("x"), CreateRevision: 13, ModRevision: 13, Version: 1, Lease: 0x1234},
		{Type: EventPut, Key: []byte("bin\x00"), Value: []byte("\x00\xff"), CreateRevision: 14, ModRevision: 14, Version: 1},
		{Type: EventDelete, Key: []byte("a"), ModRevision: 15},
		{Type: EventPut, Key: []byte("txn-1"), Value: []byte("p"), CreateRevision: 16, ModRevision: 16, Version: 1},
		{Type: EventDelete, Key: []byte("leased"), ModRevision: 16},
	}
	for _, c := range Compressions() {
		t.Run(c.String(), func(t *testing.T) {
			// The whole object, hash included, is compressed.
			content, err := Decompress(bytes.NewReader(compressed(t, raw, c)), c)
			if err != nil {
				t.Fatal(err)
			}
			f, err := ReadDelta(content)
			if err != nil {
				t.Fatal(err)
			}
			if f.Format != BackupRestoreDeltaFormat || f.StartRevision != 11 || f.EndRevision != 16 {
				t.Fatalf("read format %q revisions %d..%d, want %q 11..16", f.Format, f.StartRevision, f.EndRevision, BackupRestoreDeltaFormat)
			}
			if len(f.Events) != len(want) {
				t.Fatalf("read %d events, want %d", len(f.Events), len(want))
			}
			for i := range want {
				if !sameEvent(f.Events[i], want[i]) {
					t.Errorf("event %d: %+v, want %+v", i, f.Events[i], want[i])
				}
			}
		})
	}
}

func sameEvent(a, b Event) bool {
	return a.Type == b.Type && bytes.Equal(a.Key, b.Key) && bytes.Equal(a.Value, b.Value) && a.CreateRevision == b.CreateRevision &&
		a.ModRevision == b.ModRevision && a.Version == b.Version && a.Lease == b.Lease
}

// TestReadDeltaBackupRestoreRefuses: whatever is cut, altered or malformed is an error, and a
// changed byte is reported as a hash mismatch.
func TestReadDeltaBackupRestoreRefuses(t *testing.T) {
	raw := brDelta(t, brSample())
	rehashed := func(data string) []byte {
		sum := sha256.Sum256([]byte(data))
		return append([]byte(data), sum[:]...)
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"hash altered", flip(raw, len(raw)-1), "SHA-256"},
		{"event altered", bytes.Replace(raw, []byte(`"YQ=="`), []byte(`"Yg=="`), 1), "SHA-256"},
		{"cut by one byte", raw[:len(raw)-1], "SHA-256"},
		{"cut in half", raw[:len(raw)/2], "SHA-256"},
		{"hash missing", raw[:len(raw)-sha256.Size], "SHA-256"},
		{"shorter than a hash", []byte("[]"), "too short"},
		{"empty", nil, "unexpected EOF"},
		{"no events", rehashed("[]"), "no events"},
		{"data after the array", rehashed(`[{"etcdEvent":{"kv":{"key":"YQ==","mod_revision":3}}}]x`), "after the events"},
		{"unknown type", rehashed(`[{"etcdEvent":{"type":2,"kv":{"key":"YQ==","mod_revision":3}}}]`), "type 2"},
		{"no kv", rehashed(`[{"etcdEvent":{"type":1}}]`), "no etcdEvent.kv"},
		{"revisions out of order", brDelta(t, []*clientv3.Event{put("a", "1", 5, 5, 1, 0), put("b", "1", 4, 4, 1, 0), put("c", "1", 6, 6, 1, 0)}), "out of order"},
		{"not JSON", rehashed(`[nonsense]`), "invalid character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ReadDelta(bytes.NewReader(tc.data))
			if err == nil {
				t.Fatalf("read %+v, want an error", f)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want one saying %q", err, tc.want)
			}
		})
	}
}

// TestReadDeltaOwnFormat: etcd-conductor's deltas read through ReadDelta, compressed or not.
func TestReadDeltaOwnFormat(t *testing.T) {
	events := []Event{
		{Type: EventPut, Key: []byte("a"), Value: []byte("1"), CreateRevision: 11, ModRevision: 11, Version: 1},
		{Type: EventDelete, Key: []byte("a"), ModRevision: 13},
	}
	var buf bytes.Buffer
	if err := EncodeDelta(&buf, 11, 13, events); err != nil {
		t.Fatal(err)
	}
	for _, c := range Compressions() {
		t.Run(c.String(), func(t *testing.T) {
			content, err := Decompress(bytes.NewReader(compressed(t, buf.Bytes(), c)), c)
			if err != nil {
				t.Fatal(err)
			}
			f, err := ReadDelta(content)
			if err != nil {
				t.Fatal(err)
			}
			if f.Format != DeltaFormat || f.StartRevision != 11 || f.EndRevision != 13 || len(f.Events) != 2 {
				t.Fatalf("read %+v", f)
			}
		})
	}
	if _, err := ReadDelta(strings.NewReader(buf.String()[:buf.Len()/2])); err == nil {
		t.Error("a truncated etcd-conductor delta was read")
	}
}

// TestTrailerReaderSmallReads: the trailer is held back whatever the read sizes.
func TestTrailerReaderSmallReads(t *testing.T) {
	raw := brDelta(t, brSample())
	for _, size := range []int{1, 7, 32, 33, 4096} {
		tr := &trailerReader{r: &chunkReader{data: raw, size: size}, h: sha256.New()}
		var got []byte
		p := make([]byte, size)
		for {
			n, err := tr.Read(p)
			got = append(got, p[:n]...)
			if err != nil {
				break
			}
		}
		if !bytes.Equal(got, raw[:len(raw)-sha256.Size]) || !bytes.Equal(tr.trailer(), raw[len(raw)-sha256.Size:]) {
			t.Fatalf("reads of %d: passed %d bytes and held %d, want %d and 32", size, len(got), len(tr.trailer()), len(raw)-sha256.Size)
		}
	}
}

// chunkReader returns at most size bytes a read.
type chunkReader struct {
	data []byte
	size int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.size)], c.data)
	c.data = c.data[n:]
	return n, nil
}
