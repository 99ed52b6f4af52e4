package workload_test

import (
	"context"
	"fmt"
	"time"

	"github.com/etcd-conductor/etcd-conductor/test/workload"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

// A scenario measures a rollout: start the recorder, do the disruptive thing, stop it.
func ExampleRecorder() {
	var creds conductortls.ClientMaterial // e.g. testpki.EtcdPKI.ClientMaterial()
	members := func() []workload.Endpoint {
		// In an e2e scenario: the Etcd's pods from an informer cache, with their current IPs.
		return []workload.Endpoint{
			{Name: "etcd-0", Address: "10.0.0.10:2379", ServerName: "etcd-0.etcd-peer.default.svc"},
			{Name: "etcd-1", Address: "10.0.0.11:2379", ServerName: "etcd-1.etcd-peer.default.svc"},
			{Name: "etcd-2", Address: "10.0.0.12:2379", ServerName: "etcd-2.etcd-peer.default.svc"},
		}
	}
	rec, err := workload.NewRecorder(members, creds, workload.RecorderOptions{
		Expected: 3,
		Writer:   workload.WriterOptions{Rate: 50, RequestTimeout: 200 * time.Millisecond},
		Quorum:   workload.QuorumOptions{Probe: workload.ProbeReadyz},
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if err := rec.Start(ctx); err != nil {
		panic(err)
	}
	// ... bump the image and wait for the rollout ...
	report, err := rec.Stop(ctx)
	fmt.Println(report.Summary(), err)
}
