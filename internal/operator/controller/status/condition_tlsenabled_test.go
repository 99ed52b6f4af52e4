package status

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// TestTLSEnabledFollowsTheMembers: TLSEnabled and peerUrlTLSEnabled say what the members run,
// read from the StatefulSet (a refused TLS change leaves it as it was), and from the spec only
// before there is one.
func TestTLSEnabledFollowsTheMembers(t *testing.T) {
	tlsEtcd := func() *druidv1alpha1.Etcd {
		tlsCfg := &druidv1alpha1.TLSConfig{}
		tlsCfg.TLSCASecretRef.Name, tlsCfg.ServerTLSSecretRef.Name, tlsCfg.ClientTLSSecretRef.Name = "ca", "server", "client"
		e := observed(appsv1.OnDeleteStatefulSetStrategyType).Etcd
		e.Spec.Replicas = 1
		e.Spec.Etcd.ClientUrlTLS, e.Spec.Etcd.PeerUrlTLS = tlsCfg, &druidv1alpha1.PeerTLSConfig{TLSConfig: *tlsCfg}
		return e
	}
	plainEtcd := func() *druidv1alpha1.Etcd {
		e := tlsEtcd()
		e.Spec.Etcd.ClientUrlTLS, e.Spec.Etcd.PeerUrlTLS = nil, nil
		return e
	}
	stsOf := func(e *druidv1alpha1.Etcd) *appsv1.StatefulSet {
		sts, err := resources.StatefulSet(e, resources.Settings{MemberAgentImage: "img"})
		if err != nil {
			t.Fatal(err)
		}
		return sts
	}
	for _, tt := range []struct {
		name        string
		etcd        *druidv1alpha1.Etcd
		sts         *appsv1.StatefulSet
		want        druidv1alpha1.ConditionStatus
		wantMessage string
		wantPeerTLS bool
	}{
		{"TLS running", tlsEtcd(), stsOf(tlsEtcd()), druidv1alpha1.ConditionTrue, "mutual TLS", true},
		{"plain running", plainEtcd(), stsOf(plainEtcd()), druidv1alpha1.ConditionFalse, "client and peer traffic is unencrypted", false},
		{"plain before the StatefulSet", plainEtcd(), nil, druidv1alpha1.ConditionFalse, "client and peer traffic is unencrypted", false},
		{"TLS asked, plain running (refused change)", tlsEtcd(), stsOf(plainEtcd()), druidv1alpha1.ConditionFalse, "unencrypted", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := Compute(Inputs{Etcd: tt.etcd, StatefulSet: tt.sts, Now: now})
			c := cond(out, druidv1alpha1.ConditionTypeTLSEnabled)
			if c.Status != tt.want || !strings.Contains(c.Message, tt.wantMessage) {
				t.Errorf("TLSEnabled %s %q, want %s containing %q", c.Status, c.Message, tt.want, tt.wantMessage)
			}
			if out.PeerUrlTLSEnabled == nil || *out.PeerUrlTLSEnabled != tt.wantPeerTLS {
				t.Errorf("peerUrlTLSEnabled %v, want %v", out.PeerUrlTLSEnabled, tt.wantPeerTLS)
			}
		})
	}
}
