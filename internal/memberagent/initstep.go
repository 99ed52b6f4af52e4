package memberagent

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	"sigs.k8s.io/yaml"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	"github.com/etcd-conductor/etcd-conductor/internal/backupstore"
	"github.com/etcd-conductor/etcd-conductor/internal/restore"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

const (
	// AnnotationStartDecision on a member Lease holds the init step's last decision,
	// "<rule>: <reason>", for people and for the operator.
	AnnotationStartDecision = "etcd-conductor.io/start-decision"
	// AnnotationDataLostMemberID names (hex) the member ID whose data the pod no longer has; the
	// operator replaces exactly that member.
	AnnotationDataLostMemberID = "etcd-conductor.io/data-lost-member-id"
	// AnnotationRestore on a member Lease is the operator's request that this member restore the
	// cluster from the backup (a RestoreRequest in JSON); the init step reads it from the Lease
	// it patches.
	AnnotationRestore = "etcd-conductor.io/restore-from-backup"
	// StartRuleRestoreFailed is reported when a restore was attempted and failed; the init step
	// tries again at the next poll.
	StartRuleRestoreFailed = "restore/failed"

	DefaultInitPollInterval = 2 * time.Second
)

// InitConfig is what `member-agent init` is given.
type InitConfig struct {
	// ConfigFile is where the etcd configuration is written (etcd runs with --config-file).
	ConfigFile string
	// ClientPort is the members' client port, to ask the other members.
	ClientPort int
	CAFile     string
	CertFile   string
	KeyFile    string
	// Lease and Namespace name this member's Lease, where decisions are reported.
	Lease     string
	Namespace string
	// PollInterval is how often a waiting init step asks again.
	PollInterval time.Duration
	// EtcdFlags are the member's own etcd flags (--name=..., --listen-client-urls=..., ...);
	// Environment holds the shared ETCD_* settings from the ConfigMap. Flags win.
	EtcdFlags   []string
	Environment map[string]string
	// BackupStore opens the Etcd's backup store; nil when the pod has none configured (then the
	// member never restores).
	BackupStore func(context.Context) (backupstore.Store, error)
}

// Initializer decides how the member starts and writes its etcd configuration.
type Initializer struct {
	cfg    InitConfig
	leases coordinationv1client.LeaseInterface
	log    logr.Logger
	now    func() time.Time
	// restoreRequest is the operator's request last read from the Lease.
	restoreRequest *RestoreRequest
}

// NewInitializer checks cfg; leases may be nil (no reporting).
func NewInitializer(cfg InitConfig, leases coordinationv1client.LeasesGetter, log logr.Logger) (*Initializer, error) {
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultInitPollInterval
	}
	var errs []error
	for _, f := range []struct{ flag, value string }{
		{"config-file", cfg.ConfigFile}, {"ca-file", cfg.CAFile}, {"cert-file", cfg.CertFile}, {"key-file", cfg.KeyFile},
	} {
		if f.value == "" {
			errs = append(errs, fmt.Errorf("--%s is required", f.flag))
		}
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
	i := &Initializer{cfg: cfg, log: log, now: time.Now}
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
	return out
}

// Run decides, reports and acts until the member can start, then writes the configuration.
func (i *Initializer) Run(ctx context.Context) error {
	settings := i.cfg.settings()
	dataDir := settings["data-dir"]
	for {
		obs := StartObservation{
			Name:             settings["name"],
			PeerURL:          strings.Split(settings["initial-advertise-peer-urls"], ",")[0],
			Data:             InspectDataDir(dataDir),
			BootstrapState:   settings["initial-cluster-state"],
			BootstrapCluster: settings["initial-cluster"],
			Restore:          i.restoreRequest,
			BackupConfigured: i.cfg.BackupStore != nil,
		}
		obs.LeaderAnswered, obs.Members = i.askCluster(ctx, obs)
		d := DecideStart(obs)
		i.log.Info("Start decision", "action", d.Action, "rule", d.Rule, "reason", d.Reason, "data", obs.Data)
		i.report(ctx, d)
		switch d.Action {
		case StartMoveAside:
			aside := fmt.Sprintf("%s.aside-%d", dataDir, i.now().Unix())
			if err := os.Rename(dataDir, aside); err != nil {
				return fmt.Errorf("moving data dir %s aside to %s: %w", dataDir, aside, err)
			}
			i.log.Info("Data dir kept aside", "from", dataDir, "to", aside)
			continue
		case StartRestore:
			res, err := i.restore(ctx, dataDir, obs, d)
			if err != nil {
				i.log.Error(err, "Restore from the backup failed; trying again")
				i.report(ctx, StartDecision{Rule: StartRuleRestoreFailed, Reason: err.Error()})
				if !i.sleep(ctx) {
					return ctx.Err()
				}
				continue
			}
			d.Reason += "; restored: " + res.String()
			i.log.Info("Restored from the backup", "result", res.String(), "stoppedEarly", res.Stopped)
			i.report(ctx, d)
			settings["initial-cluster-token"] = d.Token
		case StartWait:
			if !i.sleep(ctx) {
				return ctx.Err()
			}
			continue
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
	return restore.FromStore(ctx, store, restore.Options{DataDir: dataDir, Name: obs.Name, PeerURL: obs.PeerURL, Token: d.Token, Log: i.log})
}

// askCluster asks the other members listed in the initial cluster (the operator keeps it at the
// desired members) for their status and the leader's member list.
func (i *Initializer) askCluster(ctx context.Context, obs StartObservation) (bool, []etcdclient.Member) {
	creds, err := conductortls.LoadFiles(i.cfg.CAFile, i.cfg.CertFile, i.cfg.KeyFile)
	if err != nil {
		i.log.Info("Cannot load client certificates; asking no member", "error", err.Error())
		return false, nil
	}
	var targets []etcdclient.Target
	for _, entry := range strings.Split(obs.BootstrapCluster, ",") {
		name, peer, ok := strings.Cut(entry, "=")
		if !ok || name == obs.Name {
			continue
		}
		u, err := url.Parse(peer)
		if err != nil || u.Hostname() == "" {
			continue
		}
		targets = append(targets, etcdclient.Target{
			Name: name, Address: net.JoinHostPort(u.Hostname(), strconv.Itoa(i.cfg.ClientPort)), ServerName: u.Hostname(),
		})
	}
	if len(targets) == 0 {
		return false, nil
	}
	pool := etcdclient.NewPool(etcdclient.Options{})
	defer pool.Close()
	// The leader's answer decides; members being replaced at the same time (a rollout's batch)
	// would otherwise hold this start for a dial timeout each round.
	_, members, ok, err := pool.LeaderMemberList(ctx, "init", creds, targets)
	if !ok {
		if err != nil {
			i.log.V(1).Info("No leader answered", "error", err.Error())
		}
		return false, nil
	}
	return true, members
}

// report writes the decision onto the member's Lease; failures are only logged, since the
// decision does not depend on them.
func (i *Initializer) report(ctx context.Context, d StartDecision) {
	if i.leases == nil {
		return
	}
	lost := any(nil)
	if d.Rule == StartRuleDataLost {
		lost = strconv.FormatUint(d.LostMemberID, 16)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		AnnotationStartDecision:    d.Rule + ": " + d.Reason,
		AnnotationDataLostMemberID: lost,
	}}})
	if err != nil {
		return
	}
	lease, err := i.leases.Patch(ctx, i.cfg.Lease, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		i.log.Info("Could not report the start decision on the Lease", "error", err.Error())
		return
	}
	i.restoreRequest = nil
	if raw := lease.Annotations[AnnotationRestore]; raw != "" {
		var r RestoreRequest
		if err := json.Unmarshal([]byte(raw), &r); err != nil {
			i.log.Info("Ignoring an unreadable restore request on the Lease", "value", raw, "error", err.Error())
			return
		}
		i.restoreRequest = &r
	}
}

// bboltMagic is the magic number of bbolt's meta pages, which start at byte 16 of the database.
const bboltMagic = 0xED0CDAED

// InspectDataDir tells whether dir holds a member's data: a WAL file and a bbolt database.
func InspectDataDir(dir string) DataState {
	member := filepath.Join(dir, "member")
	if _, err := os.Stat(member); errors.Is(err, os.ErrNotExist) {
		return DataEmpty
	}
	wals, err := filepath.Glob(filepath.Join(member, "wal", "*.wal"))
	if err != nil || len(wals) == 0 {
		return DataCorrupt
	}
	f, err := os.Open(filepath.Join(member, "snap", "db"))
	if err != nil {
		return DataCorrupt
	}
	defer f.Close()
	header := make([]byte, 20)
	if _, err := io.ReadFull(f, header); err != nil || binary.LittleEndian.Uint32(header[16:20]) != bboltMagic {
		return DataCorrupt
	}
	return DataValid
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
