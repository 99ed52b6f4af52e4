package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberpod"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/seeding"
	"github.com/etcd-conductor/etcd-conductor/internal/member/backup"
	"github.com/etcd-conductor/etcd-conductor/internal/member/datadir"
	"github.com/etcd-conductor/etcd-conductor/internal/member/restore"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

const (
	// StartRuleRestoreFailed is reported when a restore was attempted and failed; the init step
	// tries again at the next poll.
	StartRuleRestoreFailed = "restore/failed"
	// StartRuleRestoreNoSpace is reported when a restore found the data dir's volume too small
	// for it (restore.InsufficientSpaceError), with the numbers; the init step tries again at
	// the next poll, which succeeds only once the volume has grown or been cleared.
	StartRuleRestoreNoSpace = "restore/no-space"
	// StartRuleDataUnreadable is reported when the data dir could not be judged (an I/O error, a
	// lock held): not a verdict, so nothing is moved aside; the step asks again.
	StartRuleDataUnreadable = "wait/data-unreadable"
	// StartRuleRestoreCalledOff is reported when the operator's order was withdrawn (or changed)
	// while this member restored: what it restored is kept aside and it decides again.
	StartRuleRestoreCalledOff = "restore/called-off"

	DefaultInitPollInterval = 2 * time.Second
)

// InitConfig is what `member-agent init` is given.
type InitConfig struct {
	// ConfigFile is where the etcd configuration is written (etcd runs with --config-file).
	ConfigFile string
	// ClientPort is the members' client port, to ask the other members.
	ClientPort int
	ClientFiles
	// Lease and Namespace name this member's Lease, where decisions are reported.
	Lease     string
	Namespace string
	// PollInterval is how often a waiting init step asks again.
	PollInterval time.Duration
	// EtcdFlags are the member's own etcd flags (--name=..., --listen-client-urls=..., ...);
	// Environment holds the shared ETCD_* settings from the ConfigMap. Flags win.
	EtcdFlags   []string
	Environment map[string]string
	// AdditionalPeerURLs holds every member's additional peer URLs (memberpod's format); the
	// member advertises its own after its initial-advertise-peer-urls, as etcd-druid does.
	AdditionalPeerURLs string
	// BackupStore opens the Etcd's backup store; nil when the pod has none configured (then the
	// member never restores).
	BackupStore func(context.Context) (backupstore.Store, error)
	// BackupOwner is the Etcd restoring: a store another Etcd claimed is refused.
	BackupOwner snapshot.Owner
	// PodUID is this pod's incarnation ($(POD_UID)): a restore order names the incarnation it is
	// for, and every report carries it.
	PodUID string
}

// Initializer decides how the member starts and writes its etcd configuration.
type Initializer struct {
	cfg    InitConfig
	leases coordinationv1client.LeaseInterface
	// etcds reads the Etcd that owns the member Lease, where the operator's restore order is.
	etcds client.Reader
	log   logr.Logger
	now   func() time.Time
	// etcdName is the Etcd owning this member's Lease, learnt from the Lease's owner.
	etcdName string
	// dataDir is etcd's data dir; what is kept aside next to it is reported with every decision.
	dataDir string
	// aside is what is kept aside next to dataDir (asideErr: why it could not be listed). Only
	// this step sets data aside, so it is listed once at the start and again after each move,
	// not at every poll and report.
	aside    []datadir.Aside
	asideErr error
}

// NewInitializer checks cfg; leases may be nil (no reporting), etcds may be nil (no restore
// order is ever read, so the member never restores).
func NewInitializer(cfg InitConfig, leases coordinationv1client.LeasesGetter, etcds client.Reader, log logr.Logger) (*Initializer, error) {
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultInitPollInterval
	}
	errs := []error{cfg.ClientFiles.Validate()}
	if cfg.ConfigFile == "" {
		errs = append(errs, errors.New("--config-file is required"))
	}
	settings := cfg.settings()
	for _, key := range []string{"name", "data-dir", "initial-advertise-peer-urls"} {
		if settings[key] == "" {
			errs = append(errs, fmt.Errorf("etcd setting %s is missing (flag --%s or ETCD_%s)", key, key, strings.ToUpper(strings.ReplaceAll(key, "-", "_"))))
		}
	}
	if cfg.ClientPort <= 0 {
		errs = append(errs, errors.New("--client-port must be positive"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	i := &Initializer{cfg: cfg, log: log, now: time.Now, etcds: etcds, dataDir: settings["data-dir"]}
	if leases != nil && cfg.Lease != "" && cfg.Namespace != "" {
		i.leases = leases.Leases(cfg.Namespace)
	}
	return i, nil
}

// settings merges the environment and the flags into etcd's configuration keys.
func (c InitConfig) settings() map[string]string {
	out := map[string]string{}
	for k, v := range c.Environment {
		if key, ok := strings.CutPrefix(k, "ETCD_"); ok {
			out[strings.ToLower(strings.ReplaceAll(key, "_", "-"))] = v
		}
	}
	for _, f := range c.EtcdFlags {
		key, value, _ := strings.Cut(strings.TrimLeft(f, "-"), "=")
		out[key] = value
	}
	if extra := memberpod.PeerURLsOf(c.AdditionalPeerURLs, out["name"]); len(extra) > 0 && out["initial-advertise-peer-urls"] != "" {
		out["initial-advertise-peer-urls"] += "," + strings.Join(extra, ",")
	}
	return out
}

// Run decides, reports and acts until the member can start, then writes the configuration.
func (i *Initializer) Run(ctx context.Context) error {
	settings := i.cfg.settings()
	dataDir := settings["data-dir"]
	i.listAside()
	// The first report learns which Etcd owns the Lease, so the first decision can read its
	// restore order.
	i.report(ctx, StartDecision{Rule: "init/started", Reason: "deciding how to start"}, "")
	for {
		data, err := datadir.Inspect(dataDir)
		if err != nil {
			// Not a verdict on the data (a read error, a lock held, a misplaced mount): never a
			// reason to set it aside. Asked again at the next poll.
			i.log.Info("The data dir could not be judged; asking again", "dir", dataDir, "error", err.Error())
			i.report(ctx, StartDecision{Rule: StartRuleDataUnreadable, Reason: fmt.Sprintf("the data dir could not be judged, retrying: %v", err)}, "")
			if !i.sleep(ctx) {
				return ctx.Err()
			}
			continue
		}
		obs := StartObservation{
			Name:             settings["name"],
			PodUID:           i.cfg.PodUID,
			PeerURL:          strings.Split(settings["initial-advertise-peer-urls"], ",")[0],
			Data:             memberlease.DataState(data.State),
			BootstrapState:   settings["initial-cluster-state"],
			BootstrapCluster: settings["initial-cluster"],
			Restore:          i.readOrder(ctx),
			BackupConfigured: i.cfg.BackupStore != nil,
			FormedBefore:     i.formedBefore(),
		}
		var leader etcdclient.MemberStatus
		leader, obs.LeaderAnswered, obs.Members = i.askCluster(ctx, obs)
		if obs.NeedsBackupCheck() {
			obs.Backup, obs.BackupDetail = i.checkBackup(ctx)
		}
		d := DecideStart(obs)
		if data.State == datadir.Corrupt {
			d.Reason += fmt.Sprintf(" (%s: %s)", data.Check, data.Reason)
		}
		i.log.Info("Start decision", "action", d.Action, "rule", d.Rule, "reason", d.Reason, "data", obs.Data)
		i.report(ctx, d, obs.Data)
		switch d.Action {
		case StartMoveAside:
			if err := i.moveAside(dataDir); err != nil {
				return err
			}
			continue
		case StartRestore:
			res, err := i.restore(ctx, dataDir, obs, d)
			if err != nil {
				i.log.Error(err, "Restore from the backup failed; trying again")
				i.report(ctx, RestoreFailed(err), obs.Data)
				if !i.sleep(ctx) {
					return ctx.Err()
				}
				continue
			}
			// The order may have been called off while the restore ran (the old cluster came
			// back): a member that starts now would be a second cluster behind the client
			// Service. Asked once more, last thing before etcd starts.
			if order := i.readOrder(ctx); !order.For(obs.Name, obs.PodUID) || order.Token != d.Token {
				i.log.Info("The restore order was called off while restoring; keeping the restored data aside", "token", d.Token)
				i.report(ctx, StartDecision{Rule: StartRuleRestoreCalledOff,
					Reason: fmt.Sprintf("the operator's order (token %s) was withdrawn while restoring: the restored data is kept aside, deciding again", d.Token)}, memberlease.DataValid)
				if err := i.moveAside(dataDir); err != nil {
					return err
				}
				continue
			}
			d.Reason += "; " + memberlease.RestoreResultPrefix + res.String()
			i.log.Info("Restored from the backup", "result", res.String(), "stoppedEarly", res.Stopped)
			i.report(ctx, d, memberlease.DataValid)
			settings["initial-cluster-token"] = d.Token
		case StartWait:
			if !i.sleep(ctx) {
				return ctx.Err()
			}
			continue
		case StartJoin:
			// Never a reason not to join: any doubt or failure joins empty, as before.
			// Only a seed made starts with its rule (every decline names another, a failure none).
			seeded := i.seed(ctx, dataDir, obs, leader)
			d.Seeded = strings.HasPrefix(seeded, string(seeding.RuleSeed)+":")
			d.Reason += "; " + seeded
			i.report(ctx, d, obs.Data)
		}
		settings["initial-cluster"] = d.InitialCluster
		settings["initial-cluster-state"] = d.ClusterState
		return writeEtcdConfig(i.cfg.ConfigFile, settings)
	}
}

func (i *Initializer) sleep(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(i.cfg.PollInterval):
		return true
	}
}

// restore rebuilds the data dir from the latest backup as the single member of a new cluster.
func (i *Initializer) restore(ctx context.Context, dataDir string, obs StartObservation, d StartDecision) (restore.Result, error) {
	store, err := i.cfg.BackupStore(ctx)
	if err != nil {
		return restore.Result{}, fmt.Errorf("opening the backup store: %w", err)
	}
	return restore.FromStore(ctx, store, i.cfg.BackupOwner, restore.Options{DataDir: dataDir, Name: obs.Name, PeerURL: obs.PeerURL, Token: d.Token, Log: i.log,
		RevisionBump: restore.DefaultRevisionBump})
}

// checkBackup asks the backup store whether it holds a backup this Etcd may start from, before a
// new cluster bootstraps: the latest full snapshot, or why there is none or no answer.
func (i *Initializer) checkBackup(ctx context.Context) (StoreBackup, string) {
	store, err := i.cfg.BackupStore(ctx)
	if err != nil {
		return BackupUnknown, fmt.Sprintf("opening the backup store: %v", err)
	}
	chain, ok, err := restore.Latest(ctx, store, i.cfg.BackupOwner)
	var shared *backup.SharedError
	switch {
	case errors.As(err, &shared):
		i.log.Info("The backup store belongs to another Etcd; its backups are never restored here", "store", store.String(), "owner", shared.Owner.Etcd)
		return BackupClaimed, err.Error()
	case err != nil:
		i.log.Info("Cannot ask the backup store for a backup; asking again", "store", store.String(), "error", err.Error())
		return BackupUnknown, err.Error()
	case !ok:
		return BackupNone, store.String() + " holds no full snapshot"
	}
	return BackupFound, fmt.Sprintf("%s: full snapshot %s, %d deltas up to revision %d", store, chain.Full.Name(), len(chain.Deltas), chain.EndRevision())
}

// RestoreFailed is the decision reported for a failed restore. A volume too small for the
// restore has a rule of its own and carries the numbers to the operator: unlike a store that
// blinked, it needs a person (a larger volume), and the Etcd's status must say so.
func RestoreFailed(err error) StartDecision {
	var space *restore.InsufficientSpaceError
	if errors.As(err, &space) {
		return StartDecision{Rule: StartRuleRestoreNoSpace,
			Reason:  err.Error() + "; the restore is tried again at every poll and succeeds once the volume has the space",
			NoSpace: &memberlease.SpaceShortage{Dir: space.Dir, Need: space.Need, Free: space.Free}}
	}
	return StartDecision{Rule: StartRuleRestoreFailed, Reason: err.Error()}
}

// askCluster asks the other members listed in the initial cluster (the operator keeps it at the
// desired members) for their status and the leader's member list.
func (i *Initializer) askCluster(ctx context.Context, obs StartObservation) (etcdclient.MemberStatus, bool, []etcdclient.Member) {
	creds, err := i.cfg.ClientFiles.Load()
	if err != nil {
		i.log.Info("Cannot load client certificates; asking no member", "error", err.Error())
		return etcdclient.MemberStatus{}, false, nil
	}
	var targets []etcdclient.Target
	asked := map[string]bool{}
	for _, entry := range strings.Split(obs.BootstrapCluster, ",") {
		name, peer, ok := strings.Cut(entry, "=")
		// A member's first URL is its name under the peer Service, where its client port is;
		// any further one is an additional peer URL (another network's), not asked.
		if !ok || name == obs.Name || asked[name] {
			continue
		}
		asked[name] = true
		u, err := url.Parse(peer)
		if err != nil || u.Hostname() == "" {
			continue
		}
		targets = append(targets, etcdclient.Target{
			Name: name, Address: net.JoinHostPort(u.Hostname(), strconv.Itoa(i.cfg.ClientPort)), ServerName: u.Hostname(),
		})
	}
	if len(targets) == 0 {
		return etcdclient.MemberStatus{}, false, nil
	}
	pool := etcdclient.NewPool(etcdclient.Options{})
	defer pool.Close()
	// The leader's answer decides; members being replaced at the same time (a rollout's batch)
	// would otherwise hold this start for a dial timeout each round.
	leader, members, ok, err := pool.LeaderMemberList(ctx, "init", creds, targets)
	if !ok {
		if err != nil {
			i.log.V(1).Info("No leader answered", "error", err.Error())
		}
		return etcdclient.MemberStatus{}, false, nil
	}
	return leader, true, members
}

// moveAside renames the data dir aside; data is never deleted.
func (i *Initializer) moveAside(dataDir string) error {
	aside, err := datadir.MoveAside(dataDir, i.now())
	if err != nil {
		return fmt.Errorf("keeping data dir %s aside: %w", dataDir, err)
	}
	i.log.Info("Data dir kept aside", "from", dataDir, "to", aside)
	i.listAside()
	return nil
}

// listAside lists what is kept aside next to the data dir.
func (i *Initializer) listAside() {
	i.aside, i.asideErr = datadir.ListAside(i.dataDir)
	if i.asideErr != nil {
		i.log.Info("Cannot list the data kept aside; not reporting it", "dir", i.dataDir, "error", i.asideErr.Error())
	}
}

// formedBefore tells whether data was ever kept aside next to the data dir: a cluster formed
// here. An error listing them counts as kept aside: it only stops a bootstrap.
func (i *Initializer) formedBefore() bool { return i.asideErr != nil || len(i.aside) > 0 }

// dataAside lists what is kept aside next to the data dir, for the operator to report (the
// Etcd's status.dataAside and a metric); ok is false when it cannot be listed now, and then the
// report leaves the annotation as it was.
func (i *Initializer) dataAside() (memberlease.DataAside, bool) {
	if i.asideErr != nil {
		return memberlease.DataAside{}, false
	}
	all := make([]memberlease.Aside, 0, len(i.aside))
	for _, a := range i.aside {
		all = append(all, memberlease.Aside{Path: a.Path, Time: a.Time, Bytes: a.Bytes})
	}
	return memberlease.NewDataAside(all), true
}

// readOrder reads the operator's restore order from the status of the Etcd owning the Lease;
// nil when there is none or it cannot be read (then nothing is restored: the next poll reads it
// again).
func (i *Initializer) readOrder(ctx context.Context) *druidv1alpha1.RecoveryRequest {
	if i.etcds == nil || i.etcdName == "" {
		return nil
	}
	etcd := &druidv1alpha1.Etcd{}
	if err := i.etcds.Get(ctx, client.ObjectKey{Namespace: i.cfg.Namespace, Name: i.etcdName}, etcd); err != nil {
		i.log.Info("Cannot read the Etcd's restore order", "etcd", i.etcdName, "error", err.Error())
		return nil
	}
	return etcd.Status.Recovery
}

// report writes the decision, the evidence behind it and what is kept aside next to the data dir
// onto the member's Lease, in one merge patch; failures are only logged, since the decision does
// not depend on them.
func (i *Initializer) report(ctx context.Context, d StartDecision, data memberlease.DataState) {
	if i.leases == nil {
		return
	}
	lost := any(nil)
	if d.Rule == StartRuleDataLost {
		lost = memberlease.FormatDataLostMemberID(d.LostMemberID)
	}
	evidence := any(nil)
	if data != "" && i.cfg.PodUID != "" {
		evidence = memberlease.StartReport{PodUID: i.cfg.PodUID, Rule: d.Rule, Data: data, NoSpace: d.NoSpace, Seeded: d.Seeded}.Annotation()
	}
	annotations := map[string]any{
		memberlease.AnnotationStartDecision:    memberlease.FormatStartDecision(d.Rule, d.Reason),
		memberlease.AnnotationDataLostMemberID: lost,
		memberlease.AnnotationStartReport:      evidence,
	}
	if aside, ok := i.dataAside(); ok {
		annotations[memberlease.AnnotationDataAside] = aside.Annotation()
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		return
	}
	lease, err := i.leases.Patch(ctx, i.cfg.Lease, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		i.log.Info("Could not report the start decision on the Lease", "error", err.Error())
		return
	}
	for _, o := range lease.OwnerReferences {
		if o.Kind == "Etcd" && o.Controller != nil && *o.Controller {
			i.etcdName = o.Name
		}
	}
}

// tlsKeys are etcd settings that live under client-transport-security (and, with a "peer-"
// prefix, under peer-transport-security) in a configuration file.
var tlsKeys = map[string]bool{
	"cert-file": true, "key-file": true, "client-cert-auth": true, "trusted-ca-file": true,
	"auto-tls": true, "skip-client-san-verification": true, "client-cert-file": true, "client-key-file": true,
}

// stringKeys are settings etcd's configuration file holds as strings even when the value looks
// like a number: auto-compaction-retention "1000" (revisions) or "5" (hours) must stay a string,
// or etcd refuses the file.
var stringKeys = map[string]bool{"auto-compaction-retention": true}

// writeEtcdConfig writes settings as etcd's YAML configuration file, atomically.
func writeEtcdConfig(path string, settings map[string]string) error {
	doc := map[string]any{}
	clientTLS, peerTLS := map[string]any{}, map[string]any{}
	for k, v := range settings {
		if v == "" {
			continue
		}
		var value any = v
		if !stringKeys[k] {
			value = typed(v)
		}
		switch {
		case tlsKeys[k]:
			clientTLS[k] = value
		case strings.HasPrefix(k, "peer-") && tlsKeys[strings.TrimPrefix(k, "peer-")]:
			peerTLS[strings.TrimPrefix(k, "peer-")] = value
		default:
			doc[k] = value
		}
	}
	if len(clientTLS) > 0 {
		doc["client-transport-security"] = clientTLS
	}
	if len(peerTLS) > 0 {
		doc["peer-transport-security"] = peerTLS
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return fmt.Errorf("encoding etcd configuration: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("creating the configuration directory: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, out, 0o644); err != nil {
		return fmt.Errorf("writing etcd configuration: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing etcd configuration: %w", err)
	}
	return nil
}

// typed turns a flag value into the YAML type etcd's configuration expects: booleans and
// integers are not strings there.
func typed(v string) any {
	switch v {
	case "true":
		return true
	case "false":
		return false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return n
	}
	return v
}
