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

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/etcd-conductor/etcd-conductor/internal/explain"
	"github.com/etcd-conductor/etcd-conductor/internal/roles"
)

const planUsage = `usage: etcd-conductor plan -f STATE [--member-status FILE] [--role-source Auto|LeaseOnly] [--now RFC3339]
       etcd-conductor plan --etcd NAME [-n NAMESPACE] [--kubeconfig FILE] [--member-status FILE] [--role-source ...]

Prints, as one JSON object, what the OnDelete controller would do next.
STATE is "kubectl get sts,pods,leases -o yaml" output (YAML or JSON, "-" for stdin) holding
exactly one StatefulSet. With --etcd the same objects are read from the cluster instead (the
StatefulSet is named like the Etcd). FILE is {"members":[{"name","id","leaderID","reachable"}]}.
--now evaluates Lease freshness at that time (default: the current time), for replaying a
state captured earlier.`

// liveTimeout bounds the API reads of live mode.
const liveTimeout = 30 * time.Second

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
	kubeconfig := flags.String("kubeconfig", "", "live mode: kubeconfig (default: $KUBECONFIG, ~/.kube/config)")
	namespace := flags.String("n", "", "live mode: namespace (default: the kubeconfig context's)")
	etcdName := flags.String("etcd", "", "live mode: the Etcd (and StatefulSet) name")
	if err := flags.Parse(args); err != nil {
		return explain.Output{}, err
	}
	if flags.NArg() > 0 {
		return explain.Output{}, fmt.Errorf("unexpected arguments %q", flags.Args())
	}
	switch {
	case *statePath != "" && *etcdName != "":
		return explain.Output{}, errors.New("-f and --etcd exclude each other")
	case *statePath == "" && *etcdName == "":
		if *kubeconfig != "" || *namespace != "" {
			return explain.Output{}, errors.New("--kubeconfig and -n need --etcd NAME")
		}
		return explain.Output{}, errors.New("-f STATE or --etcd NAME is required")
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

	var members []roles.MemberReport
	if *memberStatusPath != "" {
		data, err := readInput(*memberStatusPath, stdin)
		if err != nil {
			return explain.Output{}, fmt.Errorf("reading member status: %w", err)
		}
		if members, err = explain.DecodeMemberStatus(data); err != nil {
			return explain.Output{}, fmt.Errorf("%s: %w", *memberStatusPath, err)
		}
	}

	var st explain.State
	if *etcdName != "" {
		// TODO(live members): without --member-status, live mode resolves roles from the Leases
		// only. Asking the members directly needs internal/etcdclient's Pool plus client TLS
		// flags (CA, cert, key) and a route to the pod IPs, which a workstation rarely has.
		if st, err = readLiveState(*kubeconfig, *namespace, *etcdName); err != nil {
			return explain.Output{}, err
		}
	} else {
		data, err := readInput(*statePath, stdin)
		if err != nil {
			return explain.Output{}, fmt.Errorf("reading state: %w", err)
		}
		if st, err = explain.DecodeState(data); err != nil {
			return explain.Output{}, fmt.Errorf("%s: %w", *statePath, err)
		}
	}
	return explain.ExplainState(st, members, mode, now), nil
}

// readLiveState reads the StatefulSet, its pods and the Leases through a kubeconfig, resolved
// the way kubectl does.
func readLiveState(kubeconfig, namespace, name string) (explain.State, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{Context: clientcmdapi.Context{Namespace: namespace}})
	cfg, err := loader.ClientConfig()
	if err != nil {
		return explain.State{}, fmt.Errorf("loading kubeconfig: %w", err)
	}
	if namespace, _, err = loader.Namespace(); err != nil {
		return explain.State{}, fmt.Errorf("resolving the namespace: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return explain.State{}, fmt.Errorf("building the Kubernetes client: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), liveTimeout)
	defer cancel()
	return explain.ReadLive(ctx, cs, namespace, name)
}

func readInput(path string, stdin io.Reader) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(stdin)
	}
	return os.ReadFile(path)
}
