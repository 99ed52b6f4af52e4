package fleet

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/stack"
)

// RolloutOptions configure the fleet-wide image bump of real members.
type RolloutOptions struct {
	// Clusters of Replicas members each, all bumped at once.
	Clusters int
	Replicas int32
	// FeatureGates and ExtraConfig as in Options.
	FeatureGates map[string]bool
	ExtraConfig  map[string]string
	Timeout      time.Duration
	WorkDir      string
	Log          io.Writer
}

// RolloutResult is one binary's fleet-wide image bump.
type RolloutResult struct {
	Binary   Binary `json:"binary"`
	Clusters int    `json:"clusters"`
	Replicas int32  `json:"replicas"`
	// StartSeconds per cluster: from the bump until its first member was replaced (a pod of
	// the update revision, or a member pod terminating).
	StartSeconds []float64 `json:"startSeconds"`
	// LastStartSeconds is the largest of StartSeconds: when the last rollout started.
	LastStartSeconds float64 `json:"lastStartSeconds"`
	// AllConvergedSeconds: until every member of every cluster ran the new image and was ready.
	AllConvergedSeconds float64 `json:"allConvergedSeconds"`
	TimedOut            bool    `json:"timedOut,omitempty"`
	Error               string  `json:"error,omitempty"`
}

// RunRollouts brings up the proving ground (node simulator playing the kubelet, real etcd
// members with mTLS) once and, for each binary in turn, creates the clusters, starts that
// binary's manager, bumps every cluster's image at once and measures when each rollout starts.
func RunRollouts(ctx context.Context, bins []Binary, o RolloutOptions) ([]RolloutResult, error) {
	if o.Replicas == 0 {
		o.Replicas = 3
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Minute
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	s, err := stack.Start(ctx, stack.Options{WorkDir: filepath.Join(o.WorkDir, "stack")})
	if err != nil {
		return nil, fmt.Errorf("starting the proving ground: %w", err)
	}
	defer func() { _ = s.Stop() }()
	var out []RolloutResult
	for i, bin := range bins {
		res, err := rolloutOnce(ctx, s, bin, o, i)
		if err != nil {
			res.Error = err.Error()
			fmt.Fprintf(o.Log, "%s [%s rollout] did not finish: %v\n", time.Now().UTC().Format("15:04:05"), bin.Label, err)
		}
		out = append(out, res)
		if ctx.Err() != nil {
			break
		}
	}
	return out, nil
}

func rolloutOnce(ctx context.Context, s *stack.Stack, bin Binary, o RolloutOptions, run int) (RolloutResult, error) {
	res := RolloutResult{Binary: bin, Clusters: o.Clusters, Replicas: o.Replicas}
	logf := func(format string, args ...any) {
		fmt.Fprintf(o.Log, "%s [%s rollout] %s\n", time.Now().UTC().Format("15:04:05"), bin.Label, fmt.Sprintf(format, args...))
	}
	dir := filepath.Join(o.WorkDir, "rollout-"+bin.Label)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, err
	}
	// The manager's metrics are not scraped here; it still serves them (from a certificate
	// of its own), so no token is needed.
	m, err := startManager(managerConfig{binary: bin, kubeconfig: s.Cluster.KubeconfigPath(), workDir: dir,
		featureGates: o.FeatureGates, extraConfig: o.ExtraConfig[bin.Label]}, run)
	if err != nil {
		return res, err
	}
	defer func() { _ = m.stop() }()
	from, to := framework.EtcdImage(etcdVersion), framework.EtcdImage(bumpVersion)
	var clusters []*stack.EtcdCluster
	defer func() {
		// All at once: each deletion waits for its pods to finish.
		err := forEach(clusters, func(c *stack.EtcdCluster) error {
			if err := s.DeleteNamespace(context.Background(), c.Namespace); err != nil {
				return fmt.Errorf("deleting %s: %w", c.Namespace, err)
			}
			return nil
		})
		if err != nil {
			logf("%v", err)
		}
	}()
	for i := range o.Clusters {
		c, err := s.CreateEtcd(ctx, fmt.Sprintf("rollout-%s-%d-", bin.Label, i), "etcd", o.Replicas, from)
		if err != nil {
			return res, err
		}
		clusters = append(clusters, c)
	}
	upCtx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	if err := forEach(clusters, func(c *stack.EtcdCluster) error { return c.WaitConverged(upCtx, from) }); err != nil {
		return res, fmt.Errorf("clusters did not come up: %w", err)
	}
	logf("%d clusters of %d members up; bumping all to %s", len(clusters), o.Replicas, to)
	bumped := time.Now()
	for _, c := range clusters {
		if err := c.SetImage(ctx, to); err != nil {
			return res, err
		}
	}
	res.StartSeconds = make([]float64, len(clusters))
	var mu sync.Mutex
	rollCtx, cancelRoll := context.WithTimeout(ctx, o.Timeout)
	defer cancelRoll()
	err = forEach(clusters, func(c *stack.EtcdCluster) error {
		started := false
		for {
			if err := m.alive(); err != nil {
				return err
			}
			st, err := c.State(rollCtx)
			if err == nil && st.Image == to && (st.Updated > 0 || st.Terminating > 0) && !started {
				started = true
				mu.Lock()
				res.StartSeconds[indexOf(clusters, c)] = time.Since(bumped).Seconds()
				mu.Unlock()
			}
			if err == nil && st.Image == to && st.Updated == c.Replicas && st.Ready == c.Replicas && st.Terminating == 0 {
				return nil
			}
			if err := sleep(rollCtx, 250*time.Millisecond); err != nil {
				return fmt.Errorf("%s/%s (%s): %w", c.Namespace, c.Name, st, err)
			}
		}
	})
	res.AllConvergedSeconds = time.Since(bumped).Seconds()
	for _, v := range res.StartSeconds {
		res.LastStartSeconds = max(res.LastStartSeconds, v)
	}
	if err != nil {
		res.TimedOut = rollCtx.Err() != nil
		return res, err
	}
	logf("last rollout started %.1fs after the bump, all converged after %.1fs", res.LastStartSeconds, res.AllConvergedSeconds)
	return res, nil
}

func indexOf(clusters []*stack.EtcdCluster, c *stack.EtcdCluster) int {
	for i := range clusters {
		if clusters[i] == c {
			return i
		}
	}
	return -1
}

// forEach runs f for every cluster at once and returns the first error.
func forEach(clusters []*stack.EtcdCluster, f func(*stack.EtcdCluster) error) error {
	errs := make(chan error, len(clusters))
	for _, c := range clusters {
		go func() { errs <- f(c) }()
	}
	var first error
	for range clusters {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}
