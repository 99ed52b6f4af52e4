package etcdtest

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"
)

// PlantValue changes the value of key's latest revision in the etcd database at path (a member's
// member/snap/db, the member stopped or not started yet), as a snapshot someone else wrote into
// the backup bucket would hold it: the consistent index and every other key stay, so raft and the
// seeding checks accept it.
func PlantValue(path, key, value string) error {
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		return fmt.Errorf("opening %s: %w", path, err)
	}
	defer db.Close()
	return db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("key"))
		if b == nil {
			return fmt.Errorf("no key bucket in %s", path)
		}
		var revision []byte
		var kv *mvccpb.KeyValue
		if err := b.ForEach(func(k, v []byte) error {
			e := &mvccpb.KeyValue{}
			if err := proto.Unmarshal(v, e); err != nil {
				return err
			}
			if string(e.Key) == key {
				revision, kv = append([]byte(nil), k...), e
			}
			return nil
		}); err != nil {
			return err
		}
		if revision == nil {
			return fmt.Errorf("key %s not in %s", key, path)
		}
		kv.Value = []byte(value)
		raw, err := proto.Marshal(kv)
		if err != nil {
			return err
		}
		return b.Put(revision, raw)
	})
}
