package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/defrag"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/membership"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/roles"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/rollout"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/ruleid"
	defragctl "github.com/etcd-conductor/etcd-conductor/internal/operator/controller/defrag"
	membershipctl "github.com/etcd-conductor/etcd-conductor/internal/operator/controller/membership"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/controller/ondelete"
	recoveryctl "github.com/etcd-conductor/etcd-conductor/internal/operator/controller/recovery"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/memberaccess"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/plancmd"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

var update = flag.Bool("update", false, "rewrite testdata/plan/*.want.json from the current output")

// farFuture is the clock of the fixture tests: every Lease in testdata is long expired by then,
// so a fixture that forgets --now shows up as a different role source.
func farFuture() time.Time { return time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC) }

// Each fixture is a state file (NAME.yaml or NAME.json) with optional siblings:
// NAME.members.json (passed as --member-status), NAME.args (extra flags), and either
// NAME.want.json (the expected output) or NAME.want.err (text the one-line error must contain;
// the exit code must be 2).
func TestPlanFixtures(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "plan", "*"))
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, f := range files {
		if isSibling(f) {
			continue
		}
		states = append(states, f)
	}
	if len(states) < 10 {
		t.Fatalf("found only %d fixtures in testdata/plan", len(states))
	}
	for _, state := range states {
		base := strings.TrimSuffix(state, filepath.Ext(state))
		t.Run(filepath.Base(base), func(t *testing.T) {
			args := []string{"-f", state}
			if _, err := os.Stat(base + ".members.json"); err == nil {
				args = append(args, "--member-status", base+".members.json")
			}
			if extra, err := os.ReadFile(base + ".args"); err == nil {
				args = append(args, strings.Fields(string(extra))...)
			}
			var stdout, stderr bytes.Buffer
			code := planCommand(asJSON(args), strings.NewReader(""), &stdout, &stderr, farFuture)

			if wantErr, err := os.ReadFile(base + ".want.err"); err == nil {
				assertOneLineError(t, code, stdout.String(), stderr.String(), strings.TrimSpace(string(wantErr)))
				return
			}
			if code != 0 || stderr.Len() != 0 {
				t.Fatalf("exit %d, stderr %q", code, stderr.String())
			}
			got := decodeOneObject(t, stdout.Bytes())
			wantPath := base + ".want.json"
			if *update {
				if err := os.WriteFile(wantPath, stdout.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			wantData, err := os.ReadFile(wantPath)
			if err != nil {
				t.Fatalf("no expected output (run go test -run TestPlanFixtures -update and review it): %v", err)
			}
			if want := decodeOneObject(t, wantData); !reflect.DeepEqual(got, want) {
				t.Fatalf("output differs from %s\ngot:\n%s", wantPath, stdout.String())
			}
		})
	}
}

func isSibling(path string) bool {
	for _, suffix := range []string{".members.json", ".want.json", ".want.err", ".args"} {
		if strings.HasSuffix(path, suffix) {
			return true
		}
	}
	return false
}

// decodeOneObject checks the output is exactly one JSON object and returns it.
func decodeOneObject(t *testing.T, data []byte) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		t.Fatalf("output is not a JSON object: %v\n%s", err, data)
	}
	if dec.More() {
		t.Fatalf("output holds more than one JSON value:\n%s", data)
	}
	for _, key := range []string{"action", "pods", "rule", "reason", "roleSource"} {
		if _, ok := obj[key]; !ok {
			t.Errorf("output lacks %q", key)
		}
	}
	return obj
}

func assertOneLineError(t *testing.T, code int, stdout, stderr, want string) {
	t.Helper()
	if code != 2 {
		t.Errorf("exit code %d, want 2", code)
	}
	if stdout != "" {
		t.Errorf("stdout %q, want nothing", stdout)
	}
	if strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") {
		t.Errorf("stderr is not exactly one line: %q", stderr)
	}
	if !strings.HasPrefix(stderr, "etcd-conductor plan: ") || !strings.Contains(stderr, want) {
		t.Errorf("stderr %q, want a plan error containing %q", stderr, want)
	}
}

func TestPlanUsageErrors(t *testing.T) {
	fixture := filepath.Join("testdata", "plan", "single-node.yaml")
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"missing file", []string{"-f", filepath.Join("testdata", "plan", "does-not-exist.yaml")}, "reading state: open testdata/plan/does-not-exist.yaml: no such file or directory"},
		{"missing member status file", []string{"-f", fixture, "--member-status", "nope.json"}, "reading member status: open nope.json"},
		{"no -f", nil, "-f STATE or --etcd NAME is required"},
		{"both -f and --etcd", []string{"-f", fixture, "--etcd", "etcd-main"}, "-f and --etcd exclude each other"},
		{"-n without --etcd", []string{"-n", "shoot"}, "--kubeconfig and -n need --etcd NAME"},
		{"kubeconfig missing", []string{"--etcd", "etcd-main", "--kubeconfig", filepath.Join("testdata", "plan", "no-kubeconfig")}, "loading kubeconfig:"},
		{"unknown flag", []string{"-f", fixture, "--bogus"}, "flag provided but not defined: -bogus"},
		{"stray argument", []string{"-f", fixture, "extra"}, `unexpected arguments ["extra"]`},
		{"bad --now", []string{"-f", fixture, "--now", "yesterday"}, "--now: parsing time"},
		{"empty stdin", []string{"-f", "-"}, "state is empty"},
		{"TLS flags incomplete", []string{"--etcd", "etcd-main", "--etcd-ca", "ca.crt"}, "--etcd-ca, --etcd-cert and --etcd-key go together"},
		{"asking members in file mode", []string{"-f", fixture, "--etcd-ca", "a", "--etcd-cert", "b", "--etcd-key", "c"}, "asking the members needs live mode (--etcd NAME)"},
		{"member address without TLS", []string{"--etcd", "etcd-main", "--member-address", "etcd-main-0=127.0.0.1:2379"}, "--member-address needs --etcd-ca, --etcd-cert and --etcd-key"},
		{"plaintext with TLS files", []string{"--etcd", "etcd-main", "--etcd-plaintext", "--etcd-ca", "ca.crt"}, "--etcd-plaintext and --etcd-ca, --etcd-cert, --etcd-key exclude each other"},
		{"malformed member address", []string{"--etcd", "etcd-main", "--member-address", "127.0.0.1:2379"}, `want POD=HOST:PORT, got "127.0.0.1:2379"`},
		{"member status and asking", []string{"--etcd", "etcd-main", "--member-status", "m.json", "--etcd-ca", "a", "--etcd-cert", "b", "--etcd-key", "c"}, "exclude each other"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := planCommand(tc.args, strings.NewReader(""), &stdout, &stderr, farFuture)
			assertOneLineError(t, code, stdout.String(), stderr.String(), tc.want)
		})
	}
}

func TestPlanReadsStdin(t *testing.T) {
	state, err := os.ReadFile(filepath.Join("testdata", "plan", "lease-stale-lease-only.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := planCommand(asJSON([]string{"-f", "-", "--now", "2026-11-22T09:00:00Z", "--role-source", "LeaseOnly"}), bytes.NewReader(state), &stdout, &stderr, farFuture)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	got := decodeOneObject(t, stdout.Bytes())
	if got["action"] != "delete" || got["rule"] != string(rollout.RuleParticipatingFollower) || got["roleSource"] != "lease" {
		t.Fatalf("unexpected decision %v", got)
	}
}

func TestPlanWithoutNowUsesTheClock(t *testing.T) {
	// The same state evaluated on the day it was captured and years later: the Leases have
	// expired, so the roles are no longer known.
	// Roles are resolved only when the decision chooses among participating members, as in the
	// controller, so the fixture is one where it does.
	fixture := filepath.Join("testdata", "plan", "lease-stale-lease-only.yaml")
	for _, tc := range []struct {
		clock      func() time.Time
		roleSource string
	}{
		{func() time.Time { return time.Date(2026, 11, 22, 9, 0, 1, 0, time.UTC) }, "lease"},
		{farFuture, "none"},
	} {
		var stdout, stderr bytes.Buffer
		if code := planCommand(asJSON([]string{"-f", fixture, "--role-source", "LeaseOnly"}), strings.NewReader(""), &stdout, &stderr, tc.clock); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		if got := decodeOneObject(t, stdout.Bytes()); got["roleSource"] != tc.roleSource {
			t.Errorf("at %s roleSource = %v, want %s", tc.clock(), got["roleSource"], tc.roleSource)
		}
	}
}

func TestPlanHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := planCommand(asJSON([]string{"-h"}), strings.NewReader(""), &stdout, &stderr, farFuture); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(stderr.String(), "usage: etcd-conductor plan -f STATE") {
		t.Fatalf("help text missing: %q", stderr.String())
	}
}

// TestPlanLive loads fixtures into a real kube-apiserver and checks that live mode reads them
// back into exactly the decision the file mode prints for the same objects.
func TestPlanLive(t *testing.T) {
	env := localcluster.StartForTest(t, localcluster.Options{NoControllerManager: true, CRDs: true})
	kubeconfig := env.KubeconfigPath()
	binDir, err := localcluster.DefaultBinDir()
	if err != nil {
		t.Fatal(err)
	}
	kubectl := filepath.Join(binDir, "kubectl")
	ctx := context.Background()
	const namespace = "shoot--dev--alpha" // the fixtures' namespace, which the output names
	if _, err := framework.CreateNamespace(ctx, env.Client(), namespace, nil); err != nil {
		t.Fatal(err)
	}

	// Pod deletion timestamps cannot be created, so pod-terminating stays a file-only fixture.
	for _, name := range []string{"one-member-dead", "hung-leader", "lease-stale-lease-only", "lease-stale-member-status", "quorum-lost", "rolling-handover-rejoining", "single-node", "leader-handover", "leader-catch-up",
		"membership-add-learner", "membership-heard-unknown", "membership-scale-in", "recovery-members-with-data", "defrag-follower"} {
		t.Run(name, func(t *testing.T) {
			base := filepath.Join("testdata", "plan", name)
			data, err := os.ReadFile(base + ".yaml")
			if err != nil {
				t.Fatal(err)
			}
			st, err := plancmd.DecodeState(data)
			if err != nil {
				t.Fatal(err)
			}
			load(ctx, t, env.Client(), st)

			var common []string
			if _, err := os.Stat(base + ".members.json"); err == nil {
				common = append(common, "--member-status", base+".members.json")
			}
			extra, err := os.ReadFile(base + ".args")
			if err != nil {
				t.Fatal(err)
			}
			common = append(common, strings.Fields(string(extra))...)
			liveArgs := append([]string{"--kubeconfig", kubeconfig, "-n", namespace, "--etcd", "etcd-main"}, common...)
			var stdout, stderr bytes.Buffer
			if code := planCommand(asJSON(liveArgs), strings.NewReader(""), &stdout, &stderr, farFuture); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			want, err := os.ReadFile(base + ".want.json")
			if err != nil {
				t.Fatal(err)
			}
			if got := decodeOneObject(t, stdout.Bytes()); !reflect.DeepEqual(got, decodeOneObject(t, want)) {
				t.Fatalf("live output differs from %s.want.json:\n%s", base, stdout.String())
			}

			// What real kubectl prints for these objects must plan the same, so the fixture
			// format is the one users will feed in.
			printed, err := exec.Command(kubectl, "--kubeconfig", kubeconfig, "-n", namespace, "get", "etcd,sts,pods,leases", "-o", "yaml").Output()
			if err != nil {
				t.Fatalf("kubectl get: %v", err)
			}
			fileArgs := append([]string{"-f", "-"}, common...)
			stdout.Reset()
			if code := planCommand(asJSON(fileArgs), bytes.NewReader(printed), &stdout, &stderr, farFuture); code != 0 {
				t.Fatalf("plan on kubectl output: exit %d: %s", code, stderr.String())
			}
			if got := decodeOneObject(t, stdout.Bytes()); !reflect.DeepEqual(got, decodeOneObject(t, want)) {
				t.Fatalf("plan on kubectl output differs from %s.want.json:\n%s", base, stdout.String())
			}

			// The controller, fed the same objects, the same member answers and the same clock,
			// must decide what plan printed; so must the other controllers where plan decided.
			decidesLikeController(ctx, t, env.Client(), st, base, decodeOneObject(t, want))
			if st.Etcd != nil {
				load(ctx, t, env.Client(), st)
				othersDecideLikePlan(ctx, t, env.Client(), st, base, decodeOneObject(t, want))
			}
		})
	}

	t.Run("members asked directly", func(t *testing.T) {
		// The fixture's Leases name etcd-main-1 as leader; the real members decide.
		data, err := os.ReadFile(filepath.Join("testdata", "plan", "lease-stale-member-status.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		st, err := plancmd.DecodeState(data)
		if err != nil {
			t.Fatal(err)
		}
		load(ctx, t, env.Client(), st)
		cluster := etcdtest.Start(t, etcdtest.Config{Members: 3, EtcdName: "etcd-main", Namespace: namespace})
		dir := t.TempDir()
		tlsArgs := []string{}
		for flagName, pem := range map[string][]byte{"--etcd-ca": cluster.Client.CA, "--etcd-cert": cluster.Client.Cert, "--etcd-key": cluster.Client.Key} {
			path := filepath.Join(dir, strings.TrimPrefix(flagName, "--etcd-")+".pem")
			if err := os.WriteFile(path, pem, 0o600); err != nil {
				t.Fatal(err)
			}
			tlsArgs = append(tlsArgs, flagName, path)
		}
		live := []string{"--kubeconfig", kubeconfig, "-n", namespace, "--etcd", "etcd-main", "--now", "2026-11-22T09:00:00Z"}
		reachable := append(slices.Clone(live), tlsArgs...)
		for _, m := range cluster.Members {
			reachable = append(reachable, "--member-address", m.Name+"="+strings.TrimPrefix(m.ClientURL, "https://"))
		}

		var stdout, stderr bytes.Buffer
		if code := planCommand(asJSON(reachable), strings.NewReader(""), &stdout, &stderr, farFuture); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		got := decodeOneObject(t, stdout.Bytes())
		leader := ""
		for pod, role := range got["roles"].(map[string]any) {
			if role == "Leader" {
				leader = pod
			}
		}
		wantPod := "etcd-main-0"
		if leader == "etcd-main-0" {
			wantPod = "etcd-main-1"
		}
		if got["roleSource"] != "direct" || leader == "" || got["rule"] != string(rollout.RuleParticipatingFollower) ||
			!reflect.DeepEqual(got["pods"], []any{wantPod}) || got["memberQueryError"] != nil {
			t.Fatalf("with reachable members: %s", stdout.String())
		}
		// The members must agree with what etcd itself says.
		pool := etcdclient.NewPool(etcdclient.Options{})
		defer pool.Close()
		status, err := pool.Query(ctx, "check", cluster.Client, cluster.Targets())
		if err != nil {
			t.Fatal(err)
		}
		if l, ok := status.Leader(); !ok || l.Name != leader {
			t.Fatalf("plan says %s leads, etcd says %+v", leader, l)
		}

		// Nobody answers: the question fails, the roles come from the Leases and the output
		// says why.
		unreachable := append(slices.Clone(live), tlsArgs...)
		for _, m := range cluster.Members {
			unreachable = append(unreachable, "--member-address", m.Name+"=127.0.0.1:1")
		}
		stdout.Reset()
		if code := planCommand(asJSON(unreachable), strings.NewReader(""), &stdout, &stderr, farFuture); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		got = decodeOneObject(t, stdout.Bytes())
		if got["roleSource"] != "lease" || got["memberQueryError"] == nil || !reflect.DeepEqual(got["pods"], []any{"etcd-main-0"}) ||
			!strings.Contains(got["roleDetail"].(string), "none of 3 members reachable") {
			t.Fatalf("with unreachable members: %s", stdout.String())
		}

		// Every controller asks the real members: an Etcd scaled in to 1 of these 3 has
		// membership take etcd-main-2 out, on the voters the leader hears (read linearizably),
		// and a defragmentation wait for the scale.
		data, err = os.ReadFile(filepath.Join("testdata", "plan", "defrag-follower.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if st, err = plancmd.DecodeState(data); err != nil {
			t.Fatal(err)
		}
		st.Etcd.Spec.Replicas = 1
		load(ctx, t, env.Client(), st)
		stdout.Reset()
		if code := planCommand(asJSON(reachable), strings.NewReader(""), &stdout, &stderr, farFuture); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		steps := decodeOneObject(t, stdout.Bytes())["controllers"].(map[string]any)
		membershipStep := steps["membership"].(map[string]any)
		if rule := membershipStep["rule"]; rule != string(membership.RuleRemove) && rule != string(membership.RuleMoveLeader) ||
			!strings.Contains(membershipStep["reason"].(string), "3/3 voters heard by the leader") {
			t.Errorf("membership with the members asked: %v", membershipStep)
		}
		if rule := steps["defragmentation"].(map[string]any)["rule"]; rule != string(defrag.RuleScaleInFlight) {
			t.Errorf("defragmentation with the members asked: %v", steps["defragmentation"])
		}
		if steps["recovery"].(map[string]any)["action"] != "none" || steps["memberQueryError"] != nil {
			t.Errorf("recovery with the members asked: %v", steps)
		}
	})

	t.Run("missing StatefulSet", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		code := planCommand(asJSON([]string{"--kubeconfig", kubeconfig, "-n", namespace, "--etcd", "etcd-nope"}), strings.NewReader(""), &stdout, &stderr, farFuture)
		assertOneLineError(t, code, stdout.String(), stderr.String(), `reading StatefulSet shoot--dev--alpha/etcd-nope: statefulsets.apps "etcd-nope" not found`)
	})
}

// decidesLikeController runs one OnDelete reconcile on the loaded state and checks that the
// controller records and carries out the decision plan printed (want). A state without an Etcd
// gets a minimal one, since the controller acts only for StatefulSets an Etcd owns.
func decidesLikeController(ctx context.Context, t *testing.T, c client.Client, st plancmd.State, base string, want map[string]any) {
	t.Helper()
	o, err := parsePlanFlags(strings.Fields(readArgs(t, base)), farFuture)
	if err != nil {
		t.Fatal(err)
	}
	sts := &appsv1.StatefulSet{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(st.StatefulSet), sts); err != nil {
		t.Fatal(err)
	}
	etcd := &druidv1alpha1.Etcd{}
	ref := metav1.GetControllerOf(st.StatefulSet)
	if ref == nil || ref.Kind != "Etcd" {
		t.Fatalf("fixture StatefulSet has no Etcd owner")
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: sts.Namespace, Name: ref.Name}, etcd); err != nil {
		etcd = &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: sts.Namespace}}
		etcd.Spec.Replicas = *sts.Spec.Replicas
		if err := c.Create(ctx, etcd); err != nil {
			t.Fatalf("create Etcd: %v", err)
		}
		owner := *ref
		owner.UID, owner.BlockOwnerDeletion = etcd.UID, ptr.To(false)
		sts.OwnerReferences = append(sts.OwnerReferences, owner)
		if err := c.Update(ctx, sts); err != nil {
			t.Fatalf("make the Etcd own the StatefulSet: %v", err)
		}
		// The Etcd reconciler creates the member Leases, so the Etcd controls them too.
		for i := range st.Leases {
			lease := &coordinationv1.Lease{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(&st.Leases[i]), lease); err != nil {
				t.Fatal(err)
			}
			lease.OwnerReferences = []metav1.OwnerReference{owner}
			if err := c.Update(ctx, lease); err != nil {
				t.Fatalf("make the Etcd own lease %s: %v", lease.Name, err)
			}
		}
	}
	var reports []roles.MemberReport
	if data, err := os.ReadFile(base + ".members.json"); err == nil {
		saved, err := plancmd.DecodeMemberStatus(data)
		if err != nil {
			t.Fatal(err)
		}
		reports = saved.Reports
	}
	metrics, err := ondelete.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	access := memberaccess.New(memberaccess.Config{Reader: c,
		DefaultClientTLS: func() (conductortls.ClientMaterial, error) { return conductortls.ClientMaterial{}, nil }})
	r := ondelete.NewReconciler(ondelete.Config{
		Client: c, Reader: c, Recorder: record.NewFakeRecorder(100), Metrics: metrics,
		Members:    recordedMembers(reports),
		RoleSource: o.mode,
		Policy:     o.policy,
		Access:     access,
		Clock:      func() time.Time { return o.now },
	})
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(sts)}); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(etcd), etcd); err != nil {
		t.Fatal(err)
	}
	op := etcd.Status.LastOperation
	decided := fmt.Sprintf("%s [%s]", want["reason"], want["rule"])
	if op == nil || !strings.HasPrefix(op.Description, decided) {
		t.Fatalf("controller recorded %+v, plan printed %q", op, decided)
	}
	for _, name := range st.Pods {
		pod := &corev1.Pod{}
		err := c.Get(ctx, client.ObjectKeyFromObject(&name), pod)
		deleted := apierrors.IsNotFound(err) || (err == nil && pod.DeletionTimestamp != nil)
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		chosen := want["action"] == "delete" && slices.Contains(want["pods"].([]any), any(name.Name))
		if deleted != chosen {
			t.Errorf("pod %s: deleted by the controller %v, chosen by plan %v", name.Name, deleted, chosen)
		}
	}
}

func readArgs(t *testing.T, base string) string {
	t.Helper()
	data, err := os.ReadFile(base + ".args")
	if err != nil {
		t.Fatal(err)
	}
	return "-f state " + string(data)
}

// recordedMembers answers the controller's member questions with a recorded member status,
// as --member-status does for plan; without one, nobody reports anything.
type recordedMembers []roles.MemberReport

// Defragment and Member: plan asks neither.
func (recordedMembers) Defragment(context.Context, string, conductortls.ClientMaterial, []etcdclient.Target, string, time.Duration) error {
	panic("not asked by plan")
}

func (recordedMembers) Member(string, conductortls.ClientMaterial, []etcdclient.Target, string) (*etcdclient.MemberConn, error) {
	panic("not asked by plan")
}

func (m recordedMembers) Query(context.Context, string, conductortls.ClientMaterial, []etcdclient.Target) (etcdclient.ClusterStatus, error) {
	var cs etcdclient.ClusterStatus
	for _, r := range m {
		id, _ := strconv.ParseUint(r.ID, 16, 64)
		leader, _ := strconv.ParseUint(r.LeaderID, 16, 64)
		if id != 0 {
			cs.MemberList = append(cs.MemberList, etcdclient.Member{ID: id, Name: r.Name})
		}
		cs.Members = append(cs.Members, etcdclient.MemberStatus{Name: r.Name, Reachable: r.Reachable, ID: id, LeaderID: leader,
			RaftAppliedIndex: r.AppliedIndex, IsLearner: r.IsLearner})
	}
	return cs, nil
}

func (recordedMembers) Forget(string) {}

// LinearizableReads: recorded answers serve no read, as plan asks for none; a replaced member
// not Ready yet counts as not participating in both.
func (recordedMembers) LinearizableReads(context.Context, string, conductortls.ClientMaterial, []etcdclient.Target, []string) ([]string, error) {
	return nil, errors.New("recorded member status: cannot serve a read")
}

func (recordedMembers) LinearizableReadsOf(context.Context, string, conductortls.ClientMaterial, []etcdclient.Target) ([]string, error) {
	return nil, errors.New("recorded member status: cannot serve a read")
}

// MoveLeader: recorded answers cannot move leadership; a fixture that plans a handover shows
// the controller trying and recording the failure.
func (recordedMembers) MoveLeader(context.Context, string, conductortls.ClientMaterial, []etcdclient.Target, string, uint64) error {
	return errors.New("recorded member status: cannot move leadership")
}

// load replaces whatever the namespace holds with the state's objects, statuses included. Owner
// references to the Etcd and the StatefulSet get the UIDs the apiserver gave them.
func load(ctx context.Context, t *testing.T, c client.Client, st plancmd.State) {
	t.Helper()
	ns := st.StatefulSet.Namespace
	for _, obj := range []client.Object{&corev1.Pod{}, &coordinationv1.Lease{}, &appsv1.StatefulSet{}, &druidv1alpha1.Etcd{}} {
		if err := c.DeleteAllOf(ctx, obj, client.InNamespace(ns), client.GracePeriodSeconds(0)); err != nil {
			t.Fatalf("clear %T: %v", obj, err)
		}
	}
	uids := map[string]types.UID{}
	if st.Etcd != nil {
		etcd := st.Etcd.DeepCopy()
		status := etcd.Status
		// The status is what membership and recovery decide on (cluster ID, voters, Ready).
		createWithStatus(ctx, t, c, etcd, &etcd.ObjectMeta, uids, func() { etcd.Status = status })
		uids["Etcd/"+etcd.Name] = etcd.UID
	}
	sts := st.StatefulSet.DeepCopy()
	status := sts.Status
	createWithStatus(ctx, t, c, sts, &sts.ObjectMeta, uids, func() { sts.Status = status })
	uids["StatefulSet/"+sts.Name] = sts.UID
	// A start report names the pod incarnation that made it: the pod the apiserver creates
	// anew is that incarnation here.
	podUIDs := map[string]types.UID{}
	for i := range st.Pods {
		pod := st.Pods[i].DeepCopy()
		status := pod.Status
		saved := pod.UID
		createWithStatus(ctx, t, c, pod, &pod.ObjectMeta, uids, func() { pod.Status = status })
		podUIDs[string(saved)] = pod.UID
	}
	for i := range st.Leases {
		lease := st.Leases[i].DeepCopy()
		clearServerFields(&lease.ObjectMeta, uids)
		if report, ok := memberlease.ParseStartReport(lease.Annotations); ok && podUIDs[report.PodUID] != "" {
			report.PodUID = string(podUIDs[report.PodUID])
			raw, err := json.Marshal(report)
			if err != nil {
				t.Fatal(err)
			}
			lease.Annotations[memberlease.AnnotationStartReport] = string(raw)
		}
		if err := c.Create(ctx, lease); err != nil {
			t.Fatalf("create lease %s: %v", lease.Name, err)
		}
	}
}

// createWithStatus creates obj as new (clearServerFields) and writes back, through
// restoreStatus, the status it was saved with, which a create drops.
func createWithStatus(ctx context.Context, t *testing.T, c client.Client, obj client.Object, meta *metav1.ObjectMeta, uids map[string]types.UID, restoreStatus func()) {
	t.Helper()
	clearServerFields(meta, uids)
	if err := c.Create(ctx, obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, meta.Name, err)
	}
	restoreStatus()
	if err := c.Status().Update(ctx, obj); err != nil {
		t.Fatalf("status of %T %s: %v", obj, meta.Name, err)
	}
}

// clearServerFields drops what the apiserver sets and keeps only owner references to objects
// already created (uids, by "Kind/name"), pointed at their new UIDs.
func clearServerFields(m *metav1.ObjectMeta, uids map[string]types.UID) {
	m.UID = ""
	m.ResourceVersion = ""
	m.CreationTimestamp = metav1.Time{}
	m.Generation = 0
	m.DeletionTimestamp = nil
	m.DeletionGracePeriodSeconds = nil
	var refs []metav1.OwnerReference
	for _, r := range m.OwnerReferences {
		if uid, ok := uids[r.Kind+"/"+r.Name]; ok {
			// The garbage collector is not running; nothing must wait for it.
			r.UID, r.BlockOwnerDeletion = uid, ptr.To(false)
			refs = append(refs, r)
		}
	}
	m.OwnerReferences = refs
}

// othersDecideLikePlan runs one reconcile of the membership, recovery and defragmentation
// controllers on the loaded state, each asking members that answer as the fixture's member-status
// document says, and checks that each records the rule plan printed for it: membership and
// recovery in their conditions, defragmentation in its Event. Nothing is carried out: the saved
// answers cannot change the membership (the controller's attempt fails and is recorded as such).
func othersDecideLikePlan(ctx context.Context, t *testing.T, c client.Client, st plancmd.State, base string, want map[string]any) {
	t.Helper()
	steps := want["controllers"].(map[string]any)
	var saved plancmd.MemberStatus
	if data, err := os.ReadFile(base + ".members.json"); err == nil {
		if saved, err = plancmd.DecodeMemberStatus(data); err != nil {
			t.Fatal(err)
		}
	}
	answers := &savedAnswers{answers: saved.Answers}
	access := memberaccess.New(memberaccess.Config{Reader: c,
		DefaultClientTLS: func() (conductortls.ClientMaterial, error) { return conductortls.ClientMaterial{}, nil }})
	key := client.ObjectKeyFromObject(st.Etcd)
	conditionReason := func(typ druidv1alpha1.ConditionType) string {
		etcd := &druidv1alpha1.Etcd{}
		if err := c.Get(ctx, key, etcd); err != nil {
			t.Fatal(err)
		}
		if cond := druidv1alpha1.FindCondition(etcd.Status.Conditions, typ); cond != nil {
			return cond.Reason
		}
		return ""
	}
	wantReason := func(step map[string]any) string {
		if rule, ok := step["rule"].(string); ok {
			return ruleid.ID(rule).CamelCase()
		}
		return ""
	}

	t.Run("membership", func(t *testing.T) {
		step := steps["membership"].(map[string]any)
		if step["rule"] == string(membership.RuleHeardUnknown) {
			// Where plan stops for want of the leader's view, the controller asks for it and
			// decides further; saved answers without "heard" cannot tell what it would learn.
			t.Skip("plan waits on the leader's view, which the controller asks for")
		}
		r := membershipctl.NewReconciler(membershipctl.Config{Client: c, Reader: c, Recorder: record.NewFakeRecorder(100),
			Members: answers, Access: access})
		_, _ = r.Reconcile(ctx, ctrl.Request{NamespacedName: key}) // an action fails on saved answers, by design
		if got := conditionReason(druidv1alpha1.ConditionTypeScaleOperationInProgress); got != wantReason(step) {
			t.Errorf("the membership controller recorded %q, plan printed %v", got, step)
		}
	})
	t.Run("recovery", func(t *testing.T) {
		step := steps["recovery"].(map[string]any)
		r := recoveryctl.NewReconciler(recoveryctl.Config{Client: c, Reader: c, Recorder: record.NewFakeRecorder(100),
			Members: answers, Access: access})
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
		// A step without a rule is the controller not looking: it records nothing.
		if got := conditionReason(druidv1alpha1.ConditionTypeRecoveryInProgress); got != wantReason(step) {
			t.Errorf("the recovery controller recorded %q, plan printed %v", got, step)
		}
	})
	t.Run("defragmentation", func(t *testing.T) {
		step := steps["defragmentation"].(map[string]any)
		metrics, err := defragctl.NewMetrics(prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		// The schedule is first seen at the fixture's time and the run looked at a day later,
		// when it is due: plan's step is the one of a run starting now.
		now, _ := time.Parse(time.RFC3339, "2026-11-22T09:00:00Z")
		clock := func() time.Time {
			at := now
			now = now.Add(25 * time.Hour)
			return at
		}
		events := record.NewFakeRecorder(100)
		r := defragctl.NewReconciler(defragctl.Config{Client: c, Reader: c, Recorder: events, Members: answers, Metrics: metrics,
			Access: access, Now: clock})
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
		var got string
		select {
		case got = <-events.Events:
		default:
		}
		rule, _ := step["rule"].(string)
		if rule == "" && got != "" || rule != "" && !strings.Contains(got, "["+rule+"]") {
			t.Errorf("the defragmentation controller reported %q, plan printed %v", got, step)
		}
		if member, _ := step["member"].(string); step["action"] == "Defragment" && (answers.defragmented != member || !strings.Contains(got, "member "+member)) {
			t.Errorf("defragmented %q (%q), plan printed %v", answers.defragmented, got, step)
		}
	})
}

// savedAnswers answers the controllers' member questions with a decoded member-status document:
// each status question with its round, a linearizable read by the voters it says the leader
// hears. It changes nothing; a defragmentation is recorded and reported done.
type savedAnswers struct {
	memberaccess.Pool // what plan does not ask: a call panics
	answers           plancmd.Answers
	defragmented      string
}

func (a *savedAnswers) Query(context.Context, string, conductortls.ClientMaterial, []etcdclient.Target) (etcdclient.ClusterStatus, error) {
	if a.answers.Status == nil {
		return etcdclient.ClusterStatus{}, errors.New("no member-status document: nobody answers")
	}
	return *a.answers.Status, nil
}

func (a *savedAnswers) LinearizableReads(ctx context.Context, _ string, _ conductortls.ClientMaterial, _ []etcdclient.Target, names []string) ([]string, error) {
	if a.answers.Heard == nil {
		return nil, errors.New("the member-status document says nothing of what the leader hears")
	}
	heard := a.answers.Heard(ctx)
	var served []string
	for _, m := range a.answers.Status.MemberList {
		if heard[m.ID] && slices.Contains(names, m.Name) {
			served = append(served, m.Name)
		}
	}
	return served, nil
}

func (a *savedAnswers) Member(string, conductortls.ClientMaterial, []etcdclient.Target, string) (*etcdclient.MemberConn, error) {
	return nil, errors.New("saved member answers: cannot change the membership")
}

func (a *savedAnswers) MoveLeader(context.Context, string, conductortls.ClientMaterial, []etcdclient.Target, string, uint64) error {
	return errors.New("saved member answers: cannot move leadership")
}

func (a *savedAnswers) Defragment(_ context.Context, _ string, _ conductortls.ClientMaterial, _ []etcdclient.Target, name string, _ time.Duration) error {
	a.defragmented = name
	return nil
}

func (a *savedAnswers) Forget(string) {}

// TestPlanText: -o text says, per controller, the action and rule, the reason with its numbers
// and what it acts on, from the same decision as the JSON; an unknown format is a one-line error.
func TestPlanText(t *testing.T) {
	base := filepath.Join("testdata", "plan", "backup-not-ready-rollout")
	args := []string{"-f", base + ".yaml", "--member-status", base + ".members.json", "--now", "2026-11-22T09:00:00Z", "-o", "text"}
	var stdout, stderr bytes.Buffer
	if code := planCommand(asJSON(args), strings.NewReader(""), &stdout, &stderr, farFuture); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{
		"Etcd shoot--dev--alpha/etcd-main, StatefulSet shoot--dev--alpha/etcd-main",
		"rollout: wait [rollout/wait/backup-not-ready]\n  replacing the next member waits while BackupReady is False",
		"membership: wait [membership/wait/members-unknown]",
		"recovery: none",
		"defragmentation: ",
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("text output lacks %q:\n%s", want, stdout.String())
		}
	}
	stdout.Reset()
	stderr.Reset()
	code := planCommand(asJSON([]string{"-f", base + ".yaml", "-o", "yaml"}), strings.NewReader(""), &stdout, &stderr, farFuture)
	assertOneLineError(t, code, stdout.String(), stderr.String(), `etcd-conductor plan: -o must be json or text, got "yaml"`)
}

// asJSON asks for JSON output, what these tests parse, unless the call names a format itself.
func asJSON(args []string) []string {
	for _, a := range args {
		if a == "-o" {
			return args
		}
	}
	return append(append([]string{}, args...), "-o", "json")
}
