// Package s3server runs a real S3-compatible server for tests: versitygw (an S3 gateway over a
// directory, built from the Go module proxy by `make tools`) with generated root credentials.
// Stop and Start again keep the address, credentials and data, so a test can take the store
// away and bring it back.
package s3server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster/proc"
)

// Binary is the server's executable name in the binary directory.
const Binary = "versitygw"

// Region is the region the server reports.
const Region = "us-east-1"

// Options say where the server listens and keeps its data.
type Options struct {
	// Host is the address to listen on: 127.0.0.1 for tests on the host, the node simulator's
	// gateway IP for pods. Default 127.0.0.1.
	Host string
	// Dir holds the buckets, metadata and the log. Required.
	Dir string
	// BinDir holds versitygw. Default $ETCD_CONDUCTOR_BIN_DIR, else <repo>/bin.
	BinDir string
}

// Server is a running (or stopped) versitygw.
type Server struct {
	opts      Options
	addr      string
	accessKey string
	secretKey string
	proc      *proc.Process
}

// New picks a free port and generates credentials; Start runs the server.
func New(opts Options) (*Server, error) {
	if opts.Dir == "" {
		return nil, errors.New("s3server: Dir is required")
	}
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if opts.BinDir == "" {
		dir, err := etcdtest.BinDir()
		if err != nil {
			return nil, err
		}
		opts.BinDir = dir
	}
	if _, err := os.Stat(filepath.Join(opts.BinDir, Binary)); err != nil {
		return nil, fmt.Errorf("s3server: %s not in %s (run make tools): %w", Binary, opts.BinDir, err)
	}
	port, err := etcdtest.FreePort(opts.Host)
	if err != nil {
		return nil, err
	}
	return &Server{
		opts:      opts,
		addr:      net.JoinHostPort(opts.Host, strconv.Itoa(port)),
		accessKey: "conductor" + randomHex(6),
		secretKey: randomHex(20),
	}, nil
}

// Start runs the server and waits until it answers.
func (s *Server) Start(ctx context.Context) error {
	if s.proc != nil {
		return fmt.Errorf("s3server %s already running", s.addr)
	}
	data, meta := filepath.Join(s.opts.Dir, "data"), filepath.Join(s.opts.Dir, "meta")
	for _, d := range []string{data, meta} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("s3server: %w", err)
		}
	}
	p, err := proc.Start(proc.Spec{
		Name:   Binary,
		Binary: filepath.Join(s.opts.BinDir, Binary),
		Args: []string{"--port", s.addr, "--access", s.accessKey, "--secret", s.secretKey,
			"--region", Region, "--health", "/healthz", "--quiet",
			"posix", "--sidecar", meta, data},
		// The credentials go on the command line only: no environment of ours leaks in.
		Env:     []string{"HOME=" + s.opts.Dir},
		LogPath: filepath.Join(s.opts.Dir, "versitygw.log"),
	})
	if err != nil {
		return err
	}
	s.proc = p
	return s.waitHealthy(ctx)
}

func (s *Server) waitHealthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-s.proc.Exited():
			err := fmt.Errorf("s3server exited: %v; log: %s", s.proc.ExitError(), s.proc.LogTail(20))
			s.proc = nil
			return err
		default:
		}
		resp, err := client.Get("http://" + s.addr + "/healthz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("s3server %s not healthy: %w (last: %v); log: %s", s.addr, ctx.Err(), err, s.proc.LogTail(20))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop ends the server; its data stays for a later Start.
func (s *Server) Stop() error {
	if s.proc == nil {
		return nil
	}
	err := s.proc.Stop(5 * time.Second)
	s.proc = nil
	return err
}

// Addr is host:port.
func (s *Server) Addr() string { return s.addr }

// Endpoint is the URL clients use.
func (s *Server) Endpoint() string { return "http://" + s.addr }

// SecretData is an etcd-druid style backup Secret for this server.
func (s *Server) SecretData() map[string][]byte {
	return map[string][]byte{
		backupstore.KeyAccessKeyID:     []byte(s.accessKey),
		backupstore.KeySecretAccessKey: []byte(s.secretKey),
		backupstore.KeyRegion:          []byte(Region),
		backupstore.KeyEndpoint:        []byte(s.Endpoint()),
		backupstore.KeyForcePathStyle:  []byte("true"),
	}
}

// CreateBucket makes a bucket (etcd-conductor, like etcd-backup-restore, never creates one).
func (s *Server) CreateBucket(ctx context.Context, name string) error {
	client, err := minio.New(s.addr, &minio.Options{
		Creds:        credentials.NewStaticV4(s.accessKey, s.secretKey, ""),
		Region:       Region,
		BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		return err
	}
	if err := client.MakeBucket(ctx, name, minio.MakeBucketOptions{Region: Region}); err != nil {
		return fmt.Errorf("create bucket %s: %w", name, err)
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}
