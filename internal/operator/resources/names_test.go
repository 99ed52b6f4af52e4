package resources

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberpod"
)

func withPrefix(e *druidv1alpha1.Etcd, prefix *string) *druidv1alpha1.Etcd {
	e.Spec.MemberNamePrefix = prefix
	return e
}

// The one way from a pod to its etcd member (and Lease) name and back: <prefix>-<pod> with
// spec.memberNamePrefix, the pod name without; a name of no pod of the Etcd maps to none.
func TestMemberNameOfAndPodOfMember(t *testing.T) {
	for _, tt := range []struct {
		name       string
		prefix     *string
		pod        string
		wantMember string
	}{
		{"no prefix: the pod's name", nil, "etcd-main-0", "etcd-main-0"},
		{"empty prefix is unset", ptr.To(""), "etcd-main-1", "etcd-main-1"},
		{"prefix prepended", ptr.To("p"), "etcd-main-2", "p-etcd-main-2"},
		{"the Etcd's own name as prefix", ptr.To("etcd-main"), "etcd-main-0", "etcd-main-etcd-main-0"},
		{"prefix with dashes", ptr.To("a-b"), "etcd-main-10", "a-b-etcd-main-10"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := withPrefix(testEtcd(3), tt.prefix)
			if got := MemberNameOf(e, tt.pod); got != tt.wantMember {
				t.Fatalf("MemberNameOf(%s) = %s, want %s", tt.pod, got, tt.wantMember)
			}
			if pod, ok := PodOfMember(e, tt.wantMember); !ok || pod != tt.pod {
				t.Fatalf("PodOfMember(%s) = %s, %v; want %s", tt.wantMember, pod, ok, tt.pod)
			}
		})
	}
}

func TestPodOfMemberRefusesOthers(t *testing.T) {
	for _, tt := range []struct {
		name   string
		prefix *string
		member string
	}{
		{"empty name (a learner not started)", nil, ""},
		{"another Etcd's member", nil, "etcd-events-0"},
		{"not an ordinal", nil, "etcd-main-x"},
		{"leading zero", nil, "etcd-main-01"},
		{"prefixed name without a prefix set", nil, "p-etcd-main-0"},
		{"pod name while a prefix is set", ptr.To("p"), "etcd-main-0"},
		{"another prefix", ptr.To("p"), "q-etcd-main-0"},
		{"prefix without the dash", ptr.To("p"), "petcd-main-0"},
		{"prefix alone", ptr.To("p"), "p-"},
		{"prefix and another Etcd's pod", ptr.To("p"), "p-etcd-events-0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if pod, ok := PodOfMember(withPrefix(testEtcd(3), tt.prefix), tt.member); ok {
				t.Fatalf("PodOfMember(%q) = %q, want no pod", tt.member, pod)
			}
		})
	}
}

func TestPodAndLeaseNames(t *testing.T) {
	e := withPrefix(testEtcd(3), ptr.To("p"))
	if got, want := PodNames(e), []string{"etcd-main-0", "etcd-main-1", "etcd-main-2"}; !slices.Equal(got, want) {
		t.Errorf("PodNames = %v, want %v", got, want)
	}
	want := []string{"p-etcd-main-0", "p-etcd-main-1", "p-etcd-main-2"}
	if got := MemberLeaseNames(e); !slices.Equal(got, want) {
		t.Errorf("MemberLeaseNames = %v, want %v", got, want)
	}
	if got := MemberLease(e, "etcd-main-1").Name; got != "p-etcd-main-1" {
		t.Errorf("MemberLease of pod etcd-main-1 named %s", got)
	}
	if got := MemberAgentRole(e).Rules[0].ResourceNames; !slices.Equal(got, want) {
		t.Errorf("the member-agent Role may patch %v, want the member Leases %v", got, want)
	}
}

// With a prefix, Leases are kept by member name: the wanted members', the recorded voters' (etcd
// names) and those of existing pods; a Lease named as a bare pod is no member's and goes.
func TestMemberLeasesUnusedWithPrefix(t *testing.T) {
	e := withPrefix(testEtcd(3), ptr.To("p"))
	e.Status.Voters = []druidv1alpha1.RecordedVoter{{Name: "p-etcd-main-0"}, {Name: "p-etcd-main-1"}, {Name: "p-etcd-main-2"}, {Name: "p-etcd-main-3"}}
	leases := []string{"p-etcd-main-0", "p-etcd-main-1", "p-etcd-main-2", "p-etcd-main-3", "p-etcd-main-4", "p-etcd-main-5", "etcd-main-0"}
	got := MemberLeasesUnused(e, leases, []string{"etcd-main-0", "etcd-main-4"})
	if want := []string{"p-etcd-main-5", "etcd-main-0"}; !slices.Equal(got, want) {
		t.Errorf("unused %v, want %v", got, want)
	}
}

// Each member starts under its etcd member name and renews the Lease of that name; the pod keeps
// its own name (DNS, certificates, the StatefulSet). The initial cluster lists members by their
// etcd names at their pods' DNS names, each with its additional peer URLs.
func TestMemberNamesAndPeerURLsInThePod(t *testing.T) {
	for _, tt := range []struct {
		name       string
		prefix     *string
		extra      []druidv1alpha1.MemberPeerURLs
		wantMember string
		wantFlag   string // "": no additional-peer-urls flag
		wantPeers  string
	}{
		{name: "no prefix, no extras", wantMember: "$(POD_NAME)",
			wantPeers: "etcd-main-0=https://etcd-main-0.etcd-main-peer.shoot.svc:2380,etcd-main-1=https://etcd-main-1.etcd-main-peer.shoot.svc:2380,etcd-main-2=https://etcd-main-2.etcd-main-peer.shoot.svc:2380"},
		{name: "prefix", prefix: ptr.To("p"), wantMember: "p-$(POD_NAME)",
			wantPeers: "p-etcd-main-0=https://etcd-main-0.etcd-main-peer.shoot.svc:2380,p-etcd-main-1=https://etcd-main-1.etcd-main-peer.shoot.svc:2380,p-etcd-main-2=https://etcd-main-2.etcd-main-peer.shoot.svc:2380"},
		{name: "prefix and extras", prefix: ptr.To("p"), wantMember: "p-$(POD_NAME)",
			extra:     []druidv1alpha1.MemberPeerURLs{{MemberName: "p-etcd-main-1", URLs: []string{"https://10.0.0.1:2380", "https://m1.example:2380"}}},
			wantFlag:  "--additional-peer-urls=p-etcd-main-1=https://10.0.0.1:2380,p-etcd-main-1=https://m1.example:2380",
			wantPeers: "p-etcd-main-0=https://etcd-main-0.etcd-main-peer.shoot.svc:2380,p-etcd-main-1=https://etcd-main-1.etcd-main-peer.shoot.svc:2380,p-etcd-main-1=https://10.0.0.1:2380,p-etcd-main-1=https://m1.example:2380,p-etcd-main-2=https://etcd-main-2.etcd-main-peer.shoot.svc:2380"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := withPrefix(testEtcd(3), tt.prefix)
			e.Spec.Etcd.AdditionalAdvertisePeerURLs = tt.extra
			sts, err := StatefulSet(e, Settings{MemberAgentImage: "img"})
			if err != nil {
				t.Fatal(err)
			}
			init := sts.Spec.Template.Spec.InitContainers[0]
			agent := sts.Spec.Template.Spec.Containers[1]
			if init.Name != MemberInitContainerName || agent.Name != MemberAgentContainerName {
				t.Fatalf("containers %s, %s", init.Name, agent.Name)
			}
			for _, want := range []string{"--name=" + tt.wantMember, "--lease=" + tt.wantMember} {
				if !slices.Contains(init.Args, want) {
					t.Errorf("member-init lacks %s: %v", want, init.Args)
				}
			}
			if !slices.Contains(agent.Args, "--lease="+tt.wantMember) {
				t.Errorf("member-agent renews another Lease: %v", agent.Args)
			}
			flag := ""
			for _, a := range init.Args {
				if strings.HasPrefix(a, "--"+memberpod.AdditionalPeerURLsFlag+"=") {
					flag = a
				}
			}
			if flag != tt.wantFlag {
				t.Errorf("additional peer URLs flag %q, want %q", flag, tt.wantFlag)
			}
			if at := slices.Index(init.Args, "--"); flag != "" && slices.Index(init.Args, flag) > at {
				t.Errorf("the flag is after \"--\", among etcd's own: %v", init.Args)
			}
			if got := EtcdEnvironment(e)[EnvInitialCluster]; got != tt.wantPeers {
				t.Errorf("initial cluster\n got %s\nwant %s", got, tt.wantPeers)
			}
			for i := range 3 {
				pod := PodName(e, i)
				urls, ok := RunningAdditionalPeerURLs(e, sts, pod)
				if !ok || !slices.Equal(urls, AdditionalPeerURLs(e, pod)) {
					t.Errorf("%s: running additional peer URLs %v (%v), want %v", pod, urls, ok, AdditionalPeerURLs(e, pod))
				}
			}
		})
	}
}

func TestPeerURLs(t *testing.T) {
	e := withPrefix(testEtcd(3), ptr.To("p"))
	e.Spec.Etcd.AdditionalAdvertisePeerURLs = []druidv1alpha1.MemberPeerURLs{{MemberName: "p-etcd-main-2", URLs: []string{"https://10.0.0.2:2380"}}}
	for i, want := range [][]string{
		{"http://etcd-main-0.etcd-main-peer.shoot.svc:2380"},
		{"http://etcd-main-1.etcd-main-peer.shoot.svc:2380"},
		{"http://etcd-main-2.etcd-main-peer.shoot.svc:2380", "https://10.0.0.2:2380"},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			if got := PeerURLs(e, "http", PodName(e, i)); !slices.Equal(got, want) {
				t.Errorf("PeerURLs = %v, want %v", got, want)
			}
		})
	}
}
