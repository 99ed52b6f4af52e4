package operator

import (
	"fmt"

	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	"github.com/etcd-conductor/etcd-conductor/internal/controller/defrag"
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
