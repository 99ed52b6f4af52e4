package snapshot

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
)

// DeltaFormat names the delta file layout; a reader refuses any other.
const DeltaFormat = "etcd-conductor.io/delta/v1"

// EventType is what a watch event did to its key.
type EventType string

const (
	EventPut    EventType = "PUT"
	EventDelete EventType = "DELETE"
)

// Event is one watch event, with what a restore needs to replay it. A delete carries the key and
// the revision only.
type Event struct {
	Type           EventType `json:"type"`
	Key            []byte    `json:"key"`
	Value          []byte    `json:"value,omitempty"`
	CreateRevision int64     `json:"createRevision,omitempty"`
	ModRevision    int64     `json:"modRevision"`
	Version        int64     `json:"version,omitempty"`
	// Lease is the etcd lease the key was attached to (0: none). A restore that replays with
	// leases must recreate them; keys under a lease are usually short-lived.
	Lease int64 `json:"lease,omitempty"`
	// Prev is the key's value before the event, when the reader asked for it (the writer's
	// digest needs it); it is not stored.
	Prev *PrevValue `json:"-"`
}

// PrevValue is what a key held before an event.
type PrevValue struct{ Value []byte }

// DeltaFile is the content of an Incr object: the events of revisions StartRevision..EndRevision
// in revision order, and the SHA-256 of their JSON encoding, so a truncated or altered file is
// refused rather than replayed.
type DeltaFile struct {
	Format        string `json:"format"`
	StartRevision int64  `json:"startRevision"`
	EndRevision   int64  `json:"endRevision"`
	// Origin is who wrote the delta; absent in deltas written before it was recorded and in
	// etcd-backup-restore's.
	Origin *Origin `json:"origin,omitempty"`
	// End is the keyspace at EndRevision as the writer counted it, for a restore to check what
	// it rebuilt against; absent when the writer could not count it.
	End          *Digest `json:"end,omitempty"`
	EventsSHA256 string  `json:"eventsSha256"`
	Events       []Event `json:"events"`
}

// Origin is who wrote a snapshot: the Etcd resource and the etcd cluster. A restore never chains
// deltas of two clusters; a store is never shared by two Etcds.
type Origin struct {
	// Etcd is the resource's namespace/name, EtcdUID its UID.
	Etcd    string `json:"etcd,omitempty"`
	EtcdUID string `json:"etcdUID,omitempty"`
	// ClusterID is the etcd cluster ID (hex); a restore starts a new one.
	ClusterID string `json:"clusterID,omitempty"`
}

// EncodeDelta writes the events of start..end. The events must be in revision order and inside
// the range; that is checked here so a broken delta is never uploaded.
func EncodeDelta(w io.Writer, start, end int64, events []Event) error {
	return EncodeDeltaFile(w, DeltaFile{StartRevision: start, EndRevision: end, Events: events})
}

// EncodeDeltaFile writes f with its format and checksum filled in.
func EncodeDeltaFile(w io.Writer, f DeltaFile) error {
	if err := checkEvents(f.StartRevision, f.EndRevision, f.Events); err != nil {
		return err
	}
	sum, err := eventsChecksum(f.Events)
	if err != nil {
		return err
	}
	f.Format, f.EventsSHA256 = DeltaFormat, sum
	if f.Events == nil {
		f.Events = []Event{}
	}
	if err := json.NewEncoder(w).Encode(f); err != nil {
		return fmt.Errorf("encode delta %d..%d: %w", f.StartRevision, f.EndRevision, err)
	}
	return nil
}

// ReadDelta reads a delta object's (decompressed) content in any format a restore accepts
// (ScanDelta) and returns it with its events.
func ReadDelta(r io.Reader) (DeltaFile, error) {
	var events []Event
	f, err := ScanDelta(r, func(e Event) error { events = append(events, e); return nil })
	if err != nil {
		return DeltaFile{}, err
	}
	f.Events = events
	return f, nil
}

// ScanDelta reads a delta object's (decompressed) content, told by its first byte:
// etcd-backup-restore's starts with the "[" of its JSON array of events (and its hash covers
// every byte, so nothing may be skipped before it); anything else is etcd-conductor's JSON
// object. It decodes one event at a time and hands each to each (nil: none), holding no more
// than one, so a delta of any size is read in bounded memory. The checksum covers all events
// and is checked at the end: each may have seen events of an object that then fails, so a
// caller that acts on them reads the object twice, once to verify. The DeltaFile returned has
// no Events.
func ScanDelta(r io.Reader, each func(Event) error) (DeltaFile, error) {
	if each == nil {
		each = func(Event) error { return nil }
	}
	br := bufio.NewReader(r)
	first, err := br.Peek(1)
	switch {
	case err == io.EOF:
		return DeltaFile{}, fmt.Errorf("read delta: %w", io.ErrUnexpectedEOF)
	case err != nil:
		return DeltaFile{}, fmt.Errorf("read delta: %w", err)
	case first[0] == '[':
		return scanBackupRestoreDelta(br, each)
	}
	return scanDelta(br, each)
}

// DecodeDelta reads a delta file of etcd-conductor's format and verifies its format, checksum
// and revision order.
func DecodeDelta(r io.Reader) (DeltaFile, error) {
	var events []Event
	f, err := scanDelta(r, func(e Event) error { events = append(events, e); return nil })
	f.Events = events
	return f, err
}

// scanDelta reads etcd-conductor's delta object: its header fields come before its events (as
// EncodeDeltaFile writes them), so the events are checked against the range as they come, and
// their checksum is computed over each one's encoding as json.Encoder wrote the array.
func scanDelta(r io.Reader, each func(Event) error) (DeltaFile, error) {
	var f DeltaFile
	dec := json.NewDecoder(r)
	if err := expectDelim(dec, '{'); err != nil {
		return DeltaFile{}, fmt.Errorf("decode delta: %w", err)
	}
	fields := map[string]any{
		"format": &f.Format, "startRevision": &f.StartRevision, "endRevision": &f.EndRevision,
		"origin": &f.Origin, "end": &f.End, "eventsSha256": &f.EventsSHA256,
	}
	h := sha256.New()
	sawEvents := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return DeltaFile{}, fmt.Errorf("decode delta: %w", err)
		}
		key, _ := tok.(string)
		if key != "events" {
			into, known := fields[key]
			if !known {
				into = &json.RawMessage{}
			}
			if err := dec.Decode(into); err != nil {
				return DeltaFile{}, fmt.Errorf("decode delta field %q: %w", key, err)
			}
			continue
		}
		if f.Format != DeltaFormat {
			return DeltaFile{}, fmt.Errorf("delta format %q, want %q", f.Format, DeltaFormat)
		}
		if err := checkRange(f.StartRevision, f.EndRevision); err != nil {
			return DeltaFile{}, err
		}
		if err := scanEvents(dec, h, f.StartRevision, f.EndRevision, each); err != nil {
			return DeltaFile{}, err
		}
		sawEvents = true
	}
	if err := expectDelim(dec, '}'); err != nil {
		return DeltaFile{}, fmt.Errorf("decode delta: %w", err)
	}
	if f.Format != DeltaFormat {
		return DeltaFile{}, fmt.Errorf("delta format %q, want %q", f.Format, DeltaFormat)
	}
	if !sawEvents {
		return DeltaFile{}, fmt.Errorf("delta %d..%d holds no events field", f.StartRevision, f.EndRevision)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != f.EventsSHA256 {
		return DeltaFile{}, fmt.Errorf("delta %d..%d: events checksum %s, the file says %s", f.StartRevision, f.EndRevision, sum, f.EventsSHA256)
	}
	return f, nil
}

// scanEvents reads the events array, hashing each event's encoding as json.Encoder writes the
// array ("[" e1 "," e2 … "]" "\n"), checking its order and range, handing it to each.
func scanEvents(dec *json.Decoder, h hash.Hash, start, end int64, each func(Event) error) error {
	if err := expectDelim(dec, '['); err != nil {
		return fmt.Errorf("decode delta events: %w", err)
	}
	h.Write([]byte("["))
	prev := start
	for i := 0; dec.More(); i++ {
		var e Event
		if err := dec.Decode(&e); err != nil {
			return fmt.Errorf("decode delta event %d: %w", i, err)
		}
		b, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("checksum delta event %d: %w", i, err)
		}
		if i > 0 {
			h.Write([]byte(","))
		}
		h.Write(b)
		if err := checkEvent(start, end, i, e, prev); err != nil {
			return err
		}
		prev = e.ModRevision
		if err := each(e); err != nil {
			return err
		}
	}
	h.Write([]byte("]\n"))
	return expectDelim(dec, ']')
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != want {
		return fmt.Errorf("want %q, got %v", want, tok)
	}
	return nil
}

func checkEvents(start, end int64, events []Event) error {
	if err := checkRange(start, end); err != nil {
		return err
	}
	prev := start
	for i, e := range events {
		if err := checkEvent(start, end, i, e, prev); err != nil {
			return err
		}
		prev = e.ModRevision
	}
	return nil
}

func checkRange(start, end int64) error {
	if start < 1 || end < start {
		return fmt.Errorf("delta range %d..%d: want 1 <= start <= end", start, end)
	}
	return nil
}

// checkEvent checks event i of delta start..end, after one at revision prev.
func checkEvent(start, end int64, i int, e Event, prev int64) error {
	if e.Type != EventPut && e.Type != EventDelete {
		return fmt.Errorf("delta %d..%d event %d: type %q", start, end, i, e.Type)
	}
	if e.ModRevision < prev || e.ModRevision > end {
		return fmt.Errorf("delta %d..%d event %d: revision %d out of order or range", start, end, i, e.ModRevision)
	}
	return nil
}

func eventsChecksum(events []Event) (string, error) {
	if events == nil {
		events = []Event{}
	}
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(events); err != nil {
		return "", fmt.Errorf("checksum delta events: %w", err)
	}
	sum := sha256.Sum256(buf.Bytes())
	return hex.EncodeToString(sum[:]), nil
}
