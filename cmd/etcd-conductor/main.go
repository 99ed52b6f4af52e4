package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	// The image is built FROM scratch (make image): it has no /etc/ssl/certs, and a backup store
	// reached over public TLS (AWS S3, GCS's S3 API) must still be verified. This bundle of
	// Mozilla's roots is used only when the system has no roots of its own, so a distroless or
	// custom image, or SSL_CERT_FILE/SSL_CERT_DIR, still decides.
	_ "golang.org/x/crypto/x509roots/fallback"

	"github.com/etcd-conductor/etcd-conductor/internal/version"
)

// subcommand runs with the arguments after its name and returns the process exit code.
type subcommand struct {
	run func(args []string) int
	// about is its line in the usage.
	about string
}

var subcommands = map[string]subcommand{
	"manager":      {runManager, "the operator (--config FILE: an OperatorConfiguration)"},
	"member-agent": {runMemberAgent, "the member pod's sidecar and init step: renews its member's Lease, takes backups"},
	"plan":         {runPlan, "explain what each deciding controller would do next (-f STATE, or a live cluster)"},
	"version":      {runVersion, "print the release, the commit and the Go version of this binary"},
}

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

// dispatch runs the subcommand args name and returns the exit code: 0 for help asked for, 2 for
// a missing or unknown subcommand, with the usage on stdout or stderr accordingly.
func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return 0
	case "--version", "-version":
		args = []string{"version"}
	}
	cmd, ok := subcommands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "etcd-conductor: unknown subcommand %q\n", args[0])
		usage(stderr)
		return 2
	}
	return cmd.run(args[1:])
}

func usage(w io.Writer) {
	names := make([]string, 0, len(subcommands))
	for name := range subcommands {
		names = append(names, name)
	}
	sort.Strings(names)
	fmt.Fprintf(w, "usage: etcd-conductor {%s} [flags]\n\n", strings.Join(names, "|"))
	for _, name := range names {
		fmt.Fprintf(w, "  %-13s %s\n", name, subcommands[name].about)
	}
	fmt.Fprintf(w, "\n'etcd-conductor SUBCOMMAND -h' lists a subcommand's flags.\n")
}

func runVersion(args []string) int {
	if len(args) > 0 {
		fmt.Fprintf(os.Stderr, "etcd-conductor version: takes no arguments, got %q\n", args)
		return 2
	}
	fmt.Println(version.Current())
	return 0
}

// oneLine flattens an error message (YAML parsers report "unmarshal errors:" over several lines)
// so a failing command prints exactly one line that scripts and kubectl logs show as is.
func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }
