package restore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// bbolt's meta page layout (go.etcd.io/bbolt, internal/common: a 16-byte page header, then the
// meta fields), read here because bbolt maps the file and a page past its end is a SIGBUS, not
// an error: a database cut short must be refused before bbolt opens it.
const (
	boltPageHeader = 16
	boltMagic      = 0xED0CDAED
	boltMetaSize   = 64 // magic, version, pageSize, flags, root bucket (16), freelist, pgid, txid, checksum
)

type boltMeta struct {
	pageSize uint32
	pgid     uint64 // pages in use: the file holds at least pgid*pageSize bytes
	txid     uint64
}

// readBoltMeta reads one meta page at off; ok is false when it is not a valid one.
func readBoltMeta(f io.ReaderAt, off int64) (boltMeta, bool) {
	b := make([]byte, boltPageHeader+boltMetaSize)
	if _, err := f.ReadAt(b, off); err != nil {
		return boltMeta{}, false
	}
	m := b[boltPageHeader:]
	le := binary.LittleEndian
	if le.Uint32(m[0:]) != boltMagic {
		return boltMeta{}, false
	}
	h := fnv.New64a()
	h.Write(m[:56])
	if h.Sum64() != le.Uint64(m[56:]) {
		return boltMeta{}, false
	}
	return boltMeta{pageSize: le.Uint32(m[8:]), pgid: le.Uint64(m[40:]), txid: le.Uint64(m[48:])}, true
}

// checkDBSize refuses a database file shorter than its newest valid meta page says it is.
func checkDBSize(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	m0, ok0 := readBoltMeta(f, 0)
	var m1 boltMeta
	ok1 := false
	if ok0 {
		m1, ok1 = readBoltMeta(f, int64(m0.pageSize))
	}
	m := m0
	switch {
	case !ok0 && !ok1:
		return errors.New("no valid bbolt meta page: not a database")
	case ok1 && (!ok0 || m1.txid > m0.txid):
		m = m1
	}
	if need := int64(m.pgid) * int64(m.pageSize); st.Size() < need {
		return fmt.Errorf("cut short: the database needs %d bytes, the file has %d", need, st.Size())
	}
	return nil
}
