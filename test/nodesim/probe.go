package nodesim

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

type probeKind string

const (
	readiness probeKind = "Readiness"
	liveness  probeKind = "Liveness"
	startup   probeKind = "Startup"
)

// startProbes runs the container's probes for one process lifetime (ctx).
func (c *container) startProbes(ctx context.Context, spec *corev1.Container) {
	if spec.StartupProbe != nil {
		go c.probeLoop(ctx, startup, spec.StartupProbe, spec)
	}
	if spec.ReadinessProbe != nil {
		go c.probeLoop(ctx, readiness, spec.ReadinessProbe, spec)
	}
	if spec.LivenessProbe != nil {
		go c.probeLoop(ctx, liveness, spec.LivenessProbe, spec)
	}
}

func seconds(v int32, def int32) time.Duration {
	if v <= 0 {
		v = def
	}
	return time.Duration(v) * time.Second
}

// probeLoop follows kubelet's prober worker: wait initialDelaySeconds, probe
// every periodSeconds with timeoutSeconds, and flip the result only after
// successThreshold successes or failureThreshold failures in a row.
// Readiness and liveness wait until the startup probe has succeeded.
func (c *container) probeLoop(ctx context.Context, kind probeKind, p *corev1.Probe, spec *corev1.Container) {
	period := seconds(p.PeriodSeconds, 10)
	timeout := seconds(p.TimeoutSeconds, 1)
	successThreshold := max(p.SuccessThreshold, 1)
	failureThreshold := max(p.FailureThreshold, 1)
	if kind != readiness {
		successThreshold = 1
	}
	if p.InitialDelaySeconds > 0 {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(p.InitialDelaySeconds) * time.Second):
		}
	}
	ticker := time.NewTicker(period)
	defer ticker.Stop()
	successes, failures := int32(0), int32(0)
	for {
		c.w.mu.Lock()
		started := c.started
		c.w.mu.Unlock()
		if kind == startup && started {
			return
		}
		if kind == startup || started {
			err := c.probeOnce(ctx, p, spec, timeout)
			if ctx.Err() != nil {
				return
			}
			if err == nil {
				successes, failures = successes+1, 0
			} else {
				failures, successes = failures+1, 0
				c.w.log.V(1).Info("probe failed", "container", c.name, "probe", kind, "error", err.Error())
				c.w.event(corev1.EventTypeWarning, "Unhealthy", "%s probe failed: %v", kind, err)
			}
			switch {
			case successes >= successThreshold:
				c.probeResult(kind, true)
			case failures >= failureThreshold:
				c.probeResult(kind, false)
				if kind != readiness {
					grace := podGrace(c.w.currentPod())
					if p.TerminationGracePeriodSeconds != nil {
						grace = time.Duration(*p.TerminationGracePeriodSeconds) * time.Second
					}
					go c.killForRestart(grace, "Unhealthy", fmt.Sprintf("%s probe failed: %v", kind, err))
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

func (c *container) probeResult(kind probeKind, ok bool) {
	c.w.mu.Lock()
	changed := false
	switch kind {
	case readiness:
		changed = c.ready != ok
		c.ready = ok
	case startup:
		if ok && !c.started {
			changed = true
			c.started = true
			if spec := c.w.containerSpecLocked(c.name); spec != nil && spec.ReadinessProbe == nil {
				c.ready = true
			}
		}
	}
	c.w.mu.Unlock()
	if changed {
		c.w.markDirty()
	}
}

// containerSpecLocked is containerSpec for callers holding w.mu.
func (w *podWorker) containerSpecLocked(name string) *corev1.Container {
	for i := range w.pod.Spec.Containers {
		if w.pod.Spec.Containers[i].Name == name {
			return &w.pod.Spec.Containers[i]
		}
	}
	return nil
}

func (c *container) probeOnce(ctx context.Context, p *corev1.Probe, spec *corev1.Container, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c.w.mu.Lock()
	podIP := ""
	if c.w.net != nil {
		podIP = c.w.net.ip.String()
	}
	c.w.mu.Unlock()
	switch {
	case p.HTTPGet != nil:
		return probeHTTP(ctx, p.HTTPGet, podIP, spec)
	case p.TCPSocket != nil:
		host := p.TCPSocket.Host
		if host == "" {
			host = podIP
		}
		port, err := resolvePort(p.TCPSocket.Port, spec)
		if err != nil {
			return err
		}
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return err
		}
		return conn.Close()
	case p.GRPC != nil:
		return probeGRPC(ctx, p.GRPC, podIP)
	case p.Exec != nil:
		out, err := c.exec(ctx, p.Exec.Command)
		if err != nil {
			return fmt.Errorf("%w: %s", err, bytes.TrimSpace(out))
		}
		return nil
	}
	return fmt.Errorf("probe has no handler")
}

func resolvePort(port intstr.IntOrString, spec *corev1.Container) (int, error) {
	if port.Type == intstr.Int {
		return port.IntValue(), nil
	}
	for _, p := range spec.Ports {
		if p.Name == port.StrVal {
			return int(p.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(port.StrVal); err == nil {
		return n, nil
	}
	return 0, fmt.Errorf("port %q not found in container ports", port.StrVal)
}

// probeHTTP succeeds on a status code from 200 to 399, as kubelet's does. HTTPS
// probes are refused: kubelet would skip certificate verification, and this
// project allows no unverified TLS outside test files. Our member pods probe
// etcd's plain-HTTP metrics listener.
func probeHTTP(ctx context.Context, g *corev1.HTTPGetAction, podIP string, spec *corev1.Container) error {
	host := g.Host
	if host == "" {
		host = podIP
	}
	port, err := resolvePort(g.Port, spec)
	if err != nil {
		return err
	}
	scheme := "http"
	if g.Scheme == corev1.URISchemeHTTPS {
		return fmt.Errorf("HTTPS probes are not simulated (kubelet skips certificate verification)")
	}
	u := &url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(port))}
	if ref, err := url.Parse(g.Path); err == nil {
		u.Path, u.RawQuery = ref.Path, ref.RawQuery
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "kube-probe/1.36")
	req.Header.Set("Accept", "*/*")
	for _, h := range g.HTTPHeaders {
		if h.Name == "Host" {
			req.Host = h.Value
			continue
		}
		req.Header.Add(h.Name, h.Value)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("HTTP probe failed with statuscode: %d", resp.StatusCode)
	}
	return nil
}

func probeGRPC(ctx context.Context, g *corev1.GRPCAction, podIP string) error {
	conn, err := grpc.NewClient(net.JoinHostPort(podIP, strconv.Itoa(int(g.Port))), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	service := ""
	if g.Service != nil {
		service = *g.Service
	}
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		return err
	}
	if resp.Status != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("service unhealthy (responded with %q)", resp.Status)
	}
	return nil
}

// exec runs a command inside the running container's namespaces with the
// container's environment; the first word is resolved through the image.
func (c *container) exec(ctx context.Context, command []string) ([]byte, error) {
	if len(command) == 0 {
		return nil, fmt.Errorf("empty command")
	}
	c.w.mu.Lock()
	pid, bins, env, sec := c.pid, c.bins, c.env, c.sec
	c.w.mu.Unlock()
	if pid == 0 {
		return nil, fmt.Errorf("container %s is not running", c.name)
	}
	// As kubectl exec does, the command runs as the container's user.
	args := append([]string{"--target", strconv.Itoa(pid), "--mount", "--net", "--uts", "--"}, sec.setprivArgs(c.w.s.tools.setpriv)...)
	args = append(append(args, bins.execBinary(command[0])), command[1:]...)
	cmd := exec.CommandContext(ctx, c.w.s.tools.nsenter, args...)
	cmd.Env = env
	cmd.Dir = "/"
	return cmd.CombinedOutput()
}
