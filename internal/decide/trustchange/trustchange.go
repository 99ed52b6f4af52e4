package trustchange

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/etcd-conductor/etcd-conductor/internal/decide/ruleid"
)

// Rule ids.
const (
	RuleNoTLS  ruleid.ID = "trust/no-tls"
	RuleNew    ruleid.ID = "trust/new"
	RuleSteady ruleid.ID = "trust/steady"
	// RuleAddCA: the user's Secrets name a CA the members do not trust yet: added to the held
	// bundles, the members restart to load them.
	RuleAddCA ruleid.ID = "trust/add-ca"
	// RuleWaitMembers: renewed certificates wait until every member runs the held bundles.
	RuleWaitMembers ruleid.ID = "trust/wait-members-trust"
	// RuleCopyLeaves: every member trusts the renewed certificates: they are copied.
	RuleCopyLeaves ruleid.ID = "trust/copy-certificates"
	// RuleHoldUntrusted: a renewed certificate is signed by no CA of the held bundles.
	RuleHoldUntrusted ruleid.ID = "trust/hold-untrusted-certificate"
	// RuleWaitPropagated: a CA is to go, but the certificates copied last may not be in the pods yet.
	RuleWaitPropagated ruleid.ID = "trust/wait-certificates-in-pods"
	// RuleDropCA: a CA the user removed signs no certificate in use any more: it leaves the held
	// bundles, the members restart to trust the remaining ones alone.
	RuleDropCA ruleid.ID = "trust/drop-ca"
	// RuleKeepCA: a CA the user removed still signs a certificate in use: kept until it is renewed.
	RuleKeepCA ruleid.ID = "trust/keep-ca-of-certificates-in-use"
	// RuleRefuseBundle: the user's CA bundle holds no certificate that parses: nothing changes.
	RuleRefuseBundle ruleid.ID = "trust/refuse-unreadable-ca"
	// RuleHoldUnfit: a renewed certificate fails a check (its key, valid now, the members' names,
	// its key usages; fitness.go): the members keep the pair they have until the Secret holds one
	// that passes.
	RuleHoldUnfit ruleid.ID = "trust/hold-unfit-certificate"
)

// Pair is a certificate (with its chain, PEM) and its key.
type Pair struct {
	Cert, Key []byte
}

// Material is what the members mount for one Etcd; a part the Etcd does not use is empty.
type Material struct {
	// ClientCA verifies the certificates of clients, which members ask for, and the serving
	// certificates for the operator and the member-agents; PeerCA verifies the peers.
	ClientCA, PeerCA []byte
	// Server serves the client port, Client is the member-agent's and the operator's, Peer serves
	// and dials the peer port.
	Server, Client, Peer Pair
}

// Empty tells whether m holds nothing.
func (m Material) Empty() bool {
	return len(m.ClientCA) == 0 && len(m.PeerCA) == 0 && m.Server.empty() && m.Client.empty() && m.Peer.empty()
}

// Observed is what the decision needs.
type Observed struct {
	// User is what the Etcd's Secrets hold now.
	User Material
	// Held is what the members mount now; empty when it was never written.
	Held Material
	// MembersTrustHeld: every member runs a pod template restarted for Held's bundles.
	MembersTrustHeld bool
	// CopiedSettled: the certificates copied last are old enough to be in every pod's files.
	CopiedSettled bool
	// Now is the time a renewed certificate must be valid at.
	Now time.Time
	// Need is the names the certificates must cover; Secrets names the Secret of each, for the
	// reasons.
	Need    Need
	Secrets SecretNames
}

// Decision is the material the members are to mount.
type Decision struct {
	Held Material
	// Write: Held differs from what is held; CopiedCertificates: a certificate in it is new (the
	// caller notes when, for CopiedSettled).
	Write, CopiedCertificates bool
	// Waiting: a step waits on the members or on the kubelet; look again soon.
	Waiting bool
	// Warning: the user's Secrets are inconsistent (a certificate of no trusted CA, a bundle
	// that does not parse); Reason says which.
	Warning bool
	Rule    ruleid.ID
	Reason  string
}

// Plan decides the held material.
func Plan(o Observed) Decision {
	if o.User.Empty() {
		return Decision{Held: o.Held, Rule: RuleNoTLS, Reason: "the Etcd names no TLS Secrets"}
	}
	if o.Held.Empty() {
		// Written even when unfit: there is nothing else to mount, and nothing that works is
		// replaced; the Warning says what will fail.
		d := Decision{Held: o.User, Write: true, CopiedCertificates: true, Rule: RuleNew,
			Reason: "the members mount the Etcd's TLS material as its Secrets hold it"}
		user := o.User
		var failed []string
		for _, l := range leavesOf(o, &user, &Material{}) {
			if !l.user.empty() {
				if f := l.check(o.Now); f != "" {
					failed = append(failed, f)
				}
			}
		}
		if len(failed) > 0 {
			d.Warning = true
			d.Reason += "; it has nothing else to mount, but " + strings.Join(failed, "; ")
		}
		return d
	}
	held := o.Held

	// 1. Trust grows at once.
	var added []string
	for _, b := range []struct {
		kind       string
		user, held *[]byte
	}{{"client", &o.User.ClientCA, &held.ClientCA}, {"peer", &o.User.PeerCA, &held.PeerCA}} {
		if len(*b.user) == 0 {
			continue
		}
		grown, n, err := union(*b.user, *b.held)
		if err != nil {
			return Decision{Held: o.Held, Warning: true, Rule: RuleRefuseBundle, Reason: fmt.Sprintf(
				"the %s CA bundle of the Etcd's Secret is not used: %v; the members keep trusting what they trust", b.kind, err)}
		}
		if n > 0 {
			*b.held = grown
			added = append(added, fmt.Sprintf("%d %s CA(s)", n, b.kind))
		}
	}
	if len(added) > 0 {
		return Decision{Held: held, Write: true, Rule: RuleAddCA, Reason: fmt.Sprintf(
			"the Etcd's Secrets name %s the members do not trust yet: added to what they trust (the CAs trusted before stay), each member restarts to load it, one at a time",
			strings.Join(added, " and "))}
	}

	// 2. Renewed certificates once every member trusts them, and only fit ones.
	var renewed, untrusted, failed []string
	var copies []func()
	for _, l := range leavesOf(o, &o.User, &held) {
		if l.user.equal(*l.held) || l.user.empty() {
			continue
		}
		if !signedBy(l.user.Cert, l.ca) {
			untrusted = append(untrusted, l.k.kind)
			continue
		}
		if f := l.check(o.Now); f != "" {
			failed = append(failed, f)
			continue
		}
		renewed = append(renewed, l.k.kind)
		copies = append(copies, func() { *l.held = clonePair(*l.user) })
	}
	unfitReason := ""
	if len(failed) > 0 {
		unfitReason = strings.Join(failed, "; ") + ": held back, the members keep the pair they have until the Secret holds one that passes"
	}
	if len(renewed) > 0 && !o.MembersTrustHeld {
		return Decision{Held: o.Held, Waiting: true, Rule: RuleWaitMembers, Reason: fmt.Sprintf(
			"renewed %s certificate(s) wait until every member runs with the CAs it now trusts", strings.Join(renewed, ", "))}
	}
	if len(renewed) > 0 {
		for _, copyPair := range copies {
			copyPair()
		}
		reason := fmt.Sprintf("every member trusts the renewed %s certificate(s): copied to what the members mount (no restart; etcd loads its certificate at each handshake)",
			strings.Join(renewed, ", "))
		if len(untrusted) > 0 {
			reason += fmt.Sprintf("; the %s certificate(s) are signed by no CA the members trust and stay as they were", strings.Join(untrusted, ", "))
		}
		if unfitReason != "" {
			reason += "; " + unfitReason
		}
		return Decision{Held: held, Write: true, CopiedCertificates: true, Warning: len(untrusted) > 0 || len(failed) > 0, Rule: RuleCopyLeaves, Reason: reason}
	}
	if len(failed) > 0 {
		if len(untrusted) > 0 {
			unfitReason += fmt.Sprintf("; the %s certificate(s) are signed by no CA the members trust", strings.Join(untrusted, ", "))
		}
		return Decision{Held: o.Held, Warning: true, Rule: RuleHoldUnfit, Reason: unfitReason}
	}
	if len(untrusted) > 0 {
		return Decision{Held: o.Held, Warning: true, Rule: RuleHoldUntrusted, Reason: fmt.Sprintf(
			"the %s certificate(s) of the Etcd's Secrets are signed by no CA the members trust (put the CA that signed them into the CA Secret): the members keep the ones they have",
			strings.Join(untrusted, ", "))}
	}

	// 3. A CA the user removed goes once nothing in use needs it.
	var drop []string
	keep := map[string]string{}
	for _, b := range []struct {
		kind       string
		user, held *[]byte
		leaves     []Pair
	}{
		{"client", &o.User.ClientCA, &held.ClientCA, []Pair{held.Server, held.Client}},
		{"peer", &o.User.PeerCA, &held.PeerCA, []Pair{held.Peer}},
	} {
		if len(*b.user) == 0 || sameCertificates(*b.user, *b.held) {
			continue
		}
		for _, p := range b.leaves {
			if p.Cert != nil && !signedBy(p.Cert, *b.user) {
				keep[b.kind] = "a certificate in use is signed by a CA no longer in the Etcd's Secret"
			}
		}
		if _, kept := keep[b.kind]; !kept {
			drop = append(drop, b.kind)
		}
	}
	if len(drop) > 0 {
		if !o.CopiedSettled {
			// A member still serving a certificate of the CA that goes would be refused by those
			// restarted without it.
			return Decision{Held: o.Held, Waiting: true, Rule: RuleWaitPropagated, Reason: fmt.Sprintf(
				"the %s CA(s) the Etcd's Secrets no longer name leave once the certificates copied last are in every pod's files", strings.Join(drop, " and "))}
		}
		for _, kind := range drop {
			if kind == "client" {
				held.ClientCA = bytes.Clone(o.User.ClientCA)
			} else {
				held.PeerCA = bytes.Clone(o.User.PeerCA)
			}
		}
		return Decision{Held: held, Write: true, Rule: RuleDropCA, Reason: fmt.Sprintf(
			"no certificate in use is signed by the %s CA(s) the Etcd's Secrets no longer name: each member restarts to trust the others alone, one at a time",
			strings.Join(drop, " and "))}
	}
	if len(keep) > 0 {
		kinds := make([]string, 0, len(keep))
		for _, k := range []string{"client", "peer"} {
			if _, ok := keep[k]; ok {
				kinds = append(kinds, k)
			}
		}
		return Decision{Held: o.Held, Rule: RuleKeepCA, Reason: fmt.Sprintf(
			"the %s CA(s) the Etcd's Secrets no longer name stay trusted: a certificate in use is signed by one; they go once it is renewed",
			strings.Join(kinds, " and "))}
	}
	return Decision{Held: o.Held, Rule: RuleSteady, Reason: "the members mount the Etcd's TLS material"}
}

// certificates parses the CERTIFICATE blocks of a PEM bundle, in order.
func certificates(bundle []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for rest := bundle; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parsing a certificate: %w", err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate in it")
	}
	return out, nil
}

// union is held with every certificate of user it lacks appended, and how many were; held itself
// is returned when it lacks none, so that a bundle rewritten with the same certificates changes
// nothing.
func union(user, held []byte) ([]byte, int, error) {
	users, err := certificates(user)
	if err != nil {
		return nil, 0, err
	}
	helds, _ := certificates(held)
	have := map[string]bool{}
	for _, c := range helds {
		have[string(c.Raw)] = true
	}
	out := bytes.Clone(held)
	n := 0
	for _, c := range users {
		if have[string(c.Raw)] {
			continue
		}
		have[string(c.Raw)] = true
		if len(out) > 0 && out[len(out)-1] != '\n' {
			out = append(out, '\n')
		}
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
		n++
	}
	if n == 0 {
		return held, 0, nil
	}
	return out, n, nil
}

// sameCertificates tells whether two bundles hold the same set of certificates.
func sameCertificates(a, b []byte) bool {
	as, errA := certificates(a)
	bs, errB := certificates(b)
	if errA != nil || errB != nil {
		return bytes.Equal(a, b)
	}
	set := func(cs []*x509.Certificate) map[string]bool {
		m := map[string]bool{}
		for _, c := range cs {
			m[string(c.Raw)] = true
		}
		return m
	}
	sa, sb := set(as), set(bs)
	if len(sa) != len(sb) {
		return false
	}
	for k := range sa {
		if !sb[k] {
			return false
		}
	}
	return true
}

// signedBy tells whether the first certificate of chain (a PEM certificate and its
// intermediates) chains to a CA of bundle. It is verified at its own notBefore, not now: whether
// it is valid now is etcd's to say at the handshake, this only asks who signed it.
func signedBy(chain, bundle []byte) bool {
	certs, err := certificates(chain)
	if err != nil {
		return false
	}
	cas, err := certificates(bundle)
	if err != nil {
		return false
	}
	roots, intermediates := x509.NewCertPool(), x509.NewCertPool()
	for _, c := range cas {
		roots.AddCert(c)
	}
	for _, c := range certs[1:] {
		intermediates.AddCert(c)
	}
	leaf := certs[0]
	// Within the leaf's validity, at its start, middle and end: a CA created a moment after a
	// leaf's notBefore (clock skew, a backdated leaf) still signed it.
	middle := leaf.NotBefore.Add(leaf.NotAfter.Sub(leaf.NotBefore) / 2)
	for _, at := range []time.Time{leaf.NotBefore, middle, leaf.NotAfter} {
		_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: intermediates,
			CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
		if err == nil {
			return true
		}
	}
	return false
}

func (p Pair) empty() bool       { return len(p.Cert) == 0 && len(p.Key) == 0 }
func (p Pair) equal(q Pair) bool { return bytes.Equal(p.Cert, q.Cert) && bytes.Equal(p.Key, q.Key) }

func clonePair(p Pair) Pair { return Pair{Cert: bytes.Clone(p.Cert), Key: bytes.Clone(p.Key)} }
