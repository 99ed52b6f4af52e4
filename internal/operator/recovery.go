package operator

import (
	"fmt"

	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	"github.com/etcd-conductor/etcd-conductor/internal/controller/recovery"
	"github.com/etcd-conductor/etcd-conductor/internal/memberaccess"
)

// registerRecovery adds the recovery controller (quorum lost with a majority of members without
// data: restore from the backup), sharing the member client pool and the way to the members.
func registerRecovery(mgr ctrl.Manager, o Options, recorder record.EventRecorder, pool *etcdclient.Pool, access *memberaccess.Access) error {
	r := recovery.NewReconciler(recovery.Config{
		Client:   mgr.GetClient(),
		Reader:   mgr.GetAPIReader(),
		Recorder: recorder,
		Members:  pool,
		Access:   access,
	})
	if err := r.RegisterWithManager(mgr, o.Config.Controllers.Etcd.ConcurrentSyncs); err != nil {
		return fmt.Errorf("registering recovery controller: %w", err)
	}
	return nil
}
