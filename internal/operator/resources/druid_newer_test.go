package resources

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

// The fields etcd-druid added in v0.35-v0.38 that act reach etcd's configuration.
func TestNewerDruidSettingsReachTheEtcdEnvironment(t *testing.T) {
	const gateway, freelist, skipSAN = "ETCD_ENABLE_GRPC_GATEWAY", "ETCD_BACKEND_BBOLT_FREELIST_TYPE", "ETCD_PEER_SKIP_CLIENT_SAN_VERIFICATION"
	for _, tt := range []struct {
		name   string
		mutate func(e *druidv1alpha1.Etcd)
		want   map[string]string // "" means: absent
	}{
		{
			name:   "unset: etcd's defaults, and the SAN check skipped as before",
			mutate: func(*druidv1alpha1.Etcd) {},
			want:   map[string]string{gateway: "", freelist: "", skipSAN: "true"},
		},
		{
			name: "gateway off, array freelist, SAN check on",
			mutate: func(e *druidv1alpha1.Etcd) {
				e.Spec.Etcd.EnableGRPCGateway = ptr.To(false)
				e.Spec.Etcd.BackendBboltFreelistType = ptr.To(druidv1alpha1.BboltFreelistArray)
				e.Spec.Etcd.PeerUrlTLS.SkipClientSANVerification = ptr.To(false)
			},
			want: map[string]string{gateway: "false", freelist: "array", skipSAN: "false"},
		},
		{
			name: "gateway on, map freelist, SAN check skipped",
			mutate: func(e *druidv1alpha1.Etcd) {
				e.Spec.Etcd.EnableGRPCGateway = ptr.To(true)
				e.Spec.Etcd.BackendBboltFreelistType = ptr.To(druidv1alpha1.BboltFreelistMap)
				e.Spec.Etcd.PeerUrlTLS.SkipClientSANVerification = ptr.To(true)
			},
			want: map[string]string{gateway: "true", freelist: "map", skipSAN: "true"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) { checkEnvironment(t, tt.mutate, tt.want) })
	}
}

// Spelling out a default (as etcd-druid manifests often do) must not roll the members; a real
// change must.
func TestNewerDruidSettingsRollOnlyWhenTheyChangeSomething(t *testing.T) {
	base := testEtcd(3)
	before, err := StatefulSet(base, Settings{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		mutate func(e *druidv1alpha1.Etcd)
		rolls  bool
	}{
		{"skipClientSANVerification true, the default", func(e *druidv1alpha1.Etcd) {
			e.Spec.Etcd.PeerUrlTLS.SkipClientSANVerification = ptr.To(true)
		}, false},
		{"skipClientSANVerification false", func(e *druidv1alpha1.Etcd) {
			e.Spec.Etcd.PeerUrlTLS.SkipClientSANVerification = ptr.To(false)
		}, true},
		{"enableGRPCGateway", func(e *druidv1alpha1.Etcd) { e.Spec.Etcd.EnableGRPCGateway = ptr.To(false) }, true},
		{"backendBboltFreelistType", func(e *druidv1alpha1.Etcd) {
			e.Spec.Etcd.BackendBboltFreelistType = ptr.To(druidv1alpha1.BboltFreelistArray)
		}, true},
		{"additionalAdvertisePeerURLs: members advertise them", func(e *druidv1alpha1.Etcd) {
			e.Spec.Etcd.AdditionalAdvertisePeerURLs = []druidv1alpha1.MemberPeerURLs{{MemberName: e.Name + "-0", URLs: []string{"https://10.0.0.1:2380"}}}
		}, true},
		{"additionalAdvertisePeerURLs empty", func(e *druidv1alpha1.Etcd) {
			e.Spec.Etcd.AdditionalAdvertisePeerURLs = []druidv1alpha1.MemberPeerURLs{}
		}, false},
		{"memberNamePrefix empty, which is unset", func(e *druidv1alpha1.Etcd) { e.Spec.MemberNamePrefix = ptr.To("") }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := base.DeepCopy()
			tt.mutate(e)
			after, err := StatefulSet(e, Settings{})
			if err != nil {
				t.Fatal(err)
			}
			if rolled := !equality.Semantic.DeepEqual(before.Spec.Template, after.Spec.Template); rolled != tt.rolls {
				t.Errorf("pod template changed: %v, want %v", rolled, tt.rolls)
			}
		})
	}
}

func TestRefusedDruidSettings(t *testing.T) {
	for _, tt := range []struct {
		name     string
		mutate   func(e *druidv1alpha1.Etcd)
		wantCode string // "" means: valid
		wantText string
	}{
		{name: "none set", mutate: func(*druidv1alpha1.Etcd) {}},
		{name: "empty memberNamePrefix is unset", mutate: func(e *druidv1alpha1.Etcd) { e.Spec.MemberNamePrefix = ptr.To("") }},
		{name: "memberNamePrefix is acted on", mutate: func(e *druidv1alpha1.Etcd) { e.Spec.MemberNamePrefix = ptr.To("main") }},
		{name: "memberNamePrefix equal to the Etcd's name", mutate: func(e *druidv1alpha1.Etcd) { e.Spec.MemberNamePrefix = ptr.To(e.Name) }},
		{name: "additionalAdvertisePeerURLs of a member", mutate: func(e *druidv1alpha1.Etcd) {
			e.Spec.Etcd.AdditionalAdvertisePeerURLs = []druidv1alpha1.MemberPeerURLs{{MemberName: e.Name + "-1", URLs: []string{"https://10.0.0.1:2380", "https://m1.example:2380"}}}
		}},
		{name: "additionalAdvertisePeerURLs of a prefixed member", mutate: func(e *druidv1alpha1.Etcd) {
			e.Spec.MemberNamePrefix = ptr.To("p")
			e.Spec.Etcd.AdditionalAdvertisePeerURLs = []druidv1alpha1.MemberPeerURLs{{MemberName: "p-" + e.Name + "-1", URLs: []string{"https://10.0.0.1:2380"}}}
		}},
		{name: "additionalAdvertisePeerURLs of a member above replicas wait for it", mutate: func(e *druidv1alpha1.Etcd) {
			e.Spec.Etcd.AdditionalAdvertisePeerURLs = []druidv1alpha1.MemberPeerURLs{{MemberName: e.Name + "-4", URLs: []string{"https://10.0.0.1:2380"}}}
		}},
		{name: "additionalAdvertisePeerURLs without the prefix name no member", mutate: func(e *druidv1alpha1.Etcd) {
			e.Spec.MemberNamePrefix = ptr.To("p")
			e.Spec.Etcd.AdditionalAdvertisePeerURLs = []druidv1alpha1.MemberPeerURLs{{MemberName: e.Name + "-1", URLs: []string{"https://10.0.0.1:2380"}}}
		}, wantCode: ErrInvalidAdditionalPeerURLs, wantText: "is no member name of this Etcd"},
		{name: "additionalAdvertisePeerURLs of another Etcd's member", mutate: func(e *druidv1alpha1.Etcd) {
			e.Spec.Etcd.AdditionalAdvertisePeerURLs = []druidv1alpha1.MemberPeerURLs{{MemberName: "other-1", URLs: []string{"https://10.0.0.1:2380"}}}
		}, wantCode: ErrInvalidAdditionalPeerURLs, wantText: `"other-1"`},
		{name: "additionalAdvertisePeerURLs naming a member twice", mutate: func(e *druidv1alpha1.Etcd) {
			e.Spec.Etcd.AdditionalAdvertisePeerURLs = []druidv1alpha1.MemberPeerURLs{{MemberName: e.Name + "-1", URLs: []string{"https://10.0.0.1:2380"}}, {MemberName: e.Name + "-1", URLs: []string{"https://10.0.0.2:2380"}}}
		}, wantCode: ErrInvalidAdditionalPeerURLs, wantText: "listed twice"},
		{name: "additionalAdvertisePeerURLs giving two members one URL", mutate: func(e *druidv1alpha1.Etcd) {
			e.Spec.Etcd.AdditionalAdvertisePeerURLs = []druidv1alpha1.MemberPeerURLs{{MemberName: e.Name + "-1", URLs: []string{"https://10.0.0.1:2380"}}, {MemberName: e.Name + "-2", URLs: []string{"https://10.0.0.1:2380"}}}
		}, wantCode: ErrInvalidAdditionalPeerURLs, wantText: "two members advertise"},
		{name: "additionalAdvertisePeerURLs without a port", mutate: func(e *druidv1alpha1.Etcd) {
			e.Spec.Etcd.AdditionalAdvertisePeerURLs = []druidv1alpha1.MemberPeerURLs{{MemberName: e.Name + "-1", URLs: []string{"https://10.0.0.1"}}}
		}, wantCode: ErrInvalidAdditionalPeerURLs, wantText: "host:port"},
		{name: "additionalAdvertisePeerURLs with a comma", mutate: func(e *druidv1alpha1.Etcd) {
			e.Spec.Etcd.AdditionalAdvertisePeerURLs = []druidv1alpha1.MemberPeerURLs{{MemberName: e.Name + "-1", URLs: []string{"https://a:2380,b"}}}
		}, wantCode: ErrInvalidAdditionalPeerURLs, wantText: "comma"},
		{name: "additionalAdvertisePeerURLs with another scheme", mutate: func(e *druidv1alpha1.Etcd) {
			e.Spec.Etcd.AdditionalAdvertisePeerURLs = []druidv1alpha1.MemberPeerURLs{{MemberName: e.Name + "-1", URLs: []string{"unix://a:2380"}}}
		}, wantCode: ErrInvalidAdditionalPeerURLs, wantText: "http"},
		{name: "additionalAdvertisePeerURLs with a path", mutate: func(e *druidv1alpha1.Etcd) {
			e.Spec.Etcd.AdditionalAdvertisePeerURLs = []druidv1alpha1.MemberPeerURLs{{MemberName: e.Name + "-1", URLs: []string{"https://a:2380/x"}}}
		}, wantCode: ErrInvalidAdditionalPeerURLs, wantText: "path"},
		{
			name: "bootstrapWithExistingCluster is accepted",
			mutate: func(e *druidv1alpha1.Etcd) {
				e.Spec.Etcd.BootstrapWithExistingCluster = &druidv1alpha1.BootstrapWithExistingCluster{
					Members:         []druidv1alpha1.BootstrapExistingMember{{Name: "src-0", PeerURLs: []string{"https://src-0:2380"}}},
					ClientEndpoints: []string{"https://src-client:2379"},
				}
			},
			// Accepted: the members wait with a condition (ExistingClusterNotJoined).
		},
		{
			name: "etcd-wrapper image",
			mutate: func(e *druidv1alpha1.Etcd) {
				e.Spec.Etcd.Image = ptr.To("europe-docker.pkg.dev/gardener-project/public/gardener/etcd-wrapper:v0.6.1")
			},
			wantCode: ErrEtcdWrapperImage, wantText: DefaultEtcdImage,
		},
		{name: "plain etcd image", mutate: func(e *druidv1alpha1.Etcd) { e.Spec.Etcd.Image = ptr.To("quay.io/coreos/etcd:v3.7.3") }},
		{
			name: "unknown freelist type",
			mutate: func(e *druidv1alpha1.Etcd) {
				e.Spec.Etcd.BackendBboltFreelistType = ptr.To(druidv1alpha1.BboltFreelistType("hash"))
			},
			wantCode: ErrInvalidFreelistType, wantText: "spec.etcd.backendBboltFreelistType",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := testEtcd(3)
			tt.mutate(e)
			problems := ValidateSpec(e)
			if tt.wantCode == "" {
				if len(problems) > 0 {
					t.Fatalf("want no problems, got %v", problems)
				}
				return
			}
			if len(problems) != 1 || problems[0].Code != tt.wantCode || !strings.Contains(problems[0].Message, tt.wantText) {
				t.Fatalf("want one %s naming %q, got %v", tt.wantCode, tt.wantText, problems)
			}
		})
	}
}

func TestIsEtcdWrapperImage(t *testing.T) {
	for _, tt := range []struct {
		ref  string
		want bool
	}{
		{"europe-docker.pkg.dev/gardener-project/public/gardener/etcd-wrapper:v0.6.1", true},
		{"europe-docker.pkg.dev/gardener-project/public/gardener/etcd-wrapper@sha256:0123abcd", true},
		{"europe-docker.pkg.dev/gardener-project/public/gardener/etcd-wrapper:v0.6.1@sha256:0123abcd", true},
		{"registry.local:5000/mirror/gardener-etcd-wrapper", true},
		{"etcd-wrapper", true},
		{"quay.io/coreos/etcd:v3.6.8", false},
		{"europe-docker.pkg.dev/gardener-project/public/gardener/etcd:v3.4.34", false},
		{"registry.local:5000/etcd", false},
		// Only the repository counts, not a tag that mentions the wrapper.
		{"registry.local:5000/etcd:etcd-wrapper-compatible", false},
	} {
		t.Run(tt.ref, func(t *testing.T) {
			if got := IsEtcdWrapperImage(tt.ref); got != tt.want {
				t.Errorf("IsEtcdWrapperImage(%q) = %v, want %v", tt.ref, got, tt.want)
			}
		})
	}
}
