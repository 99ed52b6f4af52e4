// Command localcluster starts a detached local control plane for the demo and
// for poking at the operator by hand, and stops it again:
//
//	localcluster up --dir .cluster     # prints export KUBECONFIG=...
//	localcluster status --dir .cluster
//	localcluster down --dir .cluster
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
)

const usage = `usage: localcluster <up|down|status> [flags]

  up      start etcd, kube-apiserver and kube-controller-manager detached;
          refuses when the dir already holds a running cluster
  down    stop the processes recorded in the dir and remove it
  status  list the recorded processes that still run
`

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("missing command")
	}
	cmd, args := args[0], args[1:]
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", ".cluster", "work dir holding the cluster's state, logs and kubeconfig")
	var upOpts localcluster.Options
	var controllers string
	if cmd == "up" {
		fs.StringVar(&upOpts.BinDir, "bin-dir", "", "dir with etcd-3.6.8, kube-apiserver, kube-controller-manager (default $"+localcluster.BinDirEnv+" or <repo>/bin)")
		fs.StringVar(&upOpts.BindAddress, "bind-address", "127.0.0.1", "address kube-apiserver listens on (loopback or a bridge address)")
		fs.StringVar(&upOpts.FeatureGates, "feature-gates", "", "feature gates for kube-apiserver and kube-controller-manager")
		fs.StringVar(&controllers, "controllers", strings.Join(localcluster.DefaultControllers, ","), "kube-controller-manager controllers")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	absDir, err := filepath.Abs(*dir)
	if err != nil {
		return fmt.Errorf("dir %s: %w", *dir, err)
	}
	switch cmd {
	case "up":
		upOpts.Controllers = strings.Split(controllers, ",")
		return up(absDir, upOpts, stdout, stderr)
	case "down":
		return down(absDir, stderr)
	case "status":
		return status(absDir, stdout)
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
}

func up(dir string, o localcluster.Options, stdout, stderr io.Writer) error {
	running, err := localcluster.Running(dir)
	if err != nil {
		return err
	}
	if len(running) > 0 {
		return fmt.Errorf("a cluster is already up in %s (%d processes running); run `localcluster down --dir %s` first", dir, len(running), dir)
	}
	// Nothing runs: whatever is left is a crashed or killed earlier run.
	if _, err := os.Stat(dir); err == nil {
		fmt.Fprintf(stderr, "localcluster: removing stale %s\n", dir)
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("remove stale %s: %w", dir, err)
		}
	}
	o.WorkDir = dir
	o.KeepWorkDir = true
	o.Detach = true
	o.Log = stderr
	// Ctrl-C during startup stops what was started instead of leaving it behind.
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	c, err := localcluster.Start(ctx, o)
	if err != nil {
		return err
	}
	host, port := c.APIServerHost()
	fmt.Fprintf(stderr, "localcluster: kube-apiserver at https://%s:%d, logs in %s\n", host, port, filepath.Join(dir, "logs"))
	fmt.Fprintln(stdout, c.KubeconfigPath())
	fmt.Fprintf(stdout, "export KUBECONFIG=%s\n", c.KubeconfigPath())
	return nil
}

func down(dir string, stderr io.Writer) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(stderr, "localcluster: nothing to stop in %s\n", dir)
		return nil
	}
	return localcluster.StopWorkDir(dir, stderr)
}

func status(dir string, stdout io.Writer) error {
	running, err := localcluster.Running(dir)
	if err != nil {
		return err
	}
	if len(running) == 0 {
		fmt.Fprintf(stdout, "down (%s)\n", dir)
		return nil
	}
	for _, r := range running {
		fmt.Fprintf(stdout, "%s pid=%d\n", r.Name, r.PID)
	}
	return nil
}
