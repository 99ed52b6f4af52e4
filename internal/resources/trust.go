package resources

import (
	"crypto/sha256"
	"encoding/hex"
)

// AnnotationTrustChecksum is, on the member StatefulSet, the checksum of the CA bundles the Etcd
// reconciler last read from the CA Secrets the Etcd names (its record), and on the pod template
// the checksum the members were last restarted for. etcd re-reads its own certificate and key at
// every handshake, so a renewed leaf certificate needs no restart; but it reads the CA bundles it
// trusts only at start, so a changed bundle needs every member restarted, which the template
// annotation turns into a rollout: one member at a time, the leader last.
const AnnotationTrustChecksum = "etcd-conductor.io/trust-checksum"

// TrustChecksum is the checksum of CA bundles, each named by the kind of traffic it secures
// ("client", "peer") so that the same bundle moving from one to the other is a change too.
func TrustChecksum(bundles map[string][]byte) string {
	h := sha256.New()
	for _, kind := range []string{"client", "peer"} {
		if b, ok := bundles[kind]; ok {
			h.Write([]byte(kind))
			h.Write([]byte{0})
			h.Write(b)
			h.Write([]byte{0})
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// TrustRestart decides the trust checksums to write from the pod template's (running), the
// StatefulSet's record and the checksum of the bundles the Secrets hold now (current, "" when
// they could not be read). Only a change against the record restarts the members: a StatefulSet
// without a record (new, or written by a release before this one) gets one without a restart,
// and an unreadable Secret changes nothing.
func TrustRestart(running, recorded, current string) (template, record string) {
	switch {
	case current == "":
		return running, recorded
	case recorded == "":
		return running, current
	case current != recorded:
		return current, current
	}
	return running, recorded
}
