package operator

import (
	"context"
	"fmt"

	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/etcd-conductor/etcd-conductor/internal/operator/controller/recovery"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/memberaccess"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/reportauth"
)

// registerRecovery adds the recovery controller (quorum lost with a majority of members without
// data: restore from the backup), sharing the member client pool and the way to the members.
func registerRecovery(mgr ctrl.Manager, o Options, recorder record.EventRecorder, pool *memberaccess.ConnectionPool, access *memberaccess.Access) error {
	reports := reportauth.NewChecker(reportauth.Config{
		Reader:               mgr.GetAPIReader(),
		AdmissionPolicy:      o.Config.MemberReports.AdmissionPolicy,
		TrustUnauthenticated: o.Config.MemberReports.TrustUnauthenticated,
	})
	// Said once at start, so a missing policy is known before a cluster needs a restore.
	log := mgr.GetLogger().WithName(recovery.ControllerName)
	if o.Config.MemberReports.TrustUnauthenticated {
		log.Info("Members' reports of lost data are trusted without an admission policy (memberReports.trustUnauthenticated): anyone who may write their Leases can order a restore")
	} else if why := reports.Unauthenticated(context.Background()); why != "" {
		log.Info("Members' reports of lost data are not authenticated: no restore is ordered on them until the member report policy is installed", "why", why)
	}
	r := recovery.NewReconciler(recovery.Config{
		Client:   mgr.GetClient(),
		Reader:   mgr.GetAPIReader(),
		Recorder: recorder,
		Members:  pool,
		Access:   access,
		Reports:  reports,
	})
	if err := r.RegisterWithManager(mgr, o.Config.Controllers.Etcd.ConcurrentSyncs); err != nil {
		return fmt.Errorf("registering recovery controller: %w", err)
	}
	return nil
}
