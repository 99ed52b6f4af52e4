package trustchange

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/etcd-conductor/etcd-conductor/internal/decide/ruleid"
	"github.com/etcd-conductor/etcd-conductor/tls/testpki"
)

// pkis are two CAs, each with a serving, client and peer certificate, built once: key generation
// is the slow part of these tests.
var pkis = func() [2]*testpki.EtcdPKI {
	var out [2]*testpki.EtcdPKI
	for i := range out {
		p, err := testpki.NewEtcdPKI("etcd-main", "shoot")
		if err != nil {
			panic(err)
		}
		out[i] = p
	}
	return out
}()

func pair(kp testpki.KeyPair) Pair { return Pair{Cert: kp.CertPEM, Key: kp.KeyPEM} }

// material is what a user's Secrets hold: cas names the CAs of the CA Secret (0: old, 1: new),
// signer which CA issued the serving, client and peer certificates.
func material(cas []int, signer [3]int) Material {
	var bundle []byte
	for _, i := range cas {
		bundle = append(bundle, pkis[i].CA.CertPEM...)
	}
	return Material{ClientCA: bundle, PeerCA: bundle,
		Server: pair(pkis[signer[0]].Server), Client: pair(pkis[signer[1]].Client), Peer: pair(pkis[signer[2]].Peer)}
}

func TestPlan(t *testing.T) {
	old := material([]int{0}, [3]int{0, 0, 0})
	both := material([]int{0, 1}, [3]int{0, 0, 0})
	bothRenewed := material([]int{0, 1}, [3]int{1, 1, 1})
	newOnly := material([]int{1}, [3]int{1, 1, 1})
	newCAOldLeaves := material([]int{1}, [3]int{0, 0, 0})
	heldBoth := both
	heldBothRenewed := bothRenewed
	for _, tc := range []struct {
		name    string
		o       Observed
		rule    ruleid.ID
		held    Material
		waiting bool
		warning bool
	}{
		{"no TLS", Observed{}, RuleNoTLS, Material{}, false, false},
		{"new Etcd: the user's material", Observed{User: old}, RuleNew, old, false, false},
		{"steady", Observed{User: old, Held: old, MembersTrustHeld: true, CopiedSettled: true}, RuleSteady, old, false, false},
		{"new CA and its certificates in one step: the CA is added, the certificates wait",
			Observed{User: newOnly, Held: old, MembersTrustHeld: true, CopiedSettled: true}, RuleAddCA, heldBoth, false, false},
		{"certificates of a trusted CA wait for the members' restart",
			Observed{User: newOnly, Held: heldBoth, CopiedSettled: true}, RuleWaitMembers, heldBoth, true, false},
		{"every member trusts both: the certificates are copied",
			Observed{User: newOnly, Held: heldBoth, MembersTrustHeld: true, CopiedSettled: true}, RuleCopyLeaves, heldBothRenewed, false, false},
		{"old CA to drop, copies not in the pods yet: wait",
			Observed{User: newOnly, Held: heldBothRenewed, MembersTrustHeld: true}, RuleWaitPropagated, heldBothRenewed, true, false},
		{"old CA signs nothing in use: dropped",
			Observed{User: newOnly, Held: heldBothRenewed, MembersTrustHeld: true, CopiedSettled: true}, RuleDropCA, newOnly, false, false},
		{"CA renewed, certificates not yet (cert-manager): the old CA stays",
			Observed{User: newCAOldLeaves, Held: heldBoth, MembersTrustHeld: true, CopiedSettled: true}, RuleKeepCA, heldBoth, false, false},
		{"a certificate of no trusted CA is held back",
			Observed{User: material([]int{0}, [3]int{0, 1, 0}), Held: old, MembersTrustHeld: true, CopiedSettled: true}, RuleHoldUntrusted, old, false, true},
		{"an unreadable CA bundle changes nothing",
			Observed{User: Material{ClientCA: []byte("garbage"), PeerCA: old.PeerCA, Server: old.Server, Client: old.Client, Peer: old.Peer}, Held: old, MembersTrustHeld: true, CopiedSettled: true},
			RuleRefuseBundle, old, false, true},
		{"the same CAs rewritten in another order change nothing",
			Observed{User: material([]int{1, 0}, [3]int{0, 0, 0}), Held: heldBoth, MembersTrustHeld: true, CopiedSettled: true}, RuleSteady, heldBoth, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Now, tc.o.Need = now, need
			d := Plan(tc.o)
			if d.Rule != tc.rule || d.Waiting != tc.waiting || d.Warning != tc.warning {
				t.Fatalf("Plan = %s waiting=%v warning=%v (%s); want %s waiting=%v warning=%v", d.Rule, d.Waiting, d.Warning, d.Reason, tc.rule, tc.waiting, tc.warning)
			}
			if !sameMaterial(d.Held, tc.held) {
				t.Errorf("held material after %s is not the expected one", d.Rule)
			}
			if d.Write == sameMaterial(d.Held, tc.o.Held) && !(tc.o.Held.Empty() && d.Held.Empty()) {
				t.Errorf("Write = %v, but the held material changed: %v", d.Write, !sameMaterial(d.Held, tc.o.Held))
			}
		})
	}
}

// sameMaterial compares bundles as sets of certificates and pairs by bytes.
func sameMaterial(a, b Material) bool {
	return sameCertificates(a.ClientCA, b.ClientCA) && sameCertificates(a.PeerCA, b.PeerCA) &&
		a.Server.equal(b.Server) && a.Client.equal(b.Client) && a.Peer.equal(b.Peer)
}

// member is one etcd member: the bundles it loaded at its last start and the certificates its
// pod's files hold (the kubelet refreshes them some time after the held Secret changed).
type member struct {
	clientCA, peerCA []byte
	files            Material
}

// TestPlanProperties drives a three-member cluster through random user changes (either CA or
// both in the CA Secret, each certificate from either CA), restarts of members whose template is
// outdated, and late kubelet refreshes, planning after every step. At every step no member, and
// not the operator, distrusts what another presents: each member's peer certificate is trusted by
// every member, every member's serving certificate and the operator's client certificate by the
// operator and the members. The checked certificates are the ones the user's Secrets named at some
// time, so the invariant is what the cluster sees, whatever the user wrote.
func TestPlanProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	// Verifying a signature is the slow part: the invariant asks the same questions again and again.
	memo := map[string]bool{}
	trusts := func(cert, bundle []byte) bool {
		key := string(cert) + "\x00" + string(bundle)
		v, ok := memo[key]
		if !ok {
			v = signedBy(cert, bundle)
			memo[key] = v
		}
		return v
	}
	caSets := [][]int{{0}, {1}, {0, 1}, {1, 0}}
	for run := 0; run < 100; run++ {
		user := material([]int{0}, [3]int{0, 0, 0})
		held := Plan(Observed{User: user}).Held
		members := make([]member, 3)
		for i := range members {
			members[i] = member{clientCA: held.ClientCA, peerCA: held.PeerCA, files: held}
		}
		for step := 0; step < 40; step++ {
			switch rng.IntN(4) {
			case 0: // the user writes the Secrets
				if rng.IntN(2) == 0 {
					user = material(caSets[rng.IntN(len(caSets))], [3]int{rng.IntN(2), rng.IntN(2), rng.IntN(2)})
					// Often one certificate is an unfit one: a key of another pair, expired, not
					// valid yet, the wrong names or key usages.
					if rng.IntN(2) == 0 {
						ca := rng.IntN(2)
						switch rng.IntN(3) {
						case 0:
							user.Server = unfitPairs[ca].server[rng.IntN(len(unfitPairs[ca].server))]
						case 1:
							user.Client = unfitPairs[ca].client[rng.IntN(len(unfitPairs[ca].client))]
						default:
							user.Peer = unfitPairs[ca].peer[rng.IntN(len(unfitPairs[ca].peer))]
						}
					}
				}
			case 1: // the rollout restarts an outdated member (any one: order does not matter to trust)
				i := rng.IntN(3)
				if !bytes.Equal(members[i].clientCA, held.ClientCA) || !bytes.Equal(members[i].peerCA, held.PeerCA) {
					members[i] = member{clientCA: held.ClientCA, peerCA: held.PeerCA, files: held}
				}
			default: // the kubelet refreshes one pod's files
				members[rng.IntN(3)].files = held
			}
			trusted, settled := true, true
			for _, m := range members {
				trusted = trusted && bytes.Equal(m.clientCA, held.ClientCA) && bytes.Equal(m.peerCA, held.PeerCA)
				settled = settled && m.files.Server.equal(held.Server) && m.files.Peer.equal(held.Peer) && m.files.Client.equal(held.Client)
			}
			d := Plan(Observed{User: user, Held: held, MembersTrustHeld: trusted, CopiedSettled: settled, Now: now, Need: need})
			if d.Write && sameMaterial(d.Held, held) && bytes.Equal(d.Held.ClientCA, held.ClientCA) {
				t.Fatalf("run %d step %d: %s writes what is held", run, step, d.Rule)
			}
			// No pair the members get mounted is one that fails a check.
			for _, l := range leavesOf(Observed{Need: need}, &d.Held, &held) {
				if !l.user.equal(*l.held) {
					if f := l.check(now); f != "" {
						t.Fatalf("run %d step %d: %s copies an unfit pair: %s", run, step, d.Rule, f)
					}
				}
			}
			held = d.Held
			for a, ma := range members {
				// The operator reads the held Secret at once: its trust and client certificate.
				if !trusts(ma.files.Server.Cert, held.ClientCA) {
					t.Fatalf("run %d step %d after %s: the operator distrusts member %d's serving certificate", run, step, d.Rule, a)
				}
				if !trusts(held.Client.Cert, ma.clientCA) {
					t.Fatalf("run %d step %d after %s: member %d distrusts the operator's client certificate", run, step, d.Rule, a)
				}
				for b, mb := range members {
					if a != b && !trusts(mb.files.Peer.Cert, ma.peerCA) {
						t.Fatalf("run %d step %d after %s: member %d distrusts member %d's peer certificate", run, step, d.Rule, a, b)
					}
				}
			}
		}
	}
}

// TestPlanConverges: after any user change, restarts and refreshes as the decisions ask lead to
// the user's material exactly once its certificates are signed by its CAs: nothing of the old CA
// is trusted for ever.
func TestPlanConverges(t *testing.T) {
	start := material([]int{0}, [3]int{0, 0, 0})
	for _, user := range []Material{
		material([]int{1}, [3]int{1, 1, 1}),
		material([]int{0, 1}, [3]int{1, 1, 1}),
		material([]int{0}, [3]int{0, 0, 0}),
	} {
		held := start
		for i := 0; i < 10; i++ {
			// Every member restarts and refreshes between two looks.
			d := Plan(Observed{User: user, Held: held, MembersTrustHeld: true, CopiedSettled: true, Now: now, Need: need})
			held = d.Held
		}
		if !sameMaterial(held, user) {
			t.Errorf("after ten looks the members mount something else than the user's material")
		}
	}
}
