package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	scenariopkg "github.com/etcd-conductor/etcd-conductor/test/scenario"
	"github.com/etcd-conductor/etcd-conductor/test/stack"
	"github.com/etcd-conductor/etcd-conductor/test/workload"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
	"github.com/etcd-conductor/etcd-conductor/tls/testpki"
)

// TestCARotatedThroughBundle rotates the CA of a running three-member cluster the way
// cert-manager with a CA bundle does, with the writer, the quorum monitor and the
// linearizability check on throughout:
//
//  1. the CA Secret's ca.crt becomes old+new: etcd reads its CA files only at start, so the
//     operator restarts every member, one at a time, the leader last (a changed bundle is a
//     template change, resources.AnnotationTrustChecksum);
//  2. the serving, peer and client certificates are renewed from the new CA: etcd loads its own
//     certificate at each handshake, so no member restarts, and every member serves the new one;
//  3. ca.crt becomes the new CA alone: the members restart again and refuse the old CA's clients.
//
// Each phase: 0 ms quorum loss, no acknowledged write lost; the operator keeps querying the
// members (the handovers need their answers) and the Etcd stays Ready.
func TestCARotatedThroughBundle(t *testing.T) {
	runCARotationThroughBundle(t, caRotationRun{})
}

// caRotationRun is how TestCARotatedThroughBundle runs: as it is, or with a fault in its first
// rolling restart (the operation × fault matrix's ca-rotation row).
type caRotationRun struct {
	// duringRestart acts once the first member runs the template with the old+new bundle: the
	// rotation's first rolling restart is under way. That phase is then judged by promise.
	duringRestart func(ctx context.Context, e *env)
	// duringNewOnly acts once the template trusts the new CA alone, before its restart.
	duringNewOnly func(ctx context.Context, e *env)
	promise       scenariopkg.Promise
	// backup backs the cluster up to a real S3 server (e.backup, the store a fault takes away);
	// apiLink starts the operator behind a link a fault can cut (e.apiLink).
	backup, apiLink bool
	// record, when set, receives the figures of the whole rotation: its three phases' summed,
	// from the first bundle change to the last restart.
	record func(matrixFigures)
}

func runCARotationThroughBundle(t *testing.T, run caRotationRun) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	// The node simulator refreshes Secret volumes every 5 s.
	r := startRotationWith(ctx, t, "e2e-ca-rotation-", 10*time.Second, run.backup, run.apiLink)
	s, e, cluster, image, names, oldPKI, newPKI, bundle, trustingBoth := r.stack, r.env, r.cluster, r.image, r.names, r.oldPKI, r.newPKI, r.bundle, r.trustingBoth
	promise := rotationPromise
	if run.duringRestart != nil {
		promise = run.promise
	}
	if err := promise.Validate(); err != nil {
		t.Fatalf("CA rotation: %v", err)
	}

	// 1. Trust both CAs. The writer's client certificate is the old CA's, which every member
	// trusts before and after its restart.
	rec := startRecorderWith(ctx, t, cluster, trustingBoth(oldPKI.Client), 3)
	// Read before the bundle changes: the operator may change the template at once.
	oldTrust := trustOf(ctx, t, cluster)
	oldState, err := cluster.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	setCABundle(ctx, t, s, cluster, names.CA, bundle)
	if run.duringRestart != nil {
		e.waitFor(ctx, "the first member restarted with the old+new bundle", func(ctx context.Context) (bool, error) {
			st, err := cluster.State(ctx)
			return err == nil && st.UpdateRevision != "" && st.UpdateRevision != oldState.UpdateRevision && st.Updated >= 1 &&
				trustOf(ctx, t, cluster) != oldTrust, err
		})
		run.duringRestart(ctx, e)
	}
	bothTrusted := waitRestarted(ctx, e, cluster, image, oldTrust)
	total := matrixFigures{linearizable: true}
	add := func(r workload.Report) {
		total.quorumLossMs += r.QuorumLossMs
		total.lost += r.LostAckedWrites
		total.leaderChanges += r.LeaderChanges
		total.linearizable = total.linearizable && r.LinearizabilityError == ""
	}
	add(phaseWith(ctx, t, "ca-bundle", rec, promise))

	// 2. Renew the leaves from the new CA: no restart, every member serves the new certificate.
	rec = startRecorderWith(ctx, t, cluster, trustingBoth(newPKI.Client), 3)
	before := podStarts(ctx, t, cluster)
	for _, secret := range newPKI.Secrets(cluster.Namespace, names)[1:] {
		updateSecretData(ctx, t, s, cluster.Namespace, secret.Name, secret.Data)
	}
	waitServingNewCA(ctx, e, newPKI)
	if after := podStarts(ctx, t, cluster); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("renewing the leaf certificates restarted members: %v → %v", before, after)
	}
	add(phaseWith(ctx, t, "leaf-renewal", rec, rotationPromise))

	// 3. Trust the new CA alone.
	rec = startRecorderWith(ctx, t, cluster, trustingBoth(newPKI.Client), 3)
	setCABundle(ctx, t, s, cluster, names.CA, newPKI.CA.CertPEM)
	if run.duringNewOnly != nil {
		e.waitFor(ctx, "the template trusting the new CA alone", func(ctx context.Context) (bool, error) {
			st, err := cluster.State(ctx)
			return err == nil && st.UpdateRevision != "" && trustOf(ctx, t, cluster) != bothTrusted, err
		})
		run.duringNewOnly(ctx, e)
	}
	waitRestarted(ctx, e, cluster, image, bothTrusted)
	add(phaseWith(ctx, t, "ca-new-only", rec, rotationPromise))
	if run.record != nil {
		total.took, total.completed = time.Since(started), true
		run.record(total)
	}

	// The old CA's clients are refused now, and the operator still reaches the members.
	checkOldCARefused(ctx, e, oldPKI, bundle)
	checkEtcdReady(ctx, e, cluster)
	checkRolesFromMembers(ctx, t, e)
}

// TestCARotatedInOneStep replaces the CA and every certificate of a running three-member cluster
// in one step, as a user regenerating the cluster's PKI would, with the writer, the quorum monitor
// and the linearizability check on. Mounted as they are, the new certificates would reach every
// pod within seconds while the members not restarted yet trust only the old CA: the cluster would
// split. The operator instead (internal/decide/trustchange) trusts old+new first (one rolling restart),
// then copies the new certificates once every member trusts them (no restart), then, once the
// kubelet has put them into every pod, drops the old CA (a second rolling restart).
//
// The writer stands for the cluster's other clients: it trusts both CAs and moves to the new CA's
// client certificate once the members serve the new certificates (before the old CA is dropped).
func TestCARotatedInOneStep(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	// The node simulator refreshes Secret volumes every 5 s; 20 s leaves the writer time to move
	// to the new client certificate before the drop.
	r := startRotation(ctx, t, "e2e-ca-one-step-", 20*time.Second)
	s, e, cluster, image, names, oldPKI, newPKI, bundle, trustingBoth := r.stack, r.env, r.cluster, r.image, r.names, r.oldPKI, r.newPKI, r.bundle, r.trustingBoth
	oldTrust := trustOf(ctx, t, cluster)

	// The new CA and its certificates, all Secrets at once.
	rec := startRecorderWith(ctx, t, cluster, trustingBoth(oldPKI.Client), 3)
	for _, secret := range newPKI.Secrets(cluster.Namespace, names) {
		updateSecretData(ctx, t, s, cluster.Namespace, secret.Name, secret.Data)
	}
	bothTrusted := waitRestarted(ctx, e, cluster, image, oldTrust)
	before := podStarts(ctx, t, cluster)
	waitServingNewCA(ctx, e, newPKI)
	if after := podStarts(ctx, t, cluster); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("copying the new certificates restarted members: %v → %v", before, after)
	}
	if got := trustOf(ctx, t, cluster); got != bothTrusted {
		t.Fatalf("the old CA was dropped (trust %s → %s) before the writer could move: SecretPropagation too short for this machine?", bothTrusted, got)
	}
	phase(ctx, t, "one-step-trust-both+copy", rec)

	rec = startRecorderWith(ctx, t, cluster, trustingBoth(newPKI.Client), 3)
	newTrust := waitRestarted(ctx, e, cluster, image, bothTrusted)
	phase(ctx, t, "one-step-drop-old-ca", rec)
	if newTrust == oldTrust {
		t.Errorf("the members trust what they trusted before the rotation")
	}
	checkOldCARefused(ctx, e, oldPKI, bundle)
	checkEtcdReady(ctx, e, cluster)
	checkRolesFromMembers(ctx, t, e)
}

// rotation is a three-member cluster under an operator that reads TLS Secrets every 3 s, and a
// new PKI to rotate it to.
type rotation struct {
	stack          *stack.Stack
	env            *env
	cluster        *stack.EtcdCluster
	image          string
	names          testpki.SecretNames
	oldPKI, newPKI *testpki.EtcdPKI
	// bundle trusts both CAs; trustingBoth is a client's material with it.
	bundle       []byte
	trustingBoth func(client testpki.KeyPair) conductortls.ClientMaterial
}

// startRotation starts the operator (TrustRecheck 3 s instead of 2 minutes, SecretPropagation for
// the kubelet's refresh instead of 2 minutes) and the cluster.
func startRotation(ctx context.Context, t *testing.T, prefix string, propagation time.Duration) rotation {
	t.Helper()
	return startRotationWith(ctx, t, prefix, propagation, false, false)
}

// startRotationWith is startRotation with the cluster backed up to a real S3 server (backup) and
// the operator behind a link to the apiserver that a fault can cut (apiLink); e holds the
// operator and its options, for a restart.
func startRotationWith(ctx context.Context, t *testing.T, prefix string, propagation time.Duration, backup, apiLink bool) rotation {
	t.Helper()
	s := sharedStack(t)
	opts := operatorDefaults
	opts.TrustRecheck = 3 * time.Second
	opts.SecretPropagation = propagation
	if apiLink {
		opts.APIServerLink = framework.NewAPIServerLink()
	}
	op := framework.StartOperator(t, s.Cluster.RESTConfig(), opts)
	e := &env{t: t, stack: s, opts: opts, operator: op, apiLink: opts.APIServerLink}
	var cluster *stack.EtcdCluster
	if backup {
		e.backup = createBackedUpCluster(ctx, e, prefix, 3)
		cluster = e.cluster
		e.waitFor(ctx, "BackupReady True before the rotation", backupReadyIs(cluster, druidv1alpha1.ConditionTrue))
	} else {
		cluster = createCluster(ctx, e, prefix, 3)
	}
	newPKI, err := testpki.NewEtcdPKI(cluster.Name, cluster.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	r := rotation{stack: s, env: e, cluster: cluster, image: framework.EtcdImage(fromVersion), names: testpki.DefaultSecretNames(cluster.Name),
		oldPKI: cluster.PKI, newPKI: newPKI}
	r.bundle = append(append([]byte{}, r.oldPKI.CA.CertPEM...), newPKI.CA.CertPEM...)
	r.trustingBoth = func(client testpki.KeyPair) conductortls.ClientMaterial {
		return conductortls.ClientMaterial{CA: r.bundle, Cert: client.CertPEM, Key: client.KeyPEM}
	}
	return r
}

// trustOf is the trust checksum of the member pod template: what the members were restarted for.
func trustOf(ctx context.Context, t *testing.T, cluster *stack.EtcdCluster) string {
	t.Helper()
	sts, err := cluster.StatefulSet(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return sts.Spec.Template.Annotations[resources.AnnotationTrustChecksum]
}

// waitServingNewCA waits until every member serves a certificate of the new CA and accepts its
// client certificate.
func waitServingNewCA(ctx context.Context, e *env, newPKI *testpki.EtcdPKI) {
	e.t.Helper()
	pool := etcdclient.NewPool(etcdclient.Options{})
	defer pool.Close()
	newOnly := newPKI.ClientMaterial()
	e.waitFor(ctx, "every member serving a certificate of the new CA", func(ctx context.Context) (bool, error) {
		pool.Forget("e2e-new-ca")
		cs, err := pool.Query(ctx, "e2e-new-ca", newOnly, endpointTargets(e))
		if err != nil {
			return false, err
		}
		for _, m := range cs.Members {
			if !m.Reachable {
				return false, m.Err
			}
		}
		return len(cs.Members) == 3, nil
	})
}

// checkOldCARefused checks that no member accepts a client certificate of the old CA any more.
func checkOldCARefused(ctx context.Context, e *env, oldPKI *testpki.EtcdPKI, bundle []byte) {
	e.t.Helper()
	pool := etcdclient.NewPool(etcdclient.Options{})
	defer pool.Close()
	cs, err := pool.Query(ctx, "e2e-old-ca", conductortls.ClientMaterial{CA: bundle, Cert: oldPKI.Client.CertPEM, Key: oldPKI.Client.KeyPEM}, endpointTargets(e))
	if err == nil {
		for _, m := range cs.Members {
			if m.Reachable {
				e.t.Errorf("member %s still accepts a client certificate of the old CA", m.Name)
			}
		}
	}
}

// checkEtcdReady waits for the Etcd Ready with the operator's view of every member: the operator
// still reaches them.
func checkEtcdReady(ctx context.Context, e *env, cluster *stack.EtcdCluster) {
	e.t.Helper()
	e.waitFor(ctx, "the Etcd Ready with the operator's view of every member", func(ctx context.Context) (bool, error) {
		etcd, err := cluster.Get(ctx)
		if err != nil {
			return false, err
		}
		return etcd.Status.Ready != nil && *etcd.Status.Ready && len(etcd.Status.Members) == 3, nil
	})
}

// setCABundle writes ca.crt of the CA Secret, as cert-manager's CA issuer or trust-manager does.
func setCABundle(ctx context.Context, t *testing.T, s *stack.Stack, cluster *stack.EtcdCluster, name string, bundle []byte) {
	t.Helper()
	updateSecretData(ctx, t, s, cluster.Namespace, name, map[string][]byte{conductortls.DefaultCADataKey: bundle})
}

// updateSecretData overwrites the given keys of a Secret.
func updateSecretData(ctx context.Context, t *testing.T, s *stack.Stack, namespace, name string, data map[string][]byte) {
	t.Helper()
	secret := &corev1.Secret{}
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, secret); err != nil {
		t.Fatal(err)
	}
	for k, v := range data {
		secret.Data[k] = v
	}
	if err := s.Client.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
}

// waitRestarted waits until the pod template's trust checksum has moved on from previous and every
// member runs that template again; it returns the new checksum.
func waitRestarted(ctx context.Context, e *env, cluster *stack.EtcdCluster, image, previous string) string {
	e.t.Helper()
	var checksum string
	e.waitFor(ctx, "the members restarted for the changed CA bundle", func(ctx context.Context) (bool, error) {
		sts, err := cluster.StatefulSet(ctx)
		if err != nil {
			return false, err
		}
		checksum = sts.Spec.Template.Annotations[resources.AnnotationTrustChecksum]
		return checksum != "" && checksum != previous, nil
	})
	rolloutCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := cluster.WaitConverged(rolloutCtx, image); err != nil {
		e.t.Fatalf("the restart for the CA bundle did not complete: %v", err)
	}
	return checksum
}

// podStarts is each member pod's UID and etcd container restarts: what a restart changes.
func podStarts(ctx context.Context, t *testing.T, cluster *stack.EtcdCluster) map[string]string {
	t.Helper()
	pods, err := cluster.Pods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pods {
		restarts := int32(0)
		for _, c := range p.Status.ContainerStatuses {
			if c.Name == etcdContainer {
				restarts = c.RestartCount
			}
		}
		out[p.Name] = fmt.Sprintf("%s/%d", p.UID, restarts)
	}
	return out
}

// rotationPromise is what each phase of a rotation no fault disturbs promises: no quorum loss.
var rotationPromise = scenariopkg.Promise{NoQuorumLoss: true, LeaderChanges: scenariopkg.AnyLeaderChanges,
	Waived: "a phase's rolling restart hands leadership over when it restarts the leader, a leaf renewal moves none: the count is not what a phase promises"}

// phase stops the recorder of one phase, prints its figures and checks them: no quorum loss, no
// acknowledged write lost, a linearizable history.
func phase(ctx context.Context, t *testing.T, name string, rec *workload.Recorder) {
	t.Helper()
	phaseWith(ctx, t, name, rec, rotationPromise)
}

// phaseWith is phase with the phase's own promise (a fault in it); it returns the figures.
func phaseWith(ctx context.Context, t *testing.T, name string, rec *workload.Recorder, promise scenariopkg.Promise) workload.Report {
	t.Helper()
	report, recErr := rec.Stop(ctx)
	t.Logf("figures %s: %s", name, report.Summary())
	fmt.Printf("e2e %-28s quorumLossMs=%-6d longestWriteGapMs=%-6d failedWrites=%-4d ackedWrites=%-5d lost=%d leaderChanges=%d\n",
		name, report.QuorumLossMs, report.LongestWriteGapMs, report.FailedWrites, report.AckedWrites, report.LostAckedWrites, report.LeaderChanges)
	checkWrites(t, report, recErr)
	for _, q := range report.QuorumLosses {
		t.Logf("%s: quorum loss from %s for %d ms", name, q.Start.Format("15:04:05.000"), q.Ms)
	}
	checkPromise(t, promise, report)
	if report.LinearizabilityError != "" {
		t.Errorf("%s: history not linearizable: %s", name, report.LinearizabilityError)
	}
	return report
}
