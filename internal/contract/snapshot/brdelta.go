package snapshot

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
)

// BackupRestoreDeltaFormat is the Format of a DeltaFile read from an etcd-backup-restore delta,
// which names no format of its own (docs/backup-format.md).
const BackupRestoreDeltaFormat = "etcd-backup-restore/v2"

// etcd-backup-restore writes each watch event as {"etcdEvent": <clientv3.Event>, "time": …},
// the event marshalled by encoding/json with the protobuf struct's tags: the type is a number
// (PUT, 0, is left out), bytes are base64. The structs below read exactly those fields; the
// time and prev_kv are not needed for a replay and are skipped by the decoder.
type brEvent struct {
	EtcdEvent *brEtcdEvent `json:"etcdEvent"`
}

type brEtcdEvent struct {
	Type int32       `json:"type"`
	Kv   *brKeyValue `json:"kv"`
}

type brKeyValue struct {
	Key            []byte `json:"key"`
	CreateRevision int64  `json:"create_revision"`
	ModRevision    int64  `json:"mod_revision"`
	Version        int64  `json:"version"`
	Value          []byte `json:"value"`
	Lease          int64  `json:"lease"`
}

// mvccpb.Event_EventType's values.
const (
	brPut    = 0
	brDelete = 1
)

func (e brEvent) event(i int) (Event, error) {
	if e.EtcdEvent == nil || e.EtcdEvent.Kv == nil {
		return Event{}, fmt.Errorf("event %d has no etcdEvent.kv", i)
	}
	kv := e.EtcdEvent.Kv
	switch e.EtcdEvent.Type {
	case brPut:
		return Event{Type: EventPut, Key: kv.Key, Value: kv.Value, CreateRevision: kv.CreateRevision,
			ModRevision: kv.ModRevision, Version: kv.Version, Lease: kv.Lease}, nil
	case brDelete:
		return Event{Type: EventDelete, Key: kv.Key, ModRevision: kv.ModRevision}, nil
	}
	return Event{}, fmt.Errorf("event %d: type %d is neither PUT (0) nor DELETE (1)", i, e.EtcdEvent.Type)
}

// decodeBackupRestoreDelta reads etcd-backup-restore's delta: a JSON array of events followed
// by the raw 32-byte SHA-256 of the array's bytes. The array is decoded event by event as it is
// hashed, so only the events are held; the hash is checked once the stream ends, and a mismatch
// is reported before any decode error (it tells a cut or altered object apart from a bug).
// The revisions come from the events (first and last modRevision); the caller compares them with
// the object's name.
func scanBackupRestoreDelta(r io.Reader, each func(Event) error) (DeltaFile, error) {
	tr := &trailerReader{r: r, h: sha256.New()}
	dec := json.NewDecoder(tr)
	first, last, decodeErr := scanBREvents(dec, each)
	// Whatever follows the array up to the hash is hashed too; only whitespace may be there.
	rest := &nonSpace{}
	if _, err := io.Copy(rest, io.MultiReader(dec.Buffered(), tr)); err != nil {
		return DeltaFile{}, fmt.Errorf("etcd-backup-restore delta: %w", err)
	}
	if len(tr.trailer()) != sha256.Size {
		return DeltaFile{}, fmt.Errorf("etcd-backup-restore delta: %d bytes, too short to end in its SHA-256", tr.total)
	}
	sum := tr.h.Sum(nil)
	if !bytes.Equal(sum, tr.trailer()) {
		return DeltaFile{}, fmt.Errorf("etcd-backup-restore delta: events SHA-256 %x, the object ends in %x (cut short or altered)", sum, tr.trailer())
	}
	if decodeErr != nil {
		return DeltaFile{}, fmt.Errorf("etcd-backup-restore delta: %w", decodeErr)
	}
	if rest.seen {
		return DeltaFile{}, errors.New("etcd-backup-restore delta: data after the events array")
	}
	if first == 0 {
		// etcd-backup-restore skips a delta without events: an empty one says no revisions.
		return DeltaFile{}, errors.New("etcd-backup-restore delta: no events")
	}
	if err := checkRange(first, last); err != nil {
		return DeltaFile{}, fmt.Errorf("etcd-backup-restore delta: %w", err)
	}
	return DeltaFile{Format: BackupRestoreDeltaFormat, StartRevision: first, EndRevision: last,
		EventsSHA256: hex.EncodeToString(sum)}, nil
}

// scanBREvents reads the events array one event at a time, in revision order, handing each to
// each; first and last are the revisions of the first and last event (0 when there is none).
func scanBREvents(dec *json.Decoder, each func(Event) error) (first, last int64, err error) {
	if tok, err := dec.Token(); err != nil {
		return 0, 0, err
	} else if tok != json.Delim('[') {
		return 0, 0, fmt.Errorf("want a JSON array of events, got %v", tok)
	}
	for i := 0; dec.More(); i++ {
		var e brEvent
		if err := dec.Decode(&e); err != nil {
			return first, last, fmt.Errorf("event %d: %w", i, err)
		}
		ev, err := e.event(i)
		if err != nil {
			return first, last, err
		}
		if i == 0 {
			first = ev.ModRevision
		} else if ev.ModRevision < last {
			return first, last, fmt.Errorf("event %d: revision %d out of order (after %d)", i, ev.ModRevision, last)
		}
		last = ev.ModRevision
		if err := each(ev); err != nil {
			return first, last, err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing "]"
		return first, last, err
	}
	return first, last, nil
}

// trailerReader passes r through, hashing it, but holds back its last sha256.Size bytes: at the
// end they are the trailer, never seen by the reader nor hashed.
type trailerReader struct {
	r     io.Reader
	h     hash.Hash
	buf   []byte // buf[off:] is read from r and not yet passed on
	off   int
	err   error
	total int64
}

func (t *trailerReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for len(t.buf)-t.off <= sha256.Size {
		if t.err != nil {
			return 0, t.err
		}
		t.fill()
	}
	n := copy(p, t.buf[t.off:len(t.buf)-sha256.Size])
	t.h.Write(p[:n])
	t.off += n
	return n, nil
}

// fill reads more of r, first moving what is held to the buffer's start.
func (t *trailerReader) fill() {
	if t.buf == nil {
		t.buf = make([]byte, 0, 64<<10)
	}
	t.buf = t.buf[:copy(t.buf[:cap(t.buf)], t.buf[t.off:])]
	t.off = 0
	n, err := t.r.Read(t.buf[len(t.buf):cap(t.buf)])
	t.buf = t.buf[:len(t.buf)+n]
	t.total += int64(n)
	t.err = err
}

// trailer is what was held back; the whole trailer once Read has returned the stream's end.
func (t *trailerReader) trailer() []byte { return t.buf[t.off:] }

// nonSpace is a writer that notes any byte other than JSON whitespace.
type nonSpace struct{ seen bool }

func (w *nonSpace) Write(p []byte) (int, error) {
	for _, b := range p {
		switch b {
		case ' ', '\t', '\n', '\r':
		default:
			w.seen = true
		}
	}
	return len(p), nil
}
