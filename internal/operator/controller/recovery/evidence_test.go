package recovery

import (
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// TestPodEvidence: a member pod proves an empty data dir awaiting a bootstrap from the backup
// only by a report of its own incarnation written while its init step runs, the same proof
// rules as a voter's.
func TestPodEvidence(t *testing.T) {
	etcd := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: "ns"}}
	pod := func(uid string, initRunning bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "main-1", UID: types.UID(uid)}}
		state := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}
		if initRunning {
			state = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
		}
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: resources.MemberInitContainerName, State: state}}
		return p
	}
	lease := func(uid, rule string, data memberlease.DataState) *coordinationv1.Lease {
		r := memberlease.StartReport{PodUID: uid, Rule: rule, Data: data}
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "main-1", Annotations: map[string]string{memberlease.AnnotationStartReport: r.Annotation()}}}
	}
	awaiting := memberlease.StartRuleBootstrapFromBackup
	for _, tc := range []struct {
		name                         string
		pod                          *corev1.Pod
		lease                        *coordinationv1.Lease
		clusterID                    string
		provedEmpty, awaits, hasData bool
	}{
		{name: "current pod, init running, empty, awaiting", pod: pod("u2", true), lease: lease("u2", awaiting, memberlease.DataEmpty), provedEmpty: true, awaits: true},
		{name: "report of an older incarnation", pod: pod("u2", true), lease: lease("u1", awaiting, memberlease.DataEmpty)},
		{name: "init step no longer runs", pod: pod("u2", false), lease: lease("u2", awaiting, memberlease.DataEmpty)},
		{name: "empty, bootstrapping as usual", pod: pod("u2", true), lease: lease("u2", "bootstrap/new", memberlease.DataEmpty), provedEmpty: true},
		{name: "valid data", pod: pod("u2", true), lease: lease("u2", "restart/valid-data", memberlease.DataValid), hasData: true},
		{name: "a forged wait with valid data proves no emptiness", pod: pod("u2", true), lease: lease("u2", awaiting, memberlease.DataValid), hasData: true},
		{name: "etcd answers", pod: pod("u2", true), lease: lease("u2", awaiting, memberlease.DataEmpty), clusterID: "c1"},
		{name: "no Lease", pod: pod("u2", true)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := podEvidence(etcd, tc.pod, tc.lease, tc.clusterID)
			if got.ProvedEmpty != tc.provedEmpty || got.AwaitsBackup != tc.awaits || got.HasData != tc.hasData || got.Ordinal != 1 || got.UID != "u2" {
				t.Fatalf("got %+v, want provedEmpty=%v awaits=%v hasData=%v ordinal 1 uid u2", got, tc.provedEmpty, tc.awaits, tc.hasData)
			}
		})
	}
}
