package nodesim

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// Pods are named "namespace/name" throughout the fault API.

func (s *Simulator) container(pod, name string) (*container, error) {
	w, err := s.worker(pod)
	if err != nil {
		return nil, err
	}
	for _, c := range append(append([]*container{}, w.init...), w.containers...) {
		if c.name == name {
			return c, nil
		}
	}
	return nil, fmt.Errorf("pod %s has no container %q", pod, name)
}

// Kill SIGKILLs the container's processes; it is restarted per restartPolicy.
func (s *Simulator) Kill(pod, container string) error {
	c, err := s.container(pod, container)
	if err != nil {
		return err
	}
	return c.signalGroup(syscall.SIGKILL)
}

// Hang freezes the container's processes (SIGSTOP): the process exists, its
// sockets accept connections into the backlog, nothing answers.
func (s *Simulator) Hang(pod, container string) error {
	c, err := s.container(pod, container)
	if err != nil {
		return err
	}
	return c.signalGroup(syscall.SIGSTOP)
}

// Resume undoes Hang (SIGCONT).
func (s *Simulator) Resume(pod, container string) error {
	c, err := s.container(pod, container)
	if err != nil {
		return err
	}
	return c.signalGroup(syscall.SIGCONT)
}

// Partition drops all traffic of the pod's eth0 in both directions
// (including kubelet probes and host clients); loopback inside the pod keeps working.
func (s *Simulator) Partition(pod string) error {
	pn, err := s.podNetwork(pod)
	if err != nil {
		return err
	}
	return pn.partition()
}

// PartitionFrom drops the traffic between the pod and the given peer IPs, in both directions;
// everything else (other pods, kubelet probes, host clients) still gets through. A member
// partitioned from one peer stays reachable by the operator and the monitors.
func (s *Simulator) PartitionFrom(pod string, peerIPs ...string) error {
	pn, err := s.podNetwork(pod)
	if err != nil {
		return err
	}
	return pn.apply(peerRules(peerIPs))
}

// Mute makes the pod's listener on port unreachable from outside the pod while leaving what the
// pod dials out alone: connections to that port are dropped, and so is what the pod still sends
// from it on connections opened before. On an etcd member's peer port it is a member that hears
// its peers (it reads their messages on streams it dialed) while they do not hear it (they read
// its messages on streams they dialed to it): the leader keeps it, but its votes, acks and read
// requests are lost. Its client port, the kubelet's probes and host clients are untouched.
func (s *Simulator) Mute(pod string, port int) error {
	if port <= 0 || port > 65535 {
		return fmt.Errorf("muting %s: port %d out of range", pod, port)
	}
	pn, err := s.podNetwork(pod)
	if err != nil {
		return err
	}
	return pn.apply(muteRules(port))
}

// DelayFrom slows the link between the pod and the given peer IPs: every packet between them,
// either way, arrives delay late, as over a long or congested path. Everything else (other pods,
// kubelet probes, host clients) goes straight through. Heal lifts it and delivers what is held.
func (s *Simulator) DelayFrom(pod string, delay time.Duration, peerIPs ...string) error {
	if delay <= 0 {
		return fmt.Errorf("delaying %s: the delay must be positive, got %s", pod, delay)
	}
	pn, err := s.podNetwork(pod)
	if err != nil {
		return err
	}
	return pn.slowLink(delay, peerIPs)
}

// podNetwork is the pod's network, once it has one: what the network faults act on.
func (s *Simulator) podNetwork(pod string) (*podNetwork, error) {
	w, err := s.worker(pod)
	if err != nil {
		return nil, err
	}
	pn := w.network()
	if pn == nil {
		return nil, fmt.Errorf("pod %s has no network yet", pod)
	}
	return pn, nil
}

// Heal undoes Partition, PartitionFrom, Mute and DelayFrom.
func (s *Simulator) Heal(pod string) error {
	pn, err := s.podNetwork(pod)
	if err != nil {
		return err
	}
	return pn.heal()
}

// CrashOnStart makes every following start of the container (in this pod or
// a pod recreated with the same name) exit 1 immediately, until turned off.
func (s *Simulator) CrashOnStart(pod, container string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := pod + "/" + container
	if on {
		s.crashOnStart[key] = true
	} else {
		delete(s.crashOnStart, key)
	}
}

// ForgetNamespace is the simulator's part of deleting a test namespace: it lifts the faults set
// for pods in it (a later namespace may reuse a pod name) and returns what it still holds of the
// namespace: pods it runs and claim volumes it has not reclaimed. Once the namespace is gone and
// its events are handled, that is nothing, and its data directory is removed.
func (s *Simulator) ForgetNamespace(namespace string) (stillHeld []string) {
	s.mu.Lock()
	prefix := namespace + "/"
	for key := range s.crashOnStart {
		if strings.HasPrefix(key, prefix) {
			delete(s.crashOnStart, key)
		}
	}
	for key := range s.byName {
		if strings.HasPrefix(key, prefix) {
			stillHeld = append(stillHeld, "pod "+key)
		}
	}
	s.mu.Unlock()
	dataDir := filepath.Join(s.o.DataDir, namespace)
	volumes, err := os.ReadDir(dataDir)
	for _, v := range volumes {
		stillHeld = append(stillHeld, "volume "+filepath.Join(dataDir, v.Name()))
	}
	if err == nil && len(stillHeld) == 0 {
		if err := os.Remove(dataDir); err != nil {
			stillHeld = append(stillHeld, fmt.Sprintf("data directory %s: %v", dataDir, err))
		}
	}
	sort.Strings(stillHeld)
	return stillHeld
}

// PodIP returns the IP of the pod's current sandbox.
func (s *Simulator) PodIP(pod string) (string, error) {
	pn, err := s.podNetwork(pod)
	if err != nil {
		return "", err
	}
	return pn.ip.String(), nil
}

// Logs returns the path of the container's log file (stdout and stderr of
// every run, appended).
func (s *Simulator) Logs(pod, container string) (string, error) {
	c, err := s.container(pod, container)
	if err != nil {
		return "", err
	}
	return c.logPath(), nil
}

// Exec runs command inside the running container (its network, mount and
// UTS namespaces, its environment) and returns the combined output.
func (s *Simulator) Exec(ctx context.Context, pod, container string, command ...string) ([]byte, error) {
	c, err := s.container(pod, container)
	if err != nil {
		return nil, err
	}
	return c.exec(ctx, command)
}

func (w *podWorker) network() *podNetwork {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.net
}
