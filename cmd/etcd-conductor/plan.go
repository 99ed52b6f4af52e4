package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/roles"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/rollout"
	"github.com/etcd-conductor/etcd-conductor/internal/operator"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/plancmd"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

const planUsage = `usage: etcd-conductor plan -f STATE [-o json|text] [--member-status FILE] [--role-source Auto|LeaseOnly] [--now RFC3339] [POLICY]
       etcd-conductor plan --etcd NAME [-n NAMESPACE] [--kubeconfig FILE] [--role-source ...] [POLICY]
                           [--member-status FILE | --etcd-ca F --etcd-cert F --etcd-key F [--member-address POD=HOST:PORT ...]]

Prints, as a summary for a person (-o json: one JSON object, for scripts), what the OnDelete controller would do next: plan runs the
controller's own pipeline (pods owned by the StatefulSet, roles resolved only when the choice is
among participating members, members dialled at the Etcd's client port). Under "controllers" it
adds the next step of the membership, recovery and defragmentation controllers, and the
membership controller's restart of a stuck member (memberRestart, at the default
notReadyThreshold), and the Etcd reconciler's etcd version decision (version: the image it
renders, the downgrade call it makes), from their own observation and planners: each with action, rule and reason, or notDecided saying what the state
lacks (they need the Etcd, and answers from the members). Defragmentation runs only on its
schedule: its step is what a run starting now would do, with the next scheduled run.
STATE is "kubectl get etcd,sts,pods,leases -o yaml" output (YAML or JSON, "-" for stdin) holding
exactly one StatefulSet and, preferably, the Etcd owning it; without that Etcd the defaults
stand in (client port 2379, the Etcd named like the StatefulSet) and the output says so. With
--etcd the same objects are read from the cluster instead (the StatefulSet is named like the
Etcd). FILE is {"members":[{"name","id","leaderID","reachable","appliedIndex","isLearner",
"clusterID","dbSize","dbSizeInUse","version","storageVersion","downgradeEnabled","downgradeTarget"}],"memberList":[{"id","name","peerURLs","clientURLs",
"isLearner"}],"heard":["etcd-main-0",...]}: all but name, id, leaderID and reachable optional;
without memberList the member list is unknown, without heard which voters the leader hears.
With --etcd-ca/--etcd-cert/--etcd-key live mode asks the members themselves, at podIP:client
port or at --member-address (e.g. a kubectl port-forward), verifying their DNS names; it reads
nothing but status, the member list and linearizable reads.
--now evaluates Lease freshness at that time (default: the current time), for replaying a
state captured earlier.
POLICY, as the operator's controllers.ondelete configuration (defaults the same):
--handover=false (leader deleted without moving leadership first), --handover-attempts N (3),
--max-applied-index-lag N (1000; -1 turns the catch-up gate off), --max-concurrent-member-updates N (1).`

// liveTimeout bounds live mode: the API reads and the member questions.
const liveTimeout = 30 * time.Second

// runPlan explains the next step of every deciding controller. Exit codes: 0 with the decision on stdout, 2 with a
// one-line error on stderr for bad flags or input.
func runPlan(args []string) int {
	return planCommand(args, os.Stdin, os.Stdout, os.Stderr, time.Now)
}

func planCommand(args []string, stdin io.Reader, stdout, stderr io.Writer, clock func() time.Time) int {
	out, format, err := plan(args, stdin, clock)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(stderr, planUsage)
		return 0
	}
	if err != nil {
		// One line, so scripts can show it as is.
		fmt.Fprintf(stderr, "etcd-conductor plan: %s\n", oneLine(err))
		return 2
	}
	write := func() error {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	if format == outputText {
		write = func() error { return plancmd.WriteText(stdout, out) }
	}
	if err := write(); err != nil {
		fmt.Fprintf(stderr, "etcd-conductor plan: writing output: %v\n", err)
		return 1
	}
	return 0
}

// planOptions are the parsed flags.
type planOptions struct {
	statePath, memberStatusPath string
	mode                        roles.SourcePolicy
	now                         time.Time
	policy                      rollout.Policy

	// Live mode.
	kubeconfig, namespace, etcdName string
	caFile, certFile, keyFile       string
	plaintext                       bool
	addresses                       map[string]string

	// output is outputJSON or outputText.
	output string
}

// The formats of -o.
const (
	outputJSON = "json"
	outputText = "text"
)

func (o planOptions) live() bool { return o.etcdName != "" }
func (o planOptions) askMembers() bool {
	return o.plaintext || o.caFile != "" || o.certFile != "" || o.keyFile != ""
}

func parsePlanFlags(args []string, clock func() time.Time) (planOptions, error) {
	o := planOptions{addresses: map[string]string{}}
	flags := flag.NewFlagSet("plan", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	flags.StringVar(&o.statePath, "f", "", "state file (kubectl get etcd,sts,pods,leases -o yaml), - for stdin")
	flags.StringVar(&o.memberStatusPath, "member-status", "", "member status JSON file")
	flags.StringVar(&o.output, "o", outputText, "output format: text (for a person) or json (for scripts)")
	roleSource := flags.String("role-source", string(roles.SourcePolicyAuto), "Auto or LeaseOnly")
	now := flags.String("now", "", "evaluate Lease freshness at this RFC 3339 time")
	flags.StringVar(&o.kubeconfig, "kubeconfig", "", "live mode: kubeconfig (default: $KUBECONFIG, ~/.kube/config)")
	flags.StringVar(&o.namespace, "n", "", "live mode: namespace (default: the kubeconfig context's)")
	flags.StringVar(&o.etcdName, "etcd", "", "live mode: the Etcd (and StatefulSet) name")
	flags.StringVar(&o.caFile, "etcd-ca", "", "live mode: CA bundle that signed the members' certificates")
	flags.StringVar(&o.certFile, "etcd-cert", "", "live mode: client certificate the members accept")
	flags.StringVar(&o.keyFile, "etcd-key", "", "live mode: key of --etcd-cert")
	flags.BoolVar(&o.plaintext, "etcd-plaintext", false, "live mode: ask members that serve clients over plain HTTP (an Etcd without clientUrlTls)")
	flags.Func("member-address", "live mode: POD=HOST:PORT to reach that member at (repeatable)", func(v string) error {
		pod, address, ok := strings.Cut(v, "=")
		if !ok || pod == "" || address == "" {
			return fmt.Errorf("want POD=HOST:PORT, got %q", v)
		}
		o.addresses[pod] = address
		return nil
	})
	o.policy = rollout.DefaultPolicy()
	flags.BoolVar(&o.policy.Handover, "handover", o.policy.Handover, "move leadership before deleting the leader's pod")
	flags.IntVar(&o.policy.HandoverAttempts, "handover-attempts", o.policy.HandoverAttempts, "failed handovers after which the leader is deleted anyway")
	maxLag := flags.Int64("max-applied-index-lag", int64(o.policy.MaxAppliedIndexLag), "catch-up bound in raft entries; -1 turns the gate off")
	flags.IntVar(&o.policy.MaxConcurrent, "max-concurrent-member-updates", o.policy.MaxConcurrent, "participating members replaced at once (capped by the quorum's headroom)")
	flags.BoolVar(&o.policy.WaitForBackupReady, "wait-for-backup-ready", o.policy.WaitForBackupReady, "controllers.etcd.waitForBackupReady: rollouts, defragmentation and scale-in wait while BackupReady is False")
	if err := flags.Parse(args); err != nil {
		return o, err
	}
	if o.output != outputJSON && o.output != outputText {
		return o, fmt.Errorf("-o must be json or text, got %q", o.output)
	}
	switch {
	case *maxLag < -1:
		return o, fmt.Errorf("--max-applied-index-lag must be -1 (off) or at least 0, got %d", *maxLag)
	case *maxLag == -1:
		o.policy.CatchUp, o.policy.MaxAppliedIndexLag = false, 0
	default:
		o.policy.MaxAppliedIndexLag = uint64(*maxLag)
	}
	if o.policy.MaxConcurrent < 1 || o.policy.HandoverAttempts < 1 {
		return o, fmt.Errorf("--max-concurrent-member-updates and --handover-attempts must be at least 1, got %d and %d",
			o.policy.MaxConcurrent, o.policy.HandoverAttempts)
	}
	if flags.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", flags.Args())
	}
	if err := o.validate(); err != nil {
		return o, err
	}
	var err error
	if o.mode, err = roles.ParseSourcePolicy(*roleSource); err != nil {
		return o, err
	}
	o.now = clock()
	if *now != "" {
		if o.now, err = time.Parse(time.RFC3339, *now); err != nil {
			return o, fmt.Errorf("--now: %w", err)
		}
	}
	return o, nil
}

// validate rejects flag combinations that would silently ignore a flag.
func (o planOptions) validate() error {
	switch {
	case o.statePath != "" && o.live():
		return errors.New("-f and --etcd exclude each other")
	case o.statePath == "" && !o.live() && (o.kubeconfig != "" || o.namespace != ""):
		return errors.New("--kubeconfig and -n need --etcd NAME")
	case o.statePath == "" && !o.live():
		return errors.New("-f STATE or --etcd NAME is required")
	case o.plaintext && (o.caFile != "" || o.certFile != "" || o.keyFile != ""):
		return errors.New("--etcd-plaintext and --etcd-ca, --etcd-cert, --etcd-key exclude each other")
	case o.askMembers() && !o.plaintext && (o.caFile == "" || o.certFile == "" || o.keyFile == ""):
		return errors.New("--etcd-ca, --etcd-cert and --etcd-key go together")
	case (o.askMembers() || len(o.addresses) > 0) && !o.live():
		return errors.New("asking the members needs live mode (--etcd NAME)")
	case len(o.addresses) > 0 && !o.askMembers():
		return errors.New("--member-address needs --etcd-ca, --etcd-cert and --etcd-key (or --etcd-plaintext)")
	case o.askMembers() && o.memberStatusPath != "":
		return errors.New("--member-status and asking the members (--etcd-ca …) exclude each other")
	}
	return nil
}

func plan(args []string, stdin io.Reader, clock func() time.Time) (plancmd.Output, string, error) {
	o, err := parsePlanFlags(args, clock)
	if err != nil {
		return plancmd.Output{}, "", err
	}
	out, err := planFor(o, stdin)
	return out, o.output, err
}

// planFor runs the controllers' decisions on what o names.
func planFor(o planOptions, stdin io.Reader) (plancmd.Output, error) {
	var members plancmd.MemberStatus
	if o.memberStatusPath != "" {
		data, err := readInput(o.memberStatusPath, stdin)
		if err != nil {
			return plancmd.Output{}, fmt.Errorf("reading member status: %w", err)
		}
		if members, err = plancmd.DecodeMemberStatus(data); err != nil {
			return plancmd.Output{}, fmt.Errorf("%s: %w", o.memberStatusPath, err)
		}
	}
	if o.live() {
		return planLive(o, members)
	}

	data, err := readInput(o.statePath, stdin)
	if err != nil {
		return plancmd.Output{}, fmt.Errorf("reading state: %w", err)
	}
	st, err := plancmd.DecodeState(data)
	if err != nil {
		return plancmd.Output{}, fmt.Errorf("%s: %w", o.statePath, err)
	}
	src := plancmd.Sources{Members: plancmd.Reports(members.Reports), Answers: plancmd.SavedAnswers(members.Answers)}
	return refuseOutOfBounds(plancmd.Plan(context.Background(), st, src, o.mode, o.policy, o.now))
}

// refuseOutOfBounds turns the planner's refusal of a state beyond the member bound (replicas
// 2147483647, a pod named etcd-2147483646) into bad input: exit 2 and one line, like any other
// state plan cannot work with.
func refuseOutOfBounds(out plancmd.Output, err error) (plancmd.Output, error) {
	if err != nil {
		return plancmd.Output{}, err
	}
	if out.Rule == rollout.RuleOutOfBounds {
		return plancmd.Output{}, fmt.Errorf("StatefulSet %s: %s", out.StatefulSet, out.Reason)
	}
	return out, nil
}

// planLive reads the objects from the cluster and, if asked to, the members' own view.
func planLive(o planOptions, members plancmd.MemberStatus) (plancmd.Output, error) {
	ctx, cancel := context.WithTimeout(context.Background(), liveTimeout)
	defer cancel()
	c, namespace, err := liveClient(o.kubeconfig, o.namespace)
	if err != nil {
		return plancmd.Output{}, err
	}
	st, err := plancmd.ReadLive(ctx, c, namespace, o.etcdName)
	if err != nil {
		return plancmd.Output{}, err
	}
	src := plancmd.Sources{Members: plancmd.Reports(members.Reports), Leases: plancmd.LiveLeases(c), Answers: plancmd.SavedAnswers(members.Answers)}
	if o.askMembers() {
		creds, err := conductortls.PlaintextMaterial(), error(nil)
		if !o.plaintext {
			creds, err = conductortls.LoadFiles(o.caFile, o.certFile, o.keyFile)
		}
		if err != nil {
			return plancmd.Output{}, fmt.Errorf("member client TLS: %w", err)
		}
		pool := etcdclient.NewPool(etcdclient.Options{})
		defer pool.Close()
		// A failed question is not fatal: the roles fall back to the Leases, the other
		// controllers decide as if no member answered, and the output says why.
		if o.mode != roles.SourcePolicyLeaseOnly {
			src.Members = plancmd.AskMembers(pool, creds, o.addresses)
		}
		src.Answers = plancmd.AskAllMembers(pool, creds, o.addresses)
	}
	return refuseOutOfBounds(plancmd.Plan(ctx, st, src, o.mode, o.policy, o.now))
}

// liveClient builds a client through a kubeconfig, resolved the way kubectl does, and returns
// the namespace to use.
func liveClient(kubeconfig, namespace string) (client.Client, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{Context: clientcmdapi.Context{Namespace: namespace}})
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("loading kubeconfig: %w", err)
	}
	if namespace, _, err = loader.Namespace(); err != nil {
		return nil, "", fmt.Errorf("resolving the namespace: %w", err)
	}
	scheme, err := operator.NewScheme()
	if err != nil {
		return nil, "", err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, "", fmt.Errorf("building the Kubernetes client: %w", err)
	}
	return c, namespace, nil
}

func readInput(path string, stdin io.Reader) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(stdin)
	}
	return os.ReadFile(path)
}
