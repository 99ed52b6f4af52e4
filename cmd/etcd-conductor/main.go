// Command etcd-conductor is the one binary of the project. Its first argument picks the role:
//
//	etcd-conductor manager --config FILE      the operator
//	etcd-conductor member-agent [flags]       the sidecar that renews its member's Lease
//	etcd-conductor plan -f STATE [flags]      explain what each deciding controller would do next
package main

import (
	"fmt"
	"os"
	"sort"
	"strings"
)

// subcommand runs with the arguments after its name and returns the process exit code.
type subcommand func(args []string) int

var subcommands = map[string]subcommand{
	"manager":      runManager,
	"member-agent": runMemberAgent,
	"plan":         runPlan,
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	run, ok := subcommands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "etcd-conductor: unknown subcommand %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	os.Exit(run(os.Args[2:]))
}

func usage() {
	names := make([]string, 0, len(subcommands))
	for name := range subcommands {
		names = append(names, name)
	}
	sort.Strings(names)
	fmt.Fprintf(os.Stderr, "usage: etcd-conductor {%s} [flags]\n", strings.Join(names, "|"))
}

// oneLine flattens an error message (YAML parsers report "unmarshal errors:" over several lines)
// so a failing command prints exactly one line that scripts and kubectl logs show as is.
func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }
