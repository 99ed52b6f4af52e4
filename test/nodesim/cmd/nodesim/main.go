// Command nodesim runs the node simulator against a cluster (for the demo
// and for poking at the operator by hand) and injects faults into it:
//
//	nodesim net up --index 0               # prints the gateway to bind kube-apiserver to
//	nodesim run --kubeconfig k.yaml --index 0
//	nodesim fault kill --pod ns/etcd-0 --container etcd
//	nodesim fault partition --pod ns/etcd-1
//	nodesim fault delay-from --pod ns/etcd-1 --delay 250ms --peers 10.213.0.2,10.213.0.4
//	nodesim fault mute --pod ns/etcd-1 --port 2380
//	nodesim pod-ip --pod ns/etcd-0
//	nodesim net down --index 0
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/etcd-conductor/etcd-conductor/test/nodesim"
)

const usage = `usage: nodesim <command> [flags]

  net up|down     create or remove the bridge ecsim<index> (10.213.<index>.1/24)
  run             run the simulator until interrupted
  fault <kind>    kind: kill, hang, resume (need --container), partition, heal,
                  crash-on-start (--container, --on=true|false),
                  delay-from (--delay=250ms --peers=ip,ip; heal lifts it),
                  mute (--port=2380: the pod's listener unreachable; heal lifts it)
  pod-ip          print a pod's IP
  logs            print the path of a container's log file
`

const defaultControlAddr = "127.0.0.1:19250"

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "nodesim:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("missing command")
	}
	cmd, args := args[0], args[1:]
	switch cmd {
	case "net":
		return netCmd(args, stdout, stderr)
	case "run":
		return runCmd(args, stderr)
	case "fault":
		if len(args) == 0 {
			return errors.New("fault: missing kind")
		}
		return controlCmd(http.MethodPost, "/v1/fault/"+args[0], args[1:], stdout, stderr)
	case "pod-ip":
		return controlCmd(http.MethodGet, "/v1/pod-ip", args, stdout, stderr)
	case "logs":
		return controlCmd(http.MethodGet, "/v1/logs", args, stdout, stderr)
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", cmd)
}

func netCmd(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "up" && args[0] != "down") {
		return errors.New("net: want up or down")
	}
	fs := flag.NewFlagSet("net "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	index := fs.Int("index", 0, "subnet index: bridge ecsim<index>, 10.213.<index>.0/24")
	name := fs.String("name", "", "bridge name (default ecsim<index>)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *name == "" {
		*name = fmt.Sprintf("ecsim%d", *index)
	}
	if args[0] == "up" {
		n, err := nodesim.SetupNetwork(*name, *index)
		if err != nil {
			return err
		}
		if err := n.Persist(); err != nil {
			return errors.Join(err, n.Teardown())
		}
		fmt.Fprintln(stdout, n.GatewayIP())
		return nil
	}
	n, err := nodesim.AttachNetwork(*name, *index)
	if err != nil {
		return err
	}
	return n.Teardown()
}

func runCmd(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig with admin rights")
	index := fs.Int("index", 0, "network index (see net up); the network is created if absent and then removed on exit")
	netName := fs.String("net-name", "", "bridge name (default ecsim<index>)")
	var o nodesim.Options
	fs.StringVar(&o.NodeName, "node-name", "nodesim", "Node to register and serve")
	fs.StringVar(&o.BinDir, "bin-dir", "", "binaries images map to (default $ETCD_CONDUCTOR_BIN_DIR or <repo>/bin)")
	fs.StringVar(&o.WorkDir, "work-dir", "", "pod dirs, logs, hosts files (default: a temp dir, removed on exit)")
	fs.StringVar(&o.DataDir, "data-dir", "", "PVC dirs (default <work-dir>/pvc)")
	fs.BoolVar(&o.KeepData, "keep-data", false, "keep PVC dirs on exit")
	fs.BoolVar(&o.DisableScheduling, "no-schedule", false, "do not bind unscheduled pods to this node")
	fs.StringVar(&o.ControlAddr, "control-addr", defaultControlAddr, "loopback address of the fault endpoint")
	fs.StringVar(&o.APIServerHost, "apiserver-host", "", "KUBERNETES_SERVICE_HOST for pods (default: from kubeconfig)")
	fs.IntVar(&o.APIServerPort, "apiserver-port", 0, "KUBERNETES_SERVICE_PORT for pods (default: from kubeconfig)")
	fs.DurationVar(&o.BackoffBase, "backoff-base", 10*time.Second, "CrashLoopBackOff/ImagePullBackOff base")
	fs.DurationVar(&o.BackoffMax, "backoff-max", 5*time.Minute, "CrashLoopBackOff/ImagePullBackOff cap")
	images := fs.String("images", "", "extra image mappings, comma separated repo[:tag]=/host/binary")
	verbosity := fs.Int("v", 0, "log verbosity")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *kubeconfig == "" {
		return errors.New("run: --kubeconfig or $KUBECONFIG is required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if o.APIServerHost == "" {
		u, err := url.Parse(cfg.Host)
		if err != nil {
			return fmt.Errorf("kubeconfig server %q: %w", cfg.Host, err)
		}
		host, port, err := net.SplitHostPort(u.Host)
		if err != nil {
			host, port = u.Host, "443"
		}
		o.APIServerHost = host
		if o.APIServerPort == 0 {
			o.APIServerPort, _ = strconv.Atoi(port)
		}
	}
	if *images != "" {
		o.Images = map[string]string{}
		for _, kv := range strings.Split(*images, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return fmt.Errorf("image mapping %q: want repo[:tag]=/path", kv)
			}
			o.Images[k] = v
		}
	}
	if *netName == "" {
		*netName = fmt.Sprintf("ecsim%d", *index)
	}
	network, err := nodesim.AttachNetwork(*netName, *index)
	ownNetwork := false
	if err != nil {
		if network, err = nodesim.SetupNetwork(*netName, *index); err != nil {
			return err
		}
		ownNetwork = true
	}
	o.Network = network
	o.Client = client
	o.Log = funcr.New(func(prefix, args string) { fmt.Fprintln(stderr, prefix, args) }, funcr.Options{Verbosity: *verbosity})

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sim, err := nodesim.Start(ctx, o)
	if err != nil {
		if ownNetwork {
			_ = network.Teardown()
		}
		return err
	}
	<-ctx.Done()
	err = sim.Stop()
	if ownNetwork {
		err = errors.Join(err, network.Teardown())
	}
	return err
}

func controlCmd(method, path string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(path, flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", defaultControlAddr, "the simulator's control endpoint")
	pod := fs.String("pod", "", "namespace/name")
	container := fs.String("container", "", "container name")
	on := fs.String("on", "true", "crash-on-start: true or false")
	delay := fs.String("delay", "", "delay-from: the delay each way, e.g. 250ms")
	peers := fs.String("peers", "", "delay-from: comma-separated peer IPs")
	port := fs.String("port", "", "mute: the pod's port to make unreachable, e.g. 2380")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *pod == "" {
		return errors.New("--pod namespace/name is required")
	}
	q := url.Values{"pod": {*pod}, "container": {*container}, "on": {*on}, "delay": {*delay}, "port": {*port}}
	if *peers != "" {
		q["peer"] = strings.Split(*peers, ",")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := nodesim.ControlRequest(ctx, *addr, method, path, q)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, out)
	return nil
}
