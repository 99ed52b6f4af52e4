package operator

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	copytaskcontroller "github.com/etcd-conductor/etcd-conductor/internal/controller/copytask"
)

// registerCopyTasks adds the EtcdCopyBackupsTask controller when the configuration enables it
// (controllers.etcdCopyBackupsTask.enabled, off by default as in etcd-druid) and the apiserver
// serves EtcdCopyBackupsTasks (`helm upgrade` installs no new CRD: the rest runs, and the log says
// what is missing).
func registerCopyTasks(mgr ctrl.Manager, o Options, recorder record.EventRecorder) error {
	if !o.Config.CopyBackupsTaskEnabled() {
		return nil
	}
	gk := druidv1alpha1.GroupVersion.WithKind("EtcdCopyBackupsTask").GroupKind()
	if _, err := mgr.GetRESTMapper().RESTMapping(gk, druidv1alpha1.GroupVersion.Version); err != nil {
		if meta.IsNoMatchError(err) {
			o.Logger.Info("The EtcdCopyBackupsTask CRD is not installed: EtcdCopyBackupsTasks are not carried out; apply charts/etcd-conductor/crds to install it, then restart the manager")
			return nil
		}
		return fmt.Errorf("looking up the EtcdCopyBackupsTask kind: %w", err)
	}
	r := copytaskcontroller.NewReconciler(copytaskcontroller.Config{Client: mgr.GetClient(), Secrets: mgr.GetAPIReader(), Recorder: recorder})
	if err := r.RegisterWithManager(mgr, o.Config.CopyBackupsTaskWorkers()); err != nil {
		return fmt.Errorf("registering etcdcopybackupstask controller: %w", err)
	}
	return nil
}
