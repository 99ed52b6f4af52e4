package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberpod"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/member/agent"
	"github.com/etcd-conductor/etcd-conductor/internal/member/backup"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

// backupOptions are the member-agent's backup flags; without --backup-provider the agent takes
// no snapshots. The store flags are backupstore.Flags, the very set the init step restores with.
type backupOptions struct {
	store       backupstore.Flags
	cfg         backup.Config
	compression string
	gcPolicy    string
	maxBackups  int
	metricsAddr string
}

func (o *backupOptions) register(fs *flag.FlagSet) {
	c := &o.cfg
	o.store.Register(fs)
	fs.StringVar(&c.SpoolDir, "backup-spool-dir", "", "scratch directory for full snapshots")
	fs.StringVar(&o.compression, "compression-policy", "", "compress full and delta snapshots with gzip, lzw or zlib (spec.backup.compression); empty: none")
	fs.StringVar(&c.FullSchedule, "full-snapshot-schedule", memberpod.DefaultFullSnapshotSchedule, "cron schedule of full snapshots")
	fs.DurationVar(&c.DeltaPeriod, "delta-snapshot-period", 20*time.Second, "period of delta snapshots (0: none)")
	fs.DurationVar(&c.GCPeriod, "garbage-collection-period", time.Minute, "period of garbage collection (0: none)")
	fs.StringVar(&o.gcPolicy, "garbage-collection-policy", "LimitBased", "LimitBased or Exponential")
	fs.IntVar(&o.maxBackups, "max-backups", 7, "full snapshots LimitBased keeps")
	fs.StringVar(&c.FullLease, "full-snapshot-lease", "", "the full snapshot Lease")
	fs.StringVar(&c.DeltaLease, "delta-snapshot-lease", "", "the delta snapshot Lease")
	fs.DurationVar(&c.SnapshotTimeout, "snapshot-timeout", 15*time.Minute, "bound on taking and uploading one snapshot")
	fs.StringVar(&o.metricsAddr, "metrics-address", "", "host:port to serve the backup metrics on (/metrics); empty: not served")
}

// config completes and checks the backup configuration after the flags are parsed.
func (o *backupOptions) config(namespace string) (backup.Config, error) {
	c := o.cfg
	c.Namespace = namespace
	compression, err := snapshot.ParseCompression(o.compression)
	if err != nil {
		return c, fmt.Errorf("--compression-policy: %w", err)
	}
	c.Compression = compression
	c.Store = o.store
	switch o.gcPolicy {
	case "Exponential":
		c.GCPolicy.Exponential = true
	case "LimitBased", "":
		c.GCPolicy.MaxFull = o.maxBackups
	default:
		return c, fmt.Errorf("--garbage-collection-policy %q: want LimitBased or Exponential", o.gcPolicy)
	}
	return c, c.Validate()
}

// startBackup runs the backup loop (and its metrics endpoint) beside the Lease renewal, on its
// own connection to the member: a snapshot stream must not hold up the renewals.
func startBackup(ctx context.Context, cfg backup.Config, sidecar agent.Config, metricsAddr string, leases coordinationv1client.LeasesGetter, log logr.Logger) error {
	creds, err := sidecar.ClientFiles.Load()
	if err != nil {
		return fmt.Errorf("backup: load client certificates: %w", err)
	}
	member, err := etcdclient.DialMember(creds, etcdclient.Target{Name: sidecar.Lease, Address: sidecar.Endpoint, ServerName: sidecar.ServerName},
		etcdclient.Options{DialTimeout: sidecar.CallTimeout, CallTimeout: 10 * time.Second})
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	reg := prometheus.NewRegistry()
	runner, err := backup.NewRunner(cfg, member, leases, backup.NewMetrics(reg), log)
	if err != nil {
		_ = member.Close()
		return err
	}
	if metricsAddr != "" {
		l, err := net.Listen("tcp", metricsAddr)
		if err != nil {
			_ = member.Close()
			return fmt.Errorf("backup metrics: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error(err, "Backup metrics server stopped")
			}
		}()
		go func() {
			<-ctx.Done()
			_ = srv.Close()
		}()
	}
	go func() {
		defer member.Close()
		runner.Run(ctx)
	}()
	return nil
}
