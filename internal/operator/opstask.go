package operator

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	opstaskcontroller "github.com/etcd-conductor/etcd-conductor/internal/operator/controller/opstask"
)

// registerOpsTasks adds the EtcdOpsTask controller when the apiserver serves EtcdOpsTasks.
func registerOpsTasks(mgr ctrl.Manager, o Options, recorder record.EventRecorder) error {
	if served, err := kindServed(mgr, o, "EtcdOpsTask"); !served || err != nil {
		return err
	}
	r := opstaskcontroller.NewReconciler(opstaskcontroller.Config{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Recorder: recorder})
	if err := r.RegisterWithManager(mgr); err != nil {
		return fmt.Errorf("registering etcdopstask controller: %w", err)
	}
	return nil
}

// kindServed says whether the apiserver serves kind of druid.gardener.cloud/v1alpha1. The chart
// installs every CRD, but not with crds.install=false, and a release whose CRDs were installed
// elsewhere may lack one: the manager then runs everything else, and the log says what is missing.
func kindServed(mgr ctrl.Manager, o Options, kind string) (bool, error) {
	gk := druidv1alpha1.GroupVersion.WithKind(kind).GroupKind()
	if _, err := mgr.GetRESTMapper().RESTMapping(gk, druidv1alpha1.GroupVersion.Version); err != nil {
		if meta.IsNoMatchError(err) {
			o.Logger.Info("The " + kind + " CRD is not installed: " + kind + "s are not carried out; apply charts/etcd-conductor/files/crds (or helm upgrade with crds.install=true) to install it, then restart the manager")
			return false, nil
		}
		return false, fmt.Errorf("looking up the %s kind: %w", kind, err)
	}
	return true, nil
}
