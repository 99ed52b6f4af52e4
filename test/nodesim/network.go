package nodesim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// netnsDir is where `ip netns` keeps its namespace handles.
const netnsDir = "/run/netns"

// maxNetworkNameLen keeps "<name>v<slot>" (the host side of a pod's veth) within
// the kernel's 15-character interface name limit for slots up to 99999.
const maxNetworkNameLen = 9

// Network is the host bridge that every pod of one simulator is plugged into.
// Its gateway address is where host processes (kube-apiserver, the operator,
// tests) are reachable from inside pods.
type Network struct {
	name    string
	index   int
	gateway net.IP
	subnet  *net.IPNet

	mu       sync.Mutex
	lastHost int          // round-robin allocation like CNI host-local: a freed IP is reused last
	usedHost map[int]bool // host part (2..254) → allocated
	slot     int
	rules    [][]string // iptables rules we added, removed on Teardown
	closed   bool
}

// SetupNetwork creates bridge `name` with gateway 10.213.<subnetIndex>.1/24.
// Call it before starting the control plane, so kube-apiserver can bind to
// the gateway IP. It fails when the bridge or the subnet is already in use.
func SetupNetwork(name string, subnetIndex int) (*Network, error) {
	if name == "" || len(name) > maxNetworkNameLen {
		return nil, fmt.Errorf("network name %q must have 1 to %d characters", name, maxNetworkNameLen)
	}
	if subnetIndex < 0 || subnetIndex > 255 {
		return nil, fmt.Errorf("subnet index %d out of range 0..255", subnetIndex)
	}
	_, subnet, _ := net.ParseCIDR(fmt.Sprintf("10.213.%d.0/24", subnetIndex))
	gateway := net.IPv4(10, 213, byte(subnetIndex), 1).To4()
	if inUse, err := subnetInUse(subnet); err != nil {
		return nil, err
	} else if inUse {
		return nil, fmt.Errorf("subnet %s: %w", subnet, errNetworkInUse)
	}
	// Creating the link is atomic: of two simulators racing for one name only one wins.
	if err := run("ip", "link", "add", name, "type", "bridge"); err != nil {
		if strings.Contains(err.Error(), "File exists") {
			return nil, fmt.Errorf("bridge %s: %w", name, errNetworkInUse)
		}
		return nil, fmt.Errorf("creating bridge %s: %w", name, err)
	}
	n := &Network{name: name, index: subnetIndex, gateway: gateway, subnet: subnet, lastHost: 1, usedHost: map[int]bool{}}
	if err := writeOwner(name, os.Getpid()); err != nil {
		_ = n.Teardown()
		return nil, err
	}
	steps := [][]string{
		{"ip", "addr", "add", gateway.String() + "/24", "dev", name},
		{"ip", "link", "set", name, "up"},
	}
	for _, s := range steps {
		if err := run(s[0], s[1:]...); err != nil {
			_ = n.Teardown()
			return nil, fmt.Errorf("setting up bridge %s: %w", name, err)
		}
	}
	// bridge-nf-call-iptables sends bridged pod-to-pod traffic through FORWARD;
	// accept it explicitly in case another tool set a DROP policy.
	if err := n.addRule("FORWARD", "-i", name, "-o", name, "-j", "ACCEPT"); err != nil {
		_ = n.Teardown()
		return nil, err
	}
	return n, nil
}

var errNetworkInUse = errors.New("already in use")

// SetupFreeNetwork tries subnet indexes from 0 upwards and returns the first
// network it could claim, named prefix+index. Parallel test binaries each get
// their own bridge and subnet this way.
func SetupFreeNetwork(prefix string) (*Network, error) {
	for i := 0; i < 256; i++ {
		name := fmt.Sprintf("%s%d", prefix, i)
		n, err := SetupNetwork(name, i)
		if errors.Is(err, errNetworkInUse) && reclaimStale(name, i) {
			n, err = SetupNetwork(name, i)
		}
		if err == nil {
			return n, nil
		}
		if !errors.Is(err, errNetworkInUse) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("no free network with prefix %q", prefix)
}

// Name is the bridge's interface name.
func (n *Network) Name() string { return n.name }

// GatewayIP is the host's address on the bridge; bind kube-apiserver here.
func (n *Network) GatewayIP() string { return n.gateway.String() }

// Subnet is the pods' subnet in CIDR notation.
func (n *Network) Subnet() string { return n.subnet.String() }

func (n *Network) addRule(chain string, spec ...string) error {
	args := append([]string{"-w", "-I", chain}, spec...)
	if err := run("iptables", args...); err != nil {
		return fmt.Errorf("adding iptables rule %v: %w", spec, err)
	}
	n.mu.Lock()
	n.rules = append(n.rules, append([]string{chain}, spec...))
	n.mu.Unlock()
	return nil
}

// Teardown removes every pod namespace of this network, the bridge and our
// iptables rules. Processes still inside a namespace keep it alive; stop them first.
func (n *Network) Teardown() error {
	n.mu.Lock()
	n.closed = true
	rules := n.rules
	n.rules = nil
	n.mu.Unlock()
	var errs []error
	entries, _ := os.ReadDir(netnsDir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), n.name+"-") {
			if err := run("ip", "netns", "del", e.Name()); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, r := range rules {
		args := append([]string{"-w", "-D"}, r...)
		if err := run("iptables", args...); err != nil {
			errs = append(errs, err)
		}
	}
	if err := run("ip", "link", "del", n.name); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
		errs = append(errs, err)
	}
	_ = os.Remove(ownerFile(n.name))
	return errors.Join(errs...)
}

// podNetwork is one pod's sandbox: a network namespace with eth0 on the bridge.
type podNetwork struct {
	netns    string
	hostVeth string
	ip       net.IP
	host     int

	mu sync.Mutex
	// extra are the rules apply added, for heal (partitionRules included, harmlessly).
	extra [][]string
	// delay holds the packets of a slow link (slowLink) until heal.
	delay *packetDelay
}

func (p *podNetwork) nsPath() string { return netnsDir + "/" + p.netns }

// addPod creates a namespace and plugs it into the bridge with a fresh IP.
func (n *Network) addPod() (*podNetwork, error) {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil, errors.New("network is torn down")
	}
	host := 0
	for i := 1; i <= 253; i++ {
		h := (n.lastHost-2+i)%253 + 2
		if !n.usedHost[h] {
			host = h
			break
		}
	}
	if host == 0 {
		n.mu.Unlock()
		return nil, fmt.Errorf("subnet %s exhausted", n.subnet)
	}
	n.usedHost[host] = true
	n.lastHost = host
	n.slot++
	slot := n.slot
	n.mu.Unlock()

	ip := net.IPv4(10, 213, byte(n.index), byte(host)).To4()
	p := &podNetwork{
		netns:    fmt.Sprintf("%s-%d", n.name, slot),
		hostVeth: fmt.Sprintf("%sv%d", n.name, slot),
		ip:       ip,
		host:     host,
	}
	peer := fmt.Sprintf("%sp%d", n.name, slot)
	steps := [][]string{
		{"ip", "netns", "add", p.netns},
		{"ip", "link", "add", p.hostVeth, "type", "veth", "peer", "name", peer, "netns", p.netns},
		{"ip", "link", "set", p.hostVeth, "master", n.name, "up"},
		{"ip", "-n", p.netns, "link", "set", peer, "name", "eth0"},
		{"ip", "-n", p.netns, "addr", "add", ip.String() + "/24", "dev", "eth0"},
		{"ip", "-n", p.netns, "link", "set", "eth0", "up"},
		{"ip", "-n", p.netns, "link", "set", "lo", "up"},
		{"ip", "-n", p.netns, "route", "add", "default", "via", n.gateway.String()},
	}
	for _, s := range steps {
		if err := run(s[0], s[1:]...); err != nil {
			_ = n.removePod(p)
			return nil, fmt.Errorf("creating pod network %s: %w", p.netns, err)
		}
	}
	return p, nil
}

// removePod deletes the namespace (which takes the veth pair with it) and frees the IP.
func (n *Network) removePod(p *podNetwork) error {
	p.mu.Lock()
	if p.delay != nil {
		p.delay.close() // its socket would keep the namespace alive
		p.delay = nil
	}
	p.mu.Unlock()
	var err error
	if _, statErr := os.Stat(p.nsPath()); statErr == nil {
		err = run("ip", "netns", "del", p.netns)
	}
	if e := run("ip", "link", "del", p.hostVeth); e != nil && !strings.Contains(e.Error(), "Cannot find device") {
		err = errors.Join(err, e)
	}
	n.mu.Lock()
	delete(n.usedHost, p.host)
	n.mu.Unlock()
	return err
}

// partitionRules drop everything on eth0 inside the pod's namespace, in both
// directions; loopback keeps working, as it would for a cut cable.
var partitionRules = [][]string{
	{"INPUT", "-i", "eth0", "-j", "DROP"},
	{"OUTPUT", "-o", "eth0", "-j", "DROP"},
}

// peerRules drop what goes between the pod and each of ips.
func peerRules(ips []string) [][]string {
	var rules [][]string
	for _, ip := range ips {
		rules = append(rules, []string{"INPUT", "-i", "eth0", "-s", ip, "-j", "DROP"}, []string{"OUTPUT", "-o", "eth0", "-d", ip, "-j", "DROP"})
	}
	return rules
}

// muteRules drop what reaches the pod's port from outside and what the pod sends from it.
func muteRules(port int) [][]string {
	return [][]string{
		{"INPUT", "-i", "eth0", "-p", "tcp", "--dport", fmt.Sprint(port), "-j", "DROP"},
		{"OUTPUT", "-o", "eth0", "-p", "tcp", "--sport", fmt.Sprint(port), "-j", "DROP"},
	}
}

func (p *podNetwork) partition() error { return p.apply(partitionRules) }

// apply inserts the rules not yet in place; heal removes them again.
func (p *podNetwork) apply(rules [][]string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range rules {
		check := append([]string{"netns", "exec", p.netns, "iptables", "-w", "-C"}, r...)
		if run("ip", check...) == nil {
			continue
		}
		add := append([]string{"netns", "exec", p.netns, "iptables", "-w", "-I"}, r...)
		if err := run("ip", add...); err != nil {
			return fmt.Errorf("adding rule %v in %s: %w", r, p.netns, err)
		}
		p.extra = append(p.extra, r)
	}
	return nil
}

func (p *podNetwork) heal() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range append(partitionRules, p.extra...) {
		for {
			del := append([]string{"netns", "exec", p.netns, "iptables", "-w", "-D"}, r...)
			if run("ip", del...) != nil {
				break
			}
		}
	}
	p.extra = nil
	if p.delay != nil {
		p.delay.close() // after the rules are gone: what it still holds is delivered
		p.delay = nil
	}
	return nil
}

// slowLink delays the packets between the pod and each of ips by delay, both ways. A second
// call adds peers; the delay stays the first one's until heal.
func (p *podNetwork) slowLink(delay time.Duration, ips []string) error {
	p.mu.Lock()
	if p.delay == nil {
		d, err := startPacketDelay(p.nsPath(), delay)
		if err != nil {
			p.mu.Unlock()
			return fmt.Errorf("slowing the link of %s: %w", p.netns, err)
		}
		p.delay = d
	}
	p.mu.Unlock()
	return p.apply(delayRules(ips))
}

// subnetInUse reports whether any host interface already has an address in subnet.
func subnetInUse(subnet *net.IPNet) (bool, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false, fmt.Errorf("listing interface addresses: %w", err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && subnet.Contains(ipn.IP) {
			return true, nil
		}
	}
	return false, nil
}

// run executes a short administrative command and folds its output into the error.
func run(name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// AttachNetwork adopts an existing bridge made by SetupNetwork in another
// process (`nodesim net up`). Only one simulator may use a network: IPs are
// allocated in memory.
func AttachNetwork(name string, subnetIndex int) (*Network, error) {
	gateway := net.IPv4(10, 213, byte(subnetIndex), 1).To4()
	iface, err := net.InterfaceByName(name)
	if err != nil {
		return nil, fmt.Errorf("bridge %s: %w", name, err)
	}
	addrs, err := iface.Addrs()
	if err != nil {
		return nil, fmt.Errorf("bridge %s addresses: %w", name, err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.Equal(gateway) {
			_, subnet, _ := net.ParseCIDR(fmt.Sprintf("10.213.%d.0/24", subnetIndex))
			n := &Network{name: name, index: subnetIndex, gateway: gateway, subnet: subnet, lastHost: 1, usedHost: map[int]bool{}}
			n.rules = [][]string{{"FORWARD", "-i", name, "-o", name, "-j", "ACCEPT"}}
			return n, nil
		}
	}
	return nil, fmt.Errorf("bridge %s does not have gateway %s", name, gateway)
}

// ownerDir records which process created each bridge, so a network left
// behind by a killed test binary (whose cleanups never ran) can be reclaimed.
const ownerDir = "/run/nodesim"

func ownerFile(name string) string { return filepath.Join(ownerDir, name+".owner") }

func writeOwner(name string, pid int) error {
	if err := os.MkdirAll(ownerDir, 0o755); err != nil {
		return fmt.Errorf("recording network owner: %w", err)
	}
	if err := os.WriteFile(ownerFile(name), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		return fmt.Errorf("recording network owner: %w", err)
	}
	return nil
}

// Persist marks the network as owned by nobody in particular (`nodesim net
// up`): it is never reclaimed as stale, only removed by Teardown.
func (n *Network) Persist() error { return writeOwner(n.name, 0) }

// reclaimStale tears down bridge name if the process that created it is gone.
func reclaimStale(name string, subnetIndex int) bool {
	b, err := os.ReadFile(ownerFile(name))
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err == nil || !errors.Is(err, syscall.ESRCH) {
		return false
	}
	stale, err := AttachNetwork(name, subnetIndex)
	if err != nil {
		return false
	}
	_ = stale.Teardown() // the FORWARD rule may be gone already; the bridge is what matters
	_, err = net.InterfaceByName(name)
	return err != nil
}
