package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// createdOn is the time every object is named with, fixed so that generating again renames
// nothing; the deltas follow 20 s apart, as with etcd-druid's default delta period.
var createdOn = time.Unix(1795000000, 0).UTC()

// expected is expected.json: the source's keyspace at the chain's end revision.
type expected struct {
	Revision int64             `json:"revision"`
	Keys     map[string]string `json:"keys"`
}

// generate writes the history to a new member, backs it up and writes the fixtures to out.
func generate(ctx context.Context, h *harness, out string) error {
	s, err := startSource(h)
	if err != nil {
		return err
	}
	if err := before(ctx, s); err != nil {
		return fmt.Errorf("history before the full snapshot: %w", err)
	}
	fullRev, err := s.revision(ctx)
	if err != nil {
		return err
	}
	if err := betweenRevisionAndSnapshot(ctx, s); err != nil {
		return err
	}
	db, err := s.snapshot(ctx)
	if err != nil {
		return err
	}
	chain := []object{{name: name("Full", 0, fullRev, createdOn), data: db}}

	prev := fullRev
	for i, write := range deltas {
		if err := write(ctx, s); err != nil {
			return fmt.Errorf("history of delta %d: %w", i+1, err)
		}
		end, err := s.revision(ctx)
		if err != nil {
			return err
		}
		events, err := s.events(ctx, prev+1, end)
		if err != nil {
			return err
		}
		data, err := encodeDelta(events)
		if err != nil {
			return err
		}
		at := createdOn.Add(time.Duration(i+1) * 20 * time.Second)
		chain = append(chain, object{name: name("Incr", prev+1, end, at), data: data})
		prev = end
	}

	// The final full snapshot etcd-backup-restore takes as it stops, alone in its own store.
	finalRev, err := s.revision(ctx)
	if err != nil {
		return err
	}
	finalDB, err := s.snapshot(ctx)
	if err != nil {
		return err
	}
	final := object{name: name("Full", 0, finalRev, createdOn.Add(80*time.Second)), data: finalDB, final: true}

	keys, err := s.keyspace(ctx, prev)
	if err != nil {
		return err
	}
	return write(out, chain, final, expected{Revision: prev, Keys: keys})
}

// write replaces the fixture stores under out: one per compression holding the chain, and
// final/ holding the final full snapshot gzip-compressed.
func write(out string, chain []object, final object, want expected) error {
	for _, c := range compressions {
		dir := filepath.Join(out, c.dir)
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
		for _, o := range chain {
			if err := o.write(dir, c); err != nil {
				return err
			}
		}
	}
	dir := filepath.Join(out, "final")
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := final.write(dir, gzipCompression); err != nil {
		return err
	}
	data, err := json.MarshalIndent(want, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "expected.json"), append(data, '\n'), 0o644)
}
