package snapshot

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/bits"
)

// Digest summarises a keyspace at one revision: how many keys it holds and a sum, over every
// key, of SHA-256(len(key) ‖ key ‖ value) read as a 256-bit integer, modulo 2^256. It is a sum
// rather than a hash of a sorted listing so that the backup writer can carry it forward event by
// event (add the new pair, subtract the one it replaced) and a restore can recompute it over the
// restored keys in whatever order it reads them: equal digests say the keys and values are the
// same, whichever of the two computed it.
type Digest struct {
	Revision int64  `json:"revision"`
	Keys     int64  `json:"keys"`
	Sum      string `json:"sum"`
}

func (d Digest) String() string {
	return fmt.Sprintf("%d keys at revision %d, sum %.16s…", d.Keys, d.Revision, d.Sum)
}

// Accumulator builds a Digest; its zero value is the empty keyspace.
type Accumulator struct {
	keys int64
	sum  [4]uint64 // little-endian limbs
}

// AccumulatorFrom continues from a recorded digest.
func AccumulatorFrom(d Digest) (Accumulator, error) {
	b, err := hex.DecodeString(d.Sum)
	if err != nil || len(b) != sha256.Size {
		return Accumulator{}, fmt.Errorf("digest sum %q is not %d hex bytes", d.Sum, sha256.Size)
	}
	a := Accumulator{keys: d.Keys}
	for i := range a.sum {
		a.sum[i] = binary.BigEndian.Uint64(b[(3-i)*8:])
	}
	return a, nil
}

// Add counts a key holding value.
func (a *Accumulator) Add(key, value []byte) {
	a.keys++
	a.addLimbs(pairHash(key, value), false)
}

// Remove uncounts a key that held value.
func (a *Accumulator) Remove(key, value []byte) {
	a.keys--
	a.addLimbs(pairHash(key, value), true)
}

// Apply carries the count over events, in revision order. A put or delete of a key that held a
// value must carry it (Event.Prev): it is what leaves the sum. false when an event lacks it; the
// accumulator is then no longer a count of anything.
func (a *Accumulator) Apply(events []Event) bool {
	for _, e := range events {
		switch {
		case e.Prev != nil:
			a.Remove(e.Key, e.Prev.Value)
		case e.Type == EventDelete || e.Version != 1:
			return false // a key that existed, without its old value
		}
		if e.Type == EventPut {
			a.Add(e.Key, e.Value)
		}
	}
	return true
}

// Digest is the keyspace counted so far, as of rev.
func (a Accumulator) Digest(rev int64) Digest {
	var b [sha256.Size]byte
	for i, l := range a.sum {
		binary.BigEndian.PutUint64(b[(3-i)*8:], l)
	}
	return Digest{Revision: rev, Keys: a.keys, Sum: hex.EncodeToString(b[:])}
}

func pairHash(key, value []byte) [4]uint64 {
	h := sha256.New()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(key)))
	h.Write(n[:])
	h.Write(key)
	h.Write(value)
	sum := h.Sum(nil)
	var limbs [4]uint64
	for i := range limbs {
		limbs[i] = binary.BigEndian.Uint64(sum[(3-i)*8:])
	}
	return limbs
}

// addLimbs adds (or subtracts) x modulo 2^256.
func (a *Accumulator) addLimbs(x [4]uint64, subtract bool) {
	var carry uint64
	for i := range a.sum {
		if subtract {
			var borrow uint64
			a.sum[i], borrow = bits.Sub64(a.sum[i], x[i], carry)
			carry = borrow
		} else {
			a.sum[i], carry = bits.Add64(a.sum[i], x[i], carry)
		}
	}
}
