package operator

import (
	"context"
	"fmt"

	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/controller/defrag"
	etcdcontroller "github.com/etcd-conductor/etcd-conductor/internal/controller/etcd"
	"github.com/etcd-conductor/etcd-conductor/internal/memberclient"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

// registerDefrag adds the defragmentation controller, sharing the member client pool.
func registerDefrag(mgr ctrl.Manager, o Options, recorder record.EventRecorder, pool *etcdclient.Pool) error {
	metrics, err := defrag.NewMetrics(o.Registry)
	if err != nil {
		return fmt.Errorf("registering defrag metrics: %w", err)
	}
	r := defrag.NewReconciler(defrag.Config{
		Client:           mgr.GetClient(),
		Reader:           mgr.GetAPIReader(),
		Recorder:         recorder,
		Members:          pool,
		Metrics:          metrics,
		DefaultClientTLS: defaultClientTLS(o.Config.MemberClientTLS),
	})
	if err := r.RegisterWithManager(mgr, o.Config.Controllers.Etcd.ConcurrentSyncs); err != nil {
		return fmt.Errorf("registering defrag controller: %w", err)
	}
	return nil
}

// dbSizes lets the Etcd reconciler ask the members for their database sizes through the shared
// pool.
func dbSizes(reader client.Reader, pool *etcdclient.Pool, fallback func() (conductortls.ClientMaterial, error)) etcdcontroller.DBSizes {
	return func(ctx context.Context, etcd *druidv1alpha1.Etcd) (map[string]int64, error) {
		return memberclient.DBSizes(ctx, reader, pool, etcd, fallback)
	}
}
