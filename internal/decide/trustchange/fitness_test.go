package trustchange

import (
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"github.com/etcd-conductor/etcd-conductor/tls/testpki"
)

// now is the time every plan of these tests is made at; need what the members of the Etcd the
// pkis are for ("etcd-main" in "shoot", three members) need of their certificates.
var (
	now  = time.Now()
	need = Need{
		ServerNames: []string{"etcd-main-0.etcd-main-peer.shoot.svc", "etcd-main-1.etcd-main-peer.shoot.svc", "etcd-main-2.etcd-main-peer.shoot.svc"},
		ServerAnyOf: []string{"etcd-main-client", "etcd-main-client.shoot", "etcd-main-client.shoot.svc"},
		PeerNames:   []string{"etcd-main-0.etcd-main-peer.shoot.svc", "etcd-main-1.etcd-main-peer.shoot.svc", "etcd-main-2.etcd-main-peer.shoot.svc"},
	}
)

// unfitSet are pairs signed by a CA of pkis that each fail one check, by the check.
type unfitSet struct {
	server, client, peer []Pair
	// byCheck: one serving pair per check it fails, and the good renewal.
	byCheck map[string]Pair
	good    Pair
}

var unfitPairs = func() [2]unfitSet {
	var out [2]unfitSet
	for i, p := range pkis {
		dns := testpki.MemberServerDNSNames("etcd-main", "shoot")
		issue := func(r testpki.Request) Pair {
			kp, err := p.CA.Issue(r)
			if err != nil {
				panic(err)
			}
			return pair(kp)
		}
		server := func(mod func(*testpki.Request)) Pair {
			r := testpki.Request{CommonName: "server", DNSNames: dns, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
			mod(&r)
			return issue(r)
		}
		good := server(func(*testpki.Request) {})
		mismatched := Pair{Cert: good.Cert, Key: p.Server.KeyPEM}
		expired := server(func(r *testpki.Request) { r.NotBefore, r.Validity = now.Add(-50*time.Minute), 10*time.Minute })
		future := server(func(r *testpki.Request) { r.NotBefore = now.Add(24 * time.Hour) })
		// Covers the client Service and one member only.
		oneMember := server(func(r *testpki.Request) {
			r.DNSNames = []string{"etcd-main-0.etcd-main-peer.shoot.svc", "etcd-main-client.shoot.svc"}
		})
		noService := server(func(r *testpki.Request) { r.DNSNames = []string{"*.etcd-main-peer.shoot.svc"} })
		clientOnly := server(func(r *testpki.Request) { r.Usages = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth} })
		out[i] = unfitSet{
			good: good,
			byCheck: map[string]Pair{
				CheckKeyMatch: mismatched, CheckValidNow + " (expired)": expired, CheckValidNow + " (not yet)": future,
				CheckNames + " (a member)": oneMember, CheckNames + " (the client Service)": noService, CheckUsage: clientOnly,
			},
			server: []Pair{mismatched, expired, future, oneMember, noService, clientOnly},
			client: []Pair{
				{Cert: p.Client.CertPEM, Key: p.Server.KeyPEM},
				issue(testpki.Request{CommonName: "client", NotBefore: now.Add(-50 * time.Minute), Validity: 10 * time.Minute, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}),
				issue(testpki.Request{CommonName: "client", Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}),
			},
			peer: []Pair{
				{Cert: p.Peer.CertPEM, Key: p.Client.KeyPEM},
				issue(testpki.Request{CommonName: "peer", DNSNames: dns, NotBefore: now.Add(time.Hour)}),
				issue(testpki.Request{CommonName: "peer", DNSNames: []string{"etcd-main-0.etcd-main-peer.shoot.svc"}}),
				// Serves the peer port but cannot dial the others with it.
				issue(testpki.Request{CommonName: "peer", DNSNames: dns, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}),
			},
		}
	}
	return out
}()

// TestPlanHoldsUnfitCertificates: a renewed serving certificate that fails a check is held back
// with RuleHoldUnfit, the Secret and the check named; the members keep the pair they have. The
// same Secret holding a fit pair afterwards is copied.
func TestPlanHoldsUnfitCertificates(t *testing.T) {
	old := material([]int{0}, [3]int{0, 0, 0})
	secrets := SecretNames{Server: "etcd-main-server-tls", Client: "etcd-main-client-tls", Peer: "etcd-main-peer-tls"}
	observe := func(server Pair) Observed {
		user := old
		user.Server = server
		return Observed{User: user, Held: old, MembersTrustHeld: true, CopiedSettled: true, Now: now, Need: need, Secrets: secrets}
	}
	for name, p := range unfitPairs[0].byCheck {
		t.Run(name, func(t *testing.T) {
			d := Plan(observe(p))
			if d.Rule != RuleHoldUnfit || !d.Warning || d.Write {
				t.Fatalf("Plan = %s warning=%v write=%v (%s); want %s, a warning, nothing written", d.Rule, d.Warning, d.Write, d.Reason, RuleHoldUnfit)
			}
			check, _, _ := strings.Cut(name, " (")
			if !strings.Contains(d.Reason, check) || !strings.Contains(d.Reason, secrets.Server) {
				t.Errorf("reason %q names not the check %s and the Secret %s", d.Reason, check, secrets.Server)
			}
			if !sameMaterial(d.Held, old) {
				t.Errorf("the held material changed")
			}
			// The user fixes the Secret: the fit pair goes through.
			if d := Plan(observe(unfitPairs[0].good)); d.Rule != RuleCopyLeaves || !d.Held.Server.equal(unfitPairs[0].good) || d.Warning {
				t.Errorf("after the fix: Plan = %s warning=%v (%s); want %s with the fit pair", d.Rule, d.Warning, d.Reason, RuleCopyLeaves)
			}
		})
	}
	t.Run("a fit pair beside an unfit one is copied, the unfit one held back", func(t *testing.T) {
		o := observe(unfitPairs[0].good)
		o.User.Peer = unfitPairs[0].peer[3]
		d := Plan(o)
		if d.Rule != RuleCopyLeaves || !d.Warning || !d.Held.Server.equal(unfitPairs[0].good) || !d.Held.Peer.equal(old.Peer) {
			t.Fatalf("Plan = %s warning=%v (%s); want the serving pair copied, the peer pair held back with a warning", d.Rule, d.Warning, d.Reason)
		}
		if !strings.Contains(d.Reason, CheckUsage) || !strings.Contains(d.Reason, "clientAuth") {
			t.Errorf("reason %q names not the peer's missing clientAuth", d.Reason)
		}
	})
	t.Run("a new Etcd mounts what it has, with a warning", func(t *testing.T) {
		o := observe(unfitPairs[0].byCheck[CheckKeyMatch])
		o.Held = Material{}
		d := Plan(o)
		if d.Rule != RuleNew || !d.Write || !d.Warning || !strings.Contains(d.Reason, CheckKeyMatch) {
			t.Fatalf("Plan = %s write=%v warning=%v (%s); want %s written with a warning naming %s", d.Rule, d.Write, d.Warning, d.Reason, RuleNew, CheckKeyMatch)
		}
	})
}

// TestFitEachKind: the client and peer pairs are checked for their own usages and names.
func TestFitEachKind(t *testing.T) {
	for i, p := range unfitPairs[0].client {
		if err := fit(kindClient, p, now, nil, nil); err == nil {
			t.Errorf("unfit client pair %d passes", i)
		}
	}
	for i, p := range unfitPairs[0].peer {
		if err := fit(kindPeer, p, now, need.PeerNames, nil); err == nil {
			t.Errorf("unfit peer pair %d passes", i)
		}
	}
	for _, c := range []struct {
		k    leafKind
		p    Pair
		all  []string
		what string
	}{
		{kindServing, pair(pkis[0].Server), need.ServerNames, "serving"},
		{kindClient, pair(pkis[0].Client), nil, "client"},
		{kindPeer, pair(pkis[0].Peer), need.PeerNames, "peer"},
	} {
		if err := fit(c.k, c.p, now, c.all, nil); err != nil {
			t.Errorf("the fit %s pair fails: %v", c.what, err)
		}
	}
}
