package main

import (
	"flag"
	"io"
	"testing"

	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
)

// TestBackupCompressionFlag: the flag the operator sets from spec.backup.compression reaches the
// backup loop's configuration; a policy the loop cannot write is a start-up error.
func TestBackupCompressionFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want snapshot.Compression
		bad  bool
	}{
		{args: nil, want: snapshot.CompressionNone},
		{args: []string{"--compression-policy=gzip"}, want: snapshot.CompressionGzip},
		{args: []string{"--compression-policy=lzw"}, want: snapshot.CompressionLZW},
		{args: []string{"--compression-policy=zlib"}, want: snapshot.CompressionZlib},
		{args: []string{"--compression-policy=brotli"}, bad: true},
	} {
		name := "no flag"
		if len(tc.args) > 0 {
			name = tc.args[0]
		}
		t.Run(name, func(t *testing.T) {
			fs := flag.NewFlagSet("member-agent", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var o backupOptions
			o.register(fs)
			args := append([]string{"--backup-provider=Local", "--backup-spool-dir=/spool", "--full-snapshot-lease=f", "--delta-snapshot-lease=d"}, tc.args...)
			if err := fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			cfg, err := o.config("ns")
			if (err != nil) != tc.bad {
				t.Fatalf("config error %v, want error %v", err, tc.bad)
			}
			if !tc.bad && cfg.Compression != tc.want {
				t.Fatalf("compression %q, want %q", cfg.Compression, tc.want)
			}
		})
	}
}
