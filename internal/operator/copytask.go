package operator

import (
	"fmt"

	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"

	copytaskcontroller "github.com/etcd-conductor/etcd-conductor/internal/operator/controller/copytask"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupcopy"
)

// registerCopyTasks adds the EtcdCopyBackupsTask controller when the configuration enables it
// (controllers.etcdCopyBackupsTask.enabled, off by default as in etcd-druid) and the apiserver
// serves EtcdCopyBackupsTasks.
func registerCopyTasks(mgr ctrl.Manager, o Options, recorder record.EventRecorder) error {
	if !o.Config.CopyBackupsTaskEnabled() {
		return nil
	}
	if served, err := kindServed(mgr, o, "EtcdCopyBackupsTask"); !served || err != nil {
		return err
	}
	workers := o.Config.CopyBackupsTaskWorkers()
	r := copytaskcontroller.NewReconciler(copytaskcontroller.Config{Client: mgr.GetClient(), Secrets: mgr.GetAPIReader(), Recorder: recorder,
		Copies: workers, Reach: o.Config.BackupStores.Reach(), Limits: backupcopy.Limits{MaxObjectBytes: o.Config.BackupStores.MaxCopyObjectBytes}})
	if err := r.RegisterWithManager(mgr, workers); err != nil {
		return fmt.Errorf("registering etcdcopybackupstask controller: %w", err)
	}
	return nil
}
