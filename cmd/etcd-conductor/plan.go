package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/etcd-conductor/etcd-conductor/internal/explain"
	"github.com/etcd-conductor/etcd-conductor/internal/roles"
)

const planUsage = `usage: etcd-conductor plan -f STATE [--member-status FILE] [--role-source Auto|LeaseOnly] [--now RFC3339]

Prints, as one JSON object, what the OnDelete controller would do for the saved state:
STATE is "kubectl get sts,pods,leases -o yaml" output (YAML or JSON, "-" for stdin) holding
exactly one StatefulSet; FILE is {"members":[{"name","id","leaderID","reachable"}]}.
--now evaluates Lease freshness at that time (default: the current time), for replaying a
state captured earlier.`

// runPlan explains the next OnDelete step for a saved state. Exit codes: 0 with the decision
// on stdout, 2 with a one-line error on stderr for bad flags or input.
func runPlan(args []string) int {
	return planCommand(args, os.Stdin, os.Stdout, os.Stderr, time.Now)
}

func planCommand(args []string, stdin io.Reader, stdout, stderr io.Writer, clock func() time.Time) int {
	out, err := plan(args, stdin, clock)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(stderr, planUsage)
		return 0
	}
	if err != nil {
		// One line, so scripts can show it as is.
		fmt.Fprintf(stderr, "etcd-conductor plan: %s\n", strings.Join(strings.Fields(err.Error()), " "))
		return 2
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintf(stderr, "etcd-conductor plan: writing output: %v\n", err)
		return 1
	}
	return 0
}

func plan(args []string, stdin io.Reader, clock func() time.Time) (explain.Output, error) {
	flags := flag.NewFlagSet("plan", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	statePath := flags.String("f", "", "state file (kubectl get sts,pods,leases -o yaml), - for stdin")
	memberStatusPath := flags.String("member-status", "", "member status JSON file")
	roleSource := flags.String("role-source", string(roles.ModeAuto), "Auto or LeaseOnly")
	nowFlag := flags.String("now", "", "evaluate Lease freshness at this RFC 3339 time")
	// Live mode: read the state from a cluster and ask the members directly.
	kubeconfig := flags.String("kubeconfig", "", "live mode (not implemented yet)")
	namespace := flags.String("n", "", "live mode namespace (not implemented yet)")
	etcdName := flags.String("etcd", "", "live mode Etcd name (not implemented yet)")
	if err := flags.Parse(args); err != nil {
		return explain.Output{}, err
	}
	if flags.NArg() > 0 {
		return explain.Output{}, fmt.Errorf("unexpected arguments %q", flags.Args())
	}
	if *kubeconfig != "" || *namespace != "" || *etcdName != "" {
		// TODO(live mode): read the StatefulSet, its pods and Leases through the kubeconfig and
		// fill the member reports from internal/etcdclient once that client lands; then call
		// explain.Explain on the same objects.
		return explain.Output{}, errors.New("live mode (--kubeconfig, -n, --etcd) is not implemented yet; save the state with kubectl and pass -f")
	}
	if *statePath == "" {
		return explain.Output{}, errors.New("-f STATE is required")
	}
	mode, err := roles.ParseMode(*roleSource)
	if err != nil {
		return explain.Output{}, err
	}
	now := clock()
	if *nowFlag != "" {
		if now, err = time.Parse(time.RFC3339, *nowFlag); err != nil {
			return explain.Output{}, fmt.Errorf("--now: %w", err)
		}
	}

	state, err := readInput(*statePath, stdin)
	if err != nil {
		return explain.Output{}, fmt.Errorf("reading state: %w", err)
	}
	var memberStatus []byte
	if *memberStatusPath != "" {
		if memberStatus, err = readInput(*memberStatusPath, stdin); err != nil {
			return explain.Output{}, fmt.Errorf("reading member status: %w", err)
		}
	}
	out, err := explain.Explain(state, memberStatus, mode, now)
	if err != nil {
		return explain.Output{}, fmt.Errorf("%s: %w", *statePath, err)
	}
	return out, nil
}

func readInput(path string, stdin io.Reader) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(stdin)
	}
	return os.ReadFile(path)
}
