package nodesim

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "1", "POD_NAME": "etcd-0"}
	tests := []struct{ in, want string }{
		{"$(A)", "1"},
		{"--name=$(POD_NAME)", "--name=etcd-0"},
		{"$(MISSING)", "$(MISSING)"},
		{"$$(A)", "$(A)"},
		{"$$", "$"},
		{"cost $5", "cost $5"},
		{"$(A", "$(A"},
		{"$(A)$(A)-$(POD_NAME)", "11-etcd-0"},
		{"trailing $", "trailing $"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			if got := expand(tc.in, vars); got != tc.want {
				t.Errorf("expand(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestImageResolution(t *testing.T) {
	bin := t.TempDir()
	for _, name := range []string{"etcd-3.6.8", "etcdctl-3.6.8", "etcd-3.7.3", "etcd-conductor"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r := imageResolver{binDir: bin, extra: map[string]string{"example.com/helper": "/opt/helper", "example.com/pinned:v2": "/opt/pinned"}}
	tests := []struct {
		image, wantEntrypoint string
		wantErr               bool
	}{
		{"quay.io/coreos/etcd:v3.6.8", "etcd-3.6.8", false},
		{"registry.k8s.io/etcd:3.6.8-0", "etcd-3.6.8", false},
		{"gcr.io/etcd-development/etcd:v3.7.3", "etcd-3.7.3", false},
		{"quay.io/coreos/etcd:v3.6.8@sha256:abcd", "etcd-3.6.8", false},
		{"quay.io/coreos/etcd:v3.5.0", "", true},
		{"quay.io/coreos/etcd", "", true},
		{"localhost:5000/etcd-conductor:dev", "etcd-conductor", false},
		{"ghcr.io/x/etcd-conductor", "etcd-conductor", false},
		{"example.com/helper:any", "/opt/helper", false},
		{"example.com/pinned:v2", "/opt/pinned", false},
		{"example.com/pinned:v3", "", true},
		{"busybox", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.image, func(t *testing.T) {
			got, err := r.resolve(tc.image)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("resolve(%q) = %+v, want an error", tc.image, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if filepath.Base(got.entrypoint) != filepath.Base(tc.wantEntrypoint) {
				t.Errorf("entrypoint %s, want %s", got.entrypoint, tc.wantEntrypoint)
			}
		})
	}

	etcd, err := r.resolve("quay.io/coreos/etcd:v3.6.8")
	if err != nil {
		t.Fatal(err)
	}
	commands := []struct {
		name     string
		command  []string
		wantBin  string
		wantRest []string
	}{
		{"empty command runs the entrypoint", nil, "etcd-3.6.8", nil},
		{"image path is replaced", []string{"/usr/local/bin/etcd", "--x"}, "etcd-3.6.8", []string{"--x"}},
		{"other tool by base name", []string{"/usr/local/bin/etcdctl", "get"}, "etcdctl-3.6.8", []string{"get"}},
		{"unknown path runs the entrypoint", []string{"/entry.sh"}, "etcd-3.6.8", []string{}},
		{"shell runs from the host", []string{"/bin/sh", "-c", "etcdctl"}, "sh", []string{"-c", "etcdctl"}},
	}
	for _, tc := range commands {
		t.Run(tc.name, func(t *testing.T) {
			bin, rest := etcd.commandBinary(tc.command)
			if filepath.Base(bin) != tc.wantBin || strings.Join(rest, " ") != strings.Join(tc.wantRest, " ") {
				t.Errorf("commandBinary(%q) = %s %q, want %s %q", tc.command, bin, rest, tc.wantBin, tc.wantRest)
			}
		})
	}
}

func TestPhase(t *testing.T) {
	running := corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	creating := corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
	crashLoop := corev1.ContainerStatus{
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}},
	}
	exited := func(code int32) corev1.ContainerStatus {
		return corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}}
	}
	tests := []struct {
		name   string
		policy corev1.RestartPolicy
		st     []corev1.ContainerStatus
		want   corev1.PodPhase
	}{
		{"all running", corev1.RestartPolicyAlways, []corev1.ContainerStatus{running, running}, corev1.PodRunning},
		{"one still creating", corev1.RestartPolicyAlways, []corev1.ContainerStatus{running, creating}, corev1.PodPending},
		{"crash looping counts as running", corev1.RestartPolicyAlways, []corev1.ContainerStatus{crashLoop}, corev1.PodRunning},
		{"never: all succeeded", corev1.RestartPolicyNever, []corev1.ContainerStatus{exited(0)}, corev1.PodSucceeded},
		{"never: one failed", corev1.RestartPolicyNever, []corev1.ContainerStatus{exited(0), exited(2)}, corev1.PodFailed},
		{"on failure: failed is still running", corev1.RestartPolicyOnFailure, []corev1.ContainerStatus{exited(2)}, corev1.PodRunning},
		{"on failure: succeeded", corev1.RestartPolicyOnFailure, []corev1.ContainerStatus{exited(0)}, corev1.PodSucceeded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := phase(tc.policy, tc.st); got != tc.want {
				t.Errorf("phase = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	c := &container{w: &podWorker{s: &Simulator{o: Options{BackoffBase: 10 * time.Second, BackoffMax: 5 * time.Minute}}}}
	want := []time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 5 * time.Minute, 5 * time.Minute}
	for i, w := range want {
		if got := c.backoff(i + 1); got != w {
			t.Errorf("backoff after %d failures = %s, want %s", i+1, got, w)
		}
	}
}

func TestDNSRecords(t *testing.T) {
	svc := func(name string, headless, publishNotReady bool) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "etcd"}, PublishNotReadyAddresses: publishNotReady, ClusterIP: "10.0.0.9",
		}}
		if headless {
			s.Spec.ClusterIP = corev1.ClusterIPNone
		}
		return s
	}
	pod := func(host, ip string, ready bool) dnsPod {
		return dnsPod{namespace: "ns", hostname: host, subdomain: "peer", labels: map[string]string{"app": "etcd"}, ip: ip, ready: ready}
	}
	tests := []struct {
		name     string
		services []*corev1.Service
		pods     []dnsPod
		lookup   string
		want     string
	}{
		{"member of a publishing headless service", []*corev1.Service{svc("peer", true, true)}, []dnsPod{pod("etcd-0", "10.1.0.2", false)}, "etcd-0.peer.ns.svc", "10.1.0.2"},
		{"not ready and not published", []*corev1.Service{svc("peer", true, false)}, []dnsPod{pod("etcd-0", "10.1.0.2", false)}, "etcd-0.peer.ns.svc", ""},
		{"no service of the subdomain's name", []*corev1.Service{svc("other", true, true)}, []dnsPod{pod("etcd-0", "10.1.0.2", true)}, "etcd-0.peer.ns.svc", ""},
		{"cluster IP service lists ready pods", []*corev1.Service{svc("client", false, false)}, []dnsPod{pod("etcd-0", "10.1.0.2", true), pod("etcd-1", "10.1.0.3", false)}, "client.ns.svc.cluster.local", "10.1.0.2"},
		{"cluster IP service gives no pod names", []*corev1.Service{svc("peer", false, true)}, []dnsPod{pod("etcd-0", "10.1.0.2", true)}, "etcd-0.peer.ns.svc", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := newDNS(func() []*corev1.Service { return tc.services })
			for i, p := range tc.pods {
				d.set(types.UID(strings.Repeat("u", i+1)), p)
			}
			if got := strings.Join(d.resolve(tc.lookup), ","); got != tc.want {
				t.Errorf("resolve(%s) = %q, want %q", tc.lookup, got, tc.want)
			}
		})
	}

	hosts := hostsContent(pod("etcd-1", "10.1.0.3", true), map[string][]string{"etcd-0.peer.ns.svc.cluster.local": {"10.1.0.2"}})
	for _, want := range []string{
		"10.1.0.3\tetcd-1.peer.ns.svc.cluster.local\tetcd-1\n",
		"10.1.0.2\tetcd-0.peer.ns.svc.cluster.local etcd-0.peer.ns.svc etcd-0.peer.ns etcd-0.peer\n",
	} {
		if !strings.Contains(hosts, want) {
			t.Errorf("hosts file lacks %q:\n%s", want, hosts)
		}
	}
}

func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return "<" + err.Error() + ">"
		}
		return string(b)
	}
	if err := writeAtomic(dir, map[string]volumeFile{"a": {data: []byte("1"), mode: 0o640}, "sub/b": {data: []byte("2"), mode: 0o644}}, -1); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	if read("a") != "1" || read("sub/b") != "2" || fi.Mode().Perm() != 0o640 {
		t.Fatalf("first write: a=%q sub/b=%q mode=%v", read("a"), read("sub/b"), fi.Mode().Perm())
	}
	dirInfo, _ := os.Stat(dir)
	before, _ := os.Readlink(filepath.Join(dir, "..data"))
	if err := writeAtomic(dir, map[string]volumeFile{"a": {data: []byte("1"), mode: 0o640}, "sub/b": {data: []byte("2"), mode: 0o644}}, -1); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.Readlink(filepath.Join(dir, "..data")); after != before {
		t.Errorf("unchanged content was rewritten (%s → %s)", before, after)
	}
	if err := writeAtomic(dir, map[string]volumeFile{"a": {data: []byte("new"), mode: 0o640}}, -1); err != nil {
		t.Fatal(err)
	}
	if read("a") != "new" {
		t.Errorf("a after update = %q", read("a"))
	}
	if _, err := os.Lstat(filepath.Join(dir, "sub")); !os.IsNotExist(err) {
		t.Errorf("removed key still visible: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	var timestamped int
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") && e.Name() != "..data" {
			timestamped++
		}
	}
	if timestamped != 1 {
		t.Errorf("%d data directories left, want 1", timestamped)
	}
	if after, _ := os.Stat(dir); !os.SameFile(dirInfo, after) {
		t.Errorf("volume directory was replaced; a bind mount of it would go stale")
	}
}

func TestRewriteInPlaceKeepsInode(t *testing.T) {
	p := filepath.Join(t.TempDir(), "hosts")
	if err := rewriteInPlace(p, []byte("a long first version\n")); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(p)
	if err := rewriteInPlace(p, []byte("short\n")); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(p)
	got, _ := os.ReadFile(p)
	if !os.SameFile(before, after) || string(got) != "short\n" {
		t.Errorf("same inode %v, content %q", os.SameFile(before, after), got)
	}
}

func TestDNSAnswer(t *testing.T) {
	d := newDNS(func() []*corev1.Service {
		return []*corev1.Service{{ObjectMeta: metav1.ObjectMeta{Name: "peer", Namespace: "ns"}, Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone, PublishNotReadyAddresses: true, Selector: map[string]string{"app": "etcd"},
		}}}
	})
	d.set("u1", dnsPod{namespace: "ns", hostname: "etcd-0", subdomain: "peer", labels: map[string]string{"app": "etcd"}, ip: "10.1.0.2"})
	tests := []struct {
		name      string
		qname     string
		qtype     dnsmessage.Type
		wantRCode dnsmessage.RCode
		wantA     []string
	}{
		{"known A", "etcd-0.peer.ns.svc.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, []string{"10.1.0.2"}},
		{"case-insensitive", "ETCD-0.peer.ns.svc.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, []string{"10.1.0.2"}},
		{"known name, AAAA: no data", "etcd-0.peer.ns.svc.cluster.local.", dnsmessage.TypeAAAA, dnsmessage.RCodeSuccess, nil},
		{"search-path miss", "etcd-0.peer.ns.svc.ns.svc.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeNameError, nil},
		{"outside the cluster", "example.com.", dnsmessage.TypeA, dnsmessage.RCodeNameError, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 42, RecursionDesired: true})
			_ = b.StartQuestions()
			_ = b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(tc.qname), Type: tc.qtype, Class: dnsmessage.ClassINET})
			query, err := b.Finish()
			if err != nil {
				t.Fatal(err)
			}
			resp, err := d.answer(query)
			if err != nil {
				t.Fatal(err)
			}
			var m dnsmessage.Message
			if err := m.Unpack(resp); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range m.Answers {
				if r, ok := a.Body.(*dnsmessage.AResource); ok {
					got = append(got, net.IP(r.A[:]).String())
				}
			}
			if m.Header.ID != 42 || m.Header.RCode != tc.wantRCode || strings.Join(got, ",") != strings.Join(tc.wantA, ",") {
				t.Errorf("id %d rcode %v answers %v; want rcode %v answers %v", m.Header.ID, m.Header.RCode, got, tc.wantRCode, tc.wantA)
			}
		})
	}
}

func TestResolvConf(t *testing.T) {
	ndots := "2"
	tests := []struct {
		name   string
		spec   corev1.PodSpec
		want   string
		wantOK bool
	}{
		{"cluster first", corev1.PodSpec{}, "nameserver 10.213.0.1\nsearch ns.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n", true},
		{"default uses the host's", corev1.PodSpec{DNSPolicy: corev1.DNSDefault}, "", false},
		{"none with dnsConfig", corev1.PodSpec{DNSPolicy: corev1.DNSNone, DNSConfig: &corev1.PodDNSConfig{
			Nameservers: []string{"10.0.0.10"}, Searches: []string{"example"}, Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: &ndots}},
		}}, "nameserver 10.0.0.10\nsearch example\noptions ndots:2\n", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}, Spec: tc.spec}
			got, ok := resolvConf(pod, "10.213.0.1")
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("resolvConf = %q, %v; want %q, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestSetupFreeNetworkReclaimsNetworkOfDeadProcess(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	first, err := SetupFreeNetwork("ecrc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = first.Teardown() })
	if _, err := first.addPod(); err != nil {
		t.Fatal(err)
	}
	// Pretend the creator was a test binary that got killed.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	if err := writeOwner(first.Name(), dead.Process.Pid); err != nil {
		t.Fatal(err)
	}
	second, err := SetupFreeNetwork("ecrc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = second.Teardown() })
	if second.Name() != first.Name() {
		t.Errorf("got %s, want the stale %s reclaimed", second.Name(), first.Name())
	}
	entries, _ := os.ReadDir(netnsDir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), first.Name()+"-") {
			t.Errorf("stale pod namespace %s survived", e.Name())
		}
	}

	// A live owner's network is left alone.
	third, err := SetupFreeNetwork("ecrc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = third.Teardown() })
	if third.Name() == second.Name() {
		t.Errorf("a live network was reclaimed")
	}
}

func TestSecurityFor(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	yes, no := true, false
	pod := func(sc *corev1.PodSecurityContext) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"}, Spec: corev1.PodSpec{SecurityContext: sc}}
	}
	tests := []struct {
		name        string
		pod         *corev1.Pod
		container   *corev1.SecurityContext
		wantErr     string
		wantSetpriv string
	}{
		{name: "no security context keeps root as it is", pod: pod(nil)},
		{name: "runAsNonRoot without a user", pod: pod(&corev1.PodSecurityContext{RunAsNonRoot: &yes}),
			wantErr: `container has runAsNonRoot and image will run as root (pod: "p_ns(u)", container: c)`},
		{name: "runAsNonRoot with user 0", pod: pod(&corev1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: i64(0)}),
			wantErr: "container's runAsUser breaks non-root policy"},
		{name: "container overrides the pod", pod: pod(&corev1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: i64(0), RunAsGroup: i64(5), FSGroup: i64(7), SupplementalGroups: []int64{9, 7}}),
			container:   &corev1.SecurityContext{RunAsUser: i64(1000), AllowPrivilegeEscalation: &no, Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"NET_RAW", "CAP_SYS_ADMIN"}}},
			wantSetpriv: "setpriv --pdeathsig keep --reuid=1000 --regid=5 --groups=7,9 --no-new-privs --inh-caps=-net_raw,-sys_admin --bounding-set=-net_raw,-sys_admin --"},
		{name: "container runAsNonRoot false lifts the pod's", pod: pod(&corev1.PodSecurityContext{RunAsNonRoot: &yes}),
			container: &corev1.SecurityContext{RunAsNonRoot: &no}},
		{name: "drop ALL", pod: pod(&corev1.PodSecurityContext{RunAsUser: i64(65532)}),
			container:   &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			wantSetpriv: "setpriv --pdeathsig keep --reuid=65532 --regid=0 --clear-groups --inh-caps=-all --bounding-set=-all --"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sec, err := securityFor(tc.pod, &corev1.Container{Name: "c", SecurityContext: tc.container}, imageIdentity{})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(sec.setprivArgs("setpriv"), " "); got != tc.wantSetpriv {
				t.Errorf("setpriv = %q, want %q", got, tc.wantSetpriv)
			}
		})
	}
}
