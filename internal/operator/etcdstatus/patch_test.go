package etcdstatus

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

// patchRecorder keeps the last status patch instead of sending it.
type patchRecorder struct {
	client.Client
	sent string
}

func (p *patchRecorder) Status() client.SubResourceWriter { return statusPatchRecorder{p: p} }

type statusPatchRecorder struct {
	client.SubResourceWriter
	p *patchRecorder
}

func (s statusPatchRecorder) Patch(_ context.Context, obj client.Object, patch client.Patch, _ ...client.SubResourcePatchOption) error {
	data, err := patch.Data(obj)
	s.p.sent = string(data)
	return err
}

// TestPatchLocksTheRecordedClusterID: the recorded cluster ID is a decision about the Etcd as it
// was read (the membership controller records it only while none is), so it is written only
// onto that version, as the voters and the recovery order are.
func TestPatchLocksTheRecordedClusterID(t *testing.T) {
	etcd := &druidv1alpha1.Etcd{}
	etcd.ResourceVersion = "7"
	c := &patchRecorder{}
	if err := Patch(t.Context(), c, etcd, WriterMembership, func(s *druidv1alpha1.EtcdStatus) { s.ClusterID = "c1" }); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(c.sent, `"resourceVersion":"7"`) || !strings.Contains(c.sent, `"clusterID":"c1"`) {
		t.Errorf("sent %s, want the cluster ID with the resourceVersion it was decided on", c.sent)
	}
}

func TestPatchRefusesFieldsOfOtherWriters(t *testing.T) {
	for _, tc := range []struct {
		w   Writer
		set func(*druidv1alpha1.EtcdStatus)
	}{
		{WriterEtcd, func(s *druidv1alpha1.EtcdStatus) { s.LastOperation = &druidv1alpha1.LastOperation{} }},
		{WriterOnDelete, func(s *druidv1alpha1.EtcdStatus) { s.Ready = ptr.To(true) }},
		{WriterStatus, func(s *druidv1alpha1.EtcdStatus) { s.ObservedGeneration = ptr.To[int64](3) }},
		{"unknown", func(*druidv1alpha1.EtcdStatus) {}},
	} {
		t.Run(string(tc.w), func(t *testing.T) {
			etcd := &druidv1alpha1.Etcd{}
			// No client: the write must be refused before it would be used.
			if err := Patch(t.Context(), nil, etcd, tc.w, tc.set); err == nil {
				t.Fatal("Patch() accepted a change to a field the writer does not own")
			}
			if etcd.Status.LastOperation != nil || etcd.Status.Ready != nil || etcd.Status.ObservedGeneration != nil {
				t.Errorf("refused change left on the object: %+v", etcd.Status)
			}
		})
	}
}

func TestPatchRefusesConditionsOfOtherWriters(t *testing.T) {
	etcd := &druidv1alpha1.Etcd{}
	etcd.Status.Conditions = []druidv1alpha1.Condition{{Type: druidv1alpha1.ConditionTypeReady, Status: druidv1alpha1.ConditionTrue}}
	// No client: the write must be refused before it would be used.
	err := Patch(t.Context(), nil, etcd, WriterMembership, func(s *druidv1alpha1.EtcdStatus) {
		s.Conditions = SetCondition(s.Conditions, druidv1alpha1.Condition{Type: druidv1alpha1.ConditionTypeReady, Status: druidv1alpha1.ConditionFalse})
	})
	if err == nil {
		t.Fatal("Patch() let the membership controller write the Ready condition")
	}
	if etcd.Status.Conditions[0].Status != druidv1alpha1.ConditionTrue {
		t.Errorf("refused change left on the object: %+v", etcd.Status.Conditions)
	}
}

func TestPatchSendsNothingWhenNothingChanged(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	etcd := &druidv1alpha1.Etcd{}
	etcd.Status.LastOperation = &druidv1alpha1.LastOperation{Type: OperationRollout, State: OperationSucceeded, LastUpdateTime: at}
	etcd.Status.Conditions = []druidv1alpha1.Condition{{Type: druidv1alpha1.ConditionTypeScaleOperationInProgress,
		Status: druidv1alpha1.ConditionFalse, Reason: "Done", LastTransitionTime: at, LastUpdateTime: at}}
	for _, tc := range []struct {
		w   Writer
		set func(*druidv1alpha1.EtcdStatus)
	}{
		{WriterOnDelete, func(s *druidv1alpha1.EtcdStatus) {
			s.LastOperation = &druidv1alpha1.LastOperation{Type: OperationRollout, State: OperationSucceeded, LastUpdateTime: at}
		}},
		{WriterEtcd, func(s *druidv1alpha1.EtcdStatus) { s.LastErrors = []druidv1alpha1.LastError{} }}, // empty, as nil
		{WriterMembership, func(s *druidv1alpha1.EtcdStatus) {
			s.Conditions = SetCondition(s.Conditions, druidv1alpha1.Condition{Type: druidv1alpha1.ConditionTypeScaleOperationInProgress,
				Status: druidv1alpha1.ConditionFalse, Reason: "Done", LastUpdateTime: metav1.NewTime(at.Add(time.Hour))})
		}},
	} {
		t.Run(string(tc.w), func(t *testing.T) {
			// No client: a write would panic.
			if err := Patch(t.Context(), nil, etcd.DeepCopy(), tc.w, tc.set); err != nil {
				t.Fatalf("Patch() = %v", err)
			}
		})
	}
}

// TestDataAsideIsTheStatusControllers: dataAside is written by the status controller only.
func TestDataAsideIsTheStatusControllers(t *testing.T) {
	s := druidv1alpha1.EtcdStatus{DataAside: []druidv1alpha1.DataAside{{Member: "etcd-main-0", Path: "/p", KeptSince: metav1.NewTime(now), Bytes: 1}}}
	if others, err := WriterStatus.withoutOwned(s); err != nil || others.DataAside != nil {
		t.Errorf("the status controller does not own dataAside: %+v, %v", others, err)
	}
	etcd := &druidv1alpha1.Etcd{}
	// No client: the write must be refused before it would be used.
	if err := Patch(t.Context(), nil, etcd, WriterMembership, func(s *druidv1alpha1.EtcdStatus) { s.DataAside = []druidv1alpha1.DataAside{{Member: "x"}} }); err == nil {
		t.Error("the membership controller may write dataAside")
	}
}
