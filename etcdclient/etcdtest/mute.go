package etcdtest

import (
	"fmt"
	"net/url"
	"os/exec"
	"strings"
)

// Mute cuts every connection to member i's peer listener with iptables (needs root), and returns
// what lifts it. etcd sends raft messages to a peer over connections the peer dialled, so the
// muted member still hears the others, the leader's heartbeats included, while none of them hears
// it: a one-way partition of the kind a half-broken network makes. Its client port stays open.
func (c *Cluster) Mute(i int) (heal func() error, err error) {
	m := c.Members[i]
	u, err := url.Parse(m.PeerURL)
	if err != nil {
		return nil, fmt.Errorf("etcdtest: peer URL of %s: %w", m.Name, err)
	}
	comment := "etcdtest-mute-" + m.Name + "-" + u.Port()
	rules := [][]string{
		{"-p", "tcp", "-d", m.IP, "--dport", u.Port(), "-m", "comment", "--comment", comment, "-j", "DROP"},
		{"-p", "tcp", "-s", m.IP, "--sport", u.Port(), "-m", "comment", "--comment", comment, "-j", "DROP"},
	}
	var added [][]string
	heal = func() error {
		var errs []string
		for _, r := range added {
			if out, err := exec.Command("iptables", append([]string{"-w", "-D", "OUTPUT"}, r...)...).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Sprintf("%v: %s", err, strings.TrimSpace(string(out))))
			}
		}
		added = nil
		if len(errs) > 0 {
			return fmt.Errorf("etcdtest: unmuting %s: %s", m.Name, strings.Join(errs, "; "))
		}
		return nil
	}
	for _, r := range rules {
		if out, err := exec.Command("iptables", append([]string{"-w", "-I", "OUTPUT"}, r...)...).CombinedOutput(); err != nil {
			_ = heal()
			return nil, fmt.Errorf("etcdtest: muting %s: %w: %s", m.Name, err, strings.TrimSpace(string(out)))
		}
		added = append(added, r)
	}
	c.tb.Cleanup(func() { _ = heal() })
	return heal, nil
}
