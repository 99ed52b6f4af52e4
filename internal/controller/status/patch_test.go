package status

import (
	"context"
	"strings"
	"testing"

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
