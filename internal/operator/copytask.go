package operator

import (
	"fmt"

	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"

	copytaskcontroller "github.com/etcd-conductor/etcd-conductor/internal/controller/copytask"
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
	r := copytaskcontroller.NewReconciler(copytaskcontroller.Config{Client: mgr.GetClient(), Secrets: mgr.GetAPIReader(), Recorder: recorder})
	if err := r.RegisterWithManager(mgr, o.Config.CopyBackupsTaskWorkers()); err != nil {
		return fmt.Errorf("registering etcdcopybackupstask controller: %w", err)
	}
	return nil
}
