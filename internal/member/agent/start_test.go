package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/member/datadir"
)

const selfPeer = "https://etcd-2.etcd-peer.ns.svc:2380"

func started(name string, id uint64) etcdclient.Member {
	return etcdclient.Member{ID: id, Name: name, PeerURLs: []string{"https://" + name + ".etcd-peer.ns.svc:2380"},
		ClientURLs: []string{"https://" + name + ".etcd-peer.ns.svc:2379"}}
}

func TestDecideStart(t *testing.T) {
	two := []etcdclient.Member{started("etcd-0", 1), started("etcd-1", 2)}
	addedLearner := append(append([]etcdclient.Member{}, two...), etcdclient.Member{ID: 3, PeerURLs: []string{selfPeer}, IsLearner: true})
	lostSelf := append(append([]etcdclient.Member{}, two...), started("etcd-2", 3))
	for _, tc := range []struct {
		name    string
		o       StartObservation
		action  StartAction
		rule    string
		state   string
		cluster string
	}{
		{name: "first bootstrap: no leader, recorded new",
			o:      StartObservation{Data: memberlease.DataEmpty, BootstrapState: "new", BootstrapCluster: "etcd-0=a,etcd-1=b,etcd-2=c"},
			action: StartNew, rule: StartRuleBootstrap, state: "new", cluster: "etcd-0=a,etcd-1=b,etcd-2=c"},
		{name: "new cluster, store holds a backup: wait for the operator's order, never empty",
			o:      StartObservation{Data: memberlease.DataEmpty, BootstrapState: "new", BackupConfigured: true, Backup: BackupFound},
			action: StartWait, rule: StartRuleBootstrapFromBackup},
		{name: "new cluster, store unreachable: wait, a backup may be there",
			o:      StartObservation{Data: memberlease.DataEmpty, BootstrapState: "new", BackupConfigured: true, Backup: BackupUnknown},
			action: StartWait, rule: StartRuleBackupUnknown},
		{name: "new cluster, store not asked: wait as if unreachable",
			o:      StartObservation{Data: memberlease.DataEmpty, BootstrapState: "new", BackupConfigured: true},
			action: StartWait, rule: StartRuleBackupUnknown},
		{name: "new cluster, empty store: bootstrap as before",
			o:      StartObservation{Data: memberlease.DataEmpty, BootstrapState: "new", BackupConfigured: true, Backup: BackupNone},
			action: StartNew, rule: StartRuleBootstrap, state: "new"},
		{name: "new cluster, store claimed by another Etcd: bootstrap empty, never restore its backups",
			o:      StartObservation{Data: memberlease.DataEmpty, BootstrapState: "new", BackupConfigured: true, Backup: BackupClaimed},
			action: StartNew, rule: StartRuleBootstrap, state: "new"},
		{name: "store holds a backup, but the cluster formed before: never restore unordered",
			o:      StartObservation{Data: memberlease.DataEmpty, BootstrapState: "existing", BackupConfigured: true, Backup: BackupFound},
			action: StartWait, rule: StartRuleClusterUnknown},
		{name: "store holds a backup, but a leader answers: wait to be added",
			o:      StartObservation{Data: memberlease.DataEmpty, LeaderAnswered: true, Members: two, BootstrapState: "new", BackupConfigured: true, Backup: BackupFound},
			action: StartWait, rule: StartRuleNotAdded},
		{name: "store holds a backup, valid data: restart from it",
			o:      StartObservation{Data: memberlease.DataValid, BootstrapState: "new", BackupConfigured: true, Backup: BackupFound},
			action: StartAsIs, rule: StartRuleRestart},
		{name: "no data, no leader, cluster formed before: never new",
			o:      StartObservation{Data: memberlease.DataEmpty, BootstrapState: "existing"},
			action: StartWait, rule: StartRuleClusterUnknown},
		{name: "valid data restarts as is, whatever the cluster says",
			o:      StartObservation{Data: memberlease.DataValid, BootstrapState: "existing"},
			action: StartAsIs, rule: StartRuleRestart, state: "existing"},
		{name: "valid data, listed and started: restart",
			o:      StartObservation{Data: memberlease.DataValid, LeaderAnswered: true, Members: lostSelf},
			action: StartAsIs, rule: StartRuleRestart, state: "existing"},
		{name: "added as learner: join with the current members",
			o:      StartObservation{Data: memberlease.DataEmpty, LeaderAnswered: true, Members: addedLearner, BootstrapState: "existing"},
			action: StartJoin, rule: StartRuleJoin, state: "existing",
			cluster: "etcd-0=https://etcd-0.etcd-peer.ns.svc:2380,etcd-1=https://etcd-1.etcd-peer.ns.svc:2380,etcd-2=" + selfPeer},
		{name: "bootstrap member that never started joins even if the state says new",
			o:      StartObservation{Data: memberlease.DataEmpty, LeaderAnswered: true, BootstrapState: "new", Members: append(append([]etcdclient.Member{}, two...), etcdclient.Member{ID: 3, Name: "etcd-2", PeerURLs: []string{selfPeer}})},
			action: StartJoin, rule: StartRuleJoin, state: "existing"},
		{name: "not in the member list: wait to be added, never new next to a live cluster",
			o:      StartObservation{Data: memberlease.DataEmpty, LeaderAnswered: true, Members: two, BootstrapState: "new"},
			action: StartWait, rule: StartRuleNotAdded},
		{name: "listed, has run, data gone: wait for replacement, naming the ID",
			o:      StartObservation{Data: memberlease.DataEmpty, LeaderAnswered: true, Members: lostSelf},
			action: StartWait, rule: StartRuleDataLost},
		{name: "corrupt data is kept aside",
			o:      StartObservation{Data: memberlease.DataCorrupt, LeaderAnswered: true, Members: lostSelf},
			action: StartMoveAside, rule: StartRuleCorrupt},
		{name: "asked to restore, no data, no leader: restore as a new single-member cluster",
			o:      StartObservation{Data: memberlease.DataEmpty, BootstrapState: "existing", BackupConfigured: true, PodUID: "uid-2", Restore: &druidv1alpha1.RecoveryRequest{Member: "etcd-2", PodUID: "uid-2", Token: "t2"}},
			action: StartRestore, rule: StartRuleRestore, state: "new", cluster: "etcd-2=" + selfPeer},
		{name: "asked to restore without a backup store: wait",
			o:      StartObservation{Data: memberlease.DataEmpty, BootstrapState: "existing", PodUID: "uid-2", Restore: &druidv1alpha1.RecoveryRequest{Member: "etcd-2", PodUID: "uid-2", Token: "t2"}},
			action: StartWait, rule: StartRuleRestoreNoStore},
		{name: "a restore request for another member is ignored",
			o:      StartObservation{Data: memberlease.DataEmpty, BootstrapState: "existing", BackupConfigured: true, PodUID: "uid-2", Restore: &druidv1alpha1.RecoveryRequest{Member: "etcd-1", PodUID: "uid-2", Token: "t2"}},
			action: StartWait, rule: StartRuleClusterUnknown},
		{name: "a restore order for an earlier incarnation of this pod is ignored",
			o:      StartObservation{Data: memberlease.DataEmpty, BootstrapState: "existing", BackupConfigured: true, PodUID: "uid-3", Restore: &druidv1alpha1.RecoveryRequest{Member: "etcd-2", PodUID: "uid-2", Token: "t2"}},
			action: StartWait, rule: StartRuleClusterUnknown},
		{name: "no data, no leader, recorded new but data was kept aside here before: never new",
			o:      StartObservation{Data: memberlease.DataEmpty, BootstrapState: "new", BootstrapCluster: "etcd-0=a,etcd-1=b,etcd-2=c", FormedBefore: true},
			action: StartWait, rule: StartRuleClusterUnknown},
		{name: "asked to restore but a leader answers: join instead",
			o:      StartObservation{Data: memberlease.DataEmpty, LeaderAnswered: true, Members: addedLearner, BackupConfigured: true, PodUID: "uid-2", Restore: &druidv1alpha1.RecoveryRequest{Member: "etcd-2", PodUID: "uid-2", Token: "t2"}},
			action: StartJoin, rule: StartRuleJoin},
		{name: "asked to restore with valid data: restart, never restore over data",
			o:      StartObservation{Data: memberlease.DataValid, BootstrapState: "existing", BackupConfigured: true, PodUID: "uid-2", Restore: &druidv1alpha1.RecoveryRequest{Member: "etcd-2", PodUID: "uid-2", Token: "t2"}},
			action: StartAsIs, rule: StartRuleRestart},
		{name: "asked to restore with corrupt data: keep it aside first",
			o:      StartObservation{Data: memberlease.DataCorrupt, BootstrapState: "existing", BackupConfigured: true, PodUID: "uid-2", Restore: &druidv1alpha1.RecoveryRequest{Member: "etcd-2", PodUID: "uid-2", Token: "t2"}},
			action: StartMoveAside, rule: StartRuleCorrupt},
		{name: "data of a removed member is kept aside",
			o:      StartObservation{Data: memberlease.DataValid, LeaderAnswered: true, Members: two},
			action: StartMoveAside, rule: StartRuleRemovedMember},
		{name: "data from an earlier member of the same name is kept aside",
			o:      StartObservation{Data: memberlease.DataValid, LeaderAnswered: true, Members: addedLearner},
			action: StartMoveAside, rule: StartRuleStaleData},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Name, tc.o.PeerURL = "etcd-2", selfPeer
			d := DecideStart(tc.o)
			if d.Action != tc.action || d.Rule != tc.rule {
				t.Fatalf("got %s [%s] %q, want %s [%s]", d.Action, d.Rule, d.Reason, tc.action, tc.rule)
			}
			if tc.state != "" && d.ClusterState != tc.state {
				t.Errorf("state %q, want %q", d.ClusterState, tc.state)
			}
			if tc.cluster != "" && d.InitialCluster != tc.cluster {
				t.Errorf("initial cluster %q, want %q", d.InitialCluster, tc.cluster)
			}
			if d.Rule == StartRuleDataLost && d.LostMemberID != 3 {
				t.Errorf("lost member ID %x, want 3", d.LostMemberID)
			}
		})
	}
}

// TestDecideStartNeverRestoresUnsafely walks every combination of the inputs that matter: a
// restore happens only without data, with no leader answering, when asked by name, with a store;
// and never leaves data behind (move aside first).
func TestDecideStartNeverRestoresUnsafely(t *testing.T) {
	lists := map[string][]etcdclient.Member{
		"none":    nil,
		"others":  {started("etcd-0", 1), started("etcd-1", 2)},
		"self":    {started("etcd-0", 1), started("etcd-2", 3)},
		"learner": {started("etcd-0", 1), {ID: 3, PeerURLs: []string{selfPeer}, IsLearner: true}},
	}
	requests := map[string]*druidv1alpha1.RecoveryRequest{
		"none": nil, "self": {Member: "etcd-2", PodUID: "uid-2", Token: "t"}, "other": {Member: "etcd-0", PodUID: "uid-2", Token: "t"},
		"no-token": {Member: "etcd-2", PodUID: "uid-2"}, "earlier-pod": {Member: "etcd-2", PodUID: "uid-1", Token: "t"},
		"no-pod": {Member: "etcd-2", Token: "t"},
	}
	n := 0
	for _, data := range []memberlease.DataState{memberlease.DataEmpty, memberlease.DataValid, memberlease.DataCorrupt} {
		for _, leader := range []bool{false, true} {
			for ln, members := range lists {
				for rn, req := range requests {
					for _, store := range []bool{false, true} {
						for _, state := range []string{"new", "existing", "new-formed-before"} {
							for _, backup := range []StoreBackup{BackupUnchecked, BackupNone, BackupClaimed, BackupFound, BackupUnknown} {
								n++
								o := StartObservation{Name: "etcd-2", PodUID: "uid-2", PeerURL: selfPeer, Data: data, LeaderAnswered: leader, Members: members,
									Restore: req, BackupConfigured: store, BootstrapState: strings.TrimSuffix(state, "-formed-before"),
									FormedBefore: strings.HasSuffix(state, "-formed-before"), Backup: backup}
								d := DecideStart(o)
								where := fmt.Sprintf("data=%s leader=%v members=%s request=%s store=%v state=%s backup=%q: %s [%s]", data, leader, ln, rn, store, state, backup, d.Action, d.Rule)
								// A new cluster never bootstraps empty beside a backup that exists or
								// may exist (found, unknown, or not asked).
								if d.Action == StartNew && store && backup != BackupNone && backup != BackupClaimed {
									t.Errorf("bootstrapped empty beside a backup: %s", where)
								}
								if d.Rule == StartRuleBootstrapFromBackup && (data != memberlease.DataEmpty || leader || state != "new" || !store || backup != BackupFound) {
									t.Errorf("waits for a bootstrap from the backup where none may happen: %s", where)
								}
								if o.NeedsBackupCheck() != (store && data == memberlease.DataEmpty && !leader && rn != "self" && state == "new") {
									t.Errorf("NeedsBackupCheck %v: %s", o.NeedsBackupCheck(), where)
								}
								if d.Action == StartRestore {
									if data != memberlease.DataEmpty || leader || rn != "self" || !store {
										t.Errorf("restored unsafely: %s", where)
									}
									if d.Token != "t" || d.ClusterState != "new" || d.InitialCluster != "etcd-2="+selfPeer {
										t.Errorf("restore not as a single-member cluster with the new token: %s %+v", where, d)
									}
								}
								if data == memberlease.DataEmpty && !leader && rn == "self" && store && d.Action != StartRestore {
									t.Errorf("asked to restore and safe to, but did not: %s", where)
								}
								if d.Action == StartNew && (leader || state != "new" || o.FormedBefore) {
									t.Errorf("new cluster next to a leader or after the cluster formed: %s", where)
								}
							}
						}
					}
				}
			}
		}
	}
	t.Logf("%d combinations", n)
}

// TestReportedDataStatesAreDatadirVerdicts guards the init step's conversion of a datadir verdict
// into what its report carries: the operator reads the report's spelling.
func TestReportedDataStatesAreDatadirVerdicts(t *testing.T) {
	tests := []struct {
		verdict datadir.State
		want    memberlease.DataState
	}{
		{datadir.Empty, memberlease.DataEmpty},
		{datadir.Valid, memberlease.DataValid},
		{datadir.Corrupt, memberlease.DataCorrupt},
	}
	for _, tt := range tests {
		t.Run(string(tt.verdict), func(t *testing.T) {
			if got := memberlease.DataState(tt.verdict); got != tt.want {
				t.Fatalf("verdict %q reported as %q, want %q", tt.verdict, got, tt.want)
			}
		})
	}
}

func TestWriteEtcdConfig(t *testing.T) {
	cfg := InitConfig{
		Environment: map[string]string{"ETCD_DATA_DIR": "/d", "ETCD_CERT_FILE": "/s.crt", "ETCD_PEER_CLIENT_CERT_AUTH": "true",
			"ETCD_PEER_SKIP_CLIENT_SAN_VERIFICATION": "true", "ETCD_SNAPSHOT_COUNT": "75000", "ETCD_NAME": "ignored",
			"ETCD_AUTO_COMPACTION_MODE": "revision", "ETCD_AUTO_COMPACTION_RETENTION": "1000"},
		EtcdFlags: []string{"--name=etcd-0", "--listen-client-urls=https://10.0.0.1:2379"},
	}
	path := filepath.Join(t.TempDir(), "etcd.conf.yaml")
	if err := writeEtcdConfig(path, cfg.settings()); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if doc["name"] != "etcd-0" || doc["data-dir"] != "/d" || doc["snapshot-count"] != float64(75000) {
		t.Errorf("flags must win over the environment and numbers stay numbers: %s", raw)
	}
	if doc["auto-compaction-retention"] != "1000" {
		t.Errorf("auto-compaction-retention must stay a string (etcd's file type), got %#v: %s", doc["auto-compaction-retention"], raw)
	}
	peer, _ := doc["peer-transport-security"].(map[string]any)
	client, _ := doc["client-transport-security"].(map[string]any)
	if peer["client-cert-auth"] != true || peer["skip-client-san-verification"] != true || client["cert-file"] != "/s.crt" {
		t.Errorf("TLS settings not nested: %s", raw)
	}
	if strings.Contains(string(raw), "peer-client-cert-auth") {
		t.Errorf("peer TLS key left at the top level: %s", raw)
	}
}

func mustMkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o700); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A member advertises its own additional peer URLs after its name under the peer Service; the
// others' are not its own. The first URL stays the one the start decision knows the member by.
func TestSettingsAdvertiseOwnAdditionalPeerURLs(t *testing.T) {
	const extras = "p-etcd-0=https://10.0.0.1:2380,p-etcd-1=https://10.0.0.2:2380,p-etcd-0=https://m0.example:2380"
	for _, tt := range []struct {
		name, member, extras, want string
	}{
		{"none given", "p-etcd-0", "", "https://etcd-0.etcd-peer.ns.svc:2380"},
		{"its own, in order", "p-etcd-0", extras, "https://etcd-0.etcd-peer.ns.svc:2380,https://10.0.0.1:2380,https://m0.example:2380"},
		{"another member's only", "p-etcd-2", extras, "https://etcd-0.etcd-peer.ns.svc:2380"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := InitConfig{
				EtcdFlags:          []string{"--name=" + tt.member, "--initial-advertise-peer-urls=https://etcd-0.etcd-peer.ns.svc:2380"},
				AdditionalPeerURLs: tt.extras,
			}
			if got := cfg.settings()["initial-advertise-peer-urls"]; got != tt.want {
				t.Errorf("initial-advertise-peer-urls = %s, want %s", got, tt.want)
			}
		})
	}
}
