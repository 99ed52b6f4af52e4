package operator

import (
	"fmt"

	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/etcd-conductor/etcd-conductor/internal/operator/controller/defrag"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/memberaccess"
)

// registerDefrag adds the defragmentation controller, sharing the member client pool and the
// way to the members.
func registerDefrag(mgr ctrl.Manager, o Options, recorder record.EventRecorder, pool *memberaccess.ConnectionPool, access *memberaccess.Access) error {
	metrics, err := defrag.NewMetrics(o.Registry)
	if err != nil {
		return fmt.Errorf("registering defrag metrics: %w", err)
	}
	r := defrag.NewReconciler(defrag.Config{
		Client:   mgr.GetClient(),
		Reader:   mgr.GetAPIReader(),
		Recorder: recorder,
		Members:  pool,
		Metrics:  metrics,
		Access:   access,
		// controllers.etcd.waitForBackupReady, left out true (internal/decide/backupgate).
		WaitForBackupReady: ptr.Deref(o.Config.Controllers.Etcd.WaitForBackupReady, true),
	})
	if err := r.RegisterWithManager(mgr, o.Config.Controllers.Etcd.ConcurrentSyncs); err != nil {
		return fmt.Errorf("registering defrag controller: %w", err)
	}
	return nil
}
