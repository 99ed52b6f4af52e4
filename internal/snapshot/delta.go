package snapshot

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
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
}

// DeltaFile is the content of an Incr object: the events of revisions StartRevision..EndRevision
// in revision order, and the SHA-256 of their JSON encoding, so a truncated or altered file is
// refused rather than replayed.
type DeltaFile struct {
	Format        string  `json:"format"`
	StartRevision int64   `json:"startRevision"`
	EndRevision   int64   `json:"endRevision"`
	EventsSHA256  string  `json:"eventsSha256"`
	Events        []Event `json:"events"`
}

// EncodeDelta writes the events of start..end. The events must be in revision order and inside
// the range; that is checked here so a broken delta is never uploaded.
func EncodeDelta(w io.Writer, start, end int64, events []Event) error {
	if err := checkEvents(start, end, events); err != nil {
		return err
	}
	sum, err := eventsChecksum(events)
	if err != nil {
		return err
	}
	f := DeltaFile{Format: DeltaFormat, StartRevision: start, EndRevision: end, EventsSHA256: sum, Events: events}
	if f.Events == nil {
		f.Events = []Event{}
	}
	if err := json.NewEncoder(w).Encode(f); err != nil {
		return fmt.Errorf("encode delta %d..%d: %w", start, end, err)
	}
	return nil
}

// ReadDelta reads a delta object's (decompressed) content in any format a restore accepts, told
// by its first byte: etcd-backup-restore's starts with the "[" of its JSON array of events (and
// its hash covers every byte, so nothing may be skipped before it); anything else is read as
// etcd-conductor's JSON object (DecodeDelta). Either is decoded once, streaming.
func ReadDelta(r io.Reader) (DeltaFile, error) {
	br := bufio.NewReader(r)
	first, err := br.Peek(1)
	switch {
	case err == io.EOF:
		return DeltaFile{}, fmt.Errorf("read delta: %w", io.ErrUnexpectedEOF)
	case err != nil:
		return DeltaFile{}, fmt.Errorf("read delta: %w", err)
	case first[0] == '[':
		return decodeBackupRestoreDelta(br)
	}
	return DecodeDelta(br)
}

// DecodeDelta reads a delta file and verifies its format, checksum and revision order.
func DecodeDelta(r io.Reader) (DeltaFile, error) {
	var f DeltaFile
	dec := json.NewDecoder(r)
	if err := dec.Decode(&f); err != nil {
		return DeltaFile{}, fmt.Errorf("decode delta: %w", err)
	}
	if f.Format != DeltaFormat {
		return DeltaFile{}, fmt.Errorf("delta format %q, want %q", f.Format, DeltaFormat)
	}
	sum, err := eventsChecksum(f.Events)
	if err != nil {
		return DeltaFile{}, err
	}
	if sum != f.EventsSHA256 {
		return DeltaFile{}, fmt.Errorf("delta %d..%d: events checksum %s, the file says %s", f.StartRevision, f.EndRevision, sum, f.EventsSHA256)
	}
	if err := checkEvents(f.StartRevision, f.EndRevision, f.Events); err != nil {
		return DeltaFile{}, err
	}
	return f, nil
}

func checkEvents(start, end int64, events []Event) error {
	if start < 1 || end < start {
		return fmt.Errorf("delta range %d..%d: want 1 <= start <= end", start, end)
	}
	prev := start
	for i, e := range events {
		if e.Type != EventPut && e.Type != EventDelete {
			return fmt.Errorf("delta %d..%d event %d: type %q", start, end, i, e.Type)
		}
		if e.ModRevision < prev || e.ModRevision > end {
			return fmt.Errorf("delta %d..%d event %d: revision %d out of order or range", start, end, i, e.ModRevision)
		}
		prev = e.ModRevision
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
