package memberaccess

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

func TestTargets(t *testing.T) {
	withIP := func(name, ip string) corev1.Pod {
		p := memberPod(name, "sts-uid")
		p.Status.PodIP = ip
		return p
	}
	terminating := withIP("etcd-main-2", "10.1.0.9")
	terminating.DeletionTimestamp = &metav1.Time{Time: time.Unix(1000, 0)}
	defaults := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "etcd-main", Namespace: ns}}
	for _, tc := range []struct {
		name string
		etcd *druidv1alpha1.Etcd
		pod  corev1.Pod
		want []etcdclient.Target
	}{
		{"dialled at its IP and the client port, verified against its DNS name", testEtcd(), withIP("etcd-main-0", "10.1.0.7"),
			[]etcdclient.Target{{Name: "etcd-main-0", Address: "10.1.0.7:3379", ServerName: "etcd-main-0.etcd-main-peer.shoot.svc"}}},
		{"the default client port when the Etcd names none", defaults, withIP("etcd-main-0", "10.1.0.7"),
			[]etcdclient.Target{{Name: "etcd-main-0", Address: "10.1.0.7:2379", ServerName: "etcd-main-0.etcd-main-peer.shoot.svc"}}},
		{"no address yet", testEtcd(), memberPod("etcd-main-1", "sts-uid"), nil},
		{"terminating", testEtcd(), terminating, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Targets(tc.etcd, []corev1.Pod{tc.pod}); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Targets() = %+v, want %+v", got, tc.want)
			}
		})
	}
}
