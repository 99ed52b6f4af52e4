package operator

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	opstaskcontroller "github.com/etcd-conductor/etcd-conductor/internal/controller/opstask"
)

// registerOpsTasks adds the EtcdOpsTask controller when the apiserver serves EtcdOpsTasks. `helm
// upgrade` installs no new CRD from a chart's crds/, so a cluster upgraded from a release without
// it keeps running everything else, and says what is missing.
func registerOpsTasks(mgr ctrl.Manager, o Options, recorder record.EventRecorder) error {
	gk := druidv1alpha1.GroupVersion.WithKind("EtcdOpsTask").GroupKind()
	if _, err := mgr.GetRESTMapper().RESTMapping(gk, druidv1alpha1.GroupVersion.Version); err != nil {
		if meta.IsNoMatchError(err) {
			o.Logger.Info("The EtcdOpsTask CRD is not installed: EtcdOpsTasks are not carried out; apply charts/etcd-conductor/crds to install it, then restart the manager")
			return nil
		}
		return fmt.Errorf("looking up the EtcdOpsTask kind: %w", err)
	}
	r := opstaskcontroller.NewReconciler(opstaskcontroller.Config{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Recorder: recorder})
	if err := r.RegisterWithManager(mgr); err != nil {
		return fmt.Errorf("registering etcdopstask controller: %w", err)
	}
	return nil
}
