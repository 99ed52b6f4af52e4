package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestDispatch: help asked for is answered on stdout with exit 0; a missing or unknown
// subcommand gets the usage on stderr and exit 2; --version is the version subcommand.
func TestDispatch(t *testing.T) {
	for _, tt := range []struct {
		name                   string
		args                   []string
		wantCode               int
		wantStdout, wantStderr string
	}{
		{"--help", []string{"--help"}, 0, "version       print the release", ""},
		{"-h", []string{"-h"}, 0, "plan ", ""},
		{"help", []string{"help"}, 0, "member-agent", ""},
		{"nothing", nil, 2, "", "usage: etcd-conductor {manager|member-agent|plan|version}"},
		{"unknown", []string{"bogus"}, 2, "", `unknown subcommand "bogus"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := dispatch(tt.args, &stdout, &stderr); code != tt.wantCode {
				t.Errorf("exit %d, want %d", code, tt.wantCode)
			}
			if !strings.Contains(stdout.String(), tt.wantStdout) || (tt.wantStdout == "" && stdout.Len() > 0) {
				t.Errorf("stdout %q, want %q", stdout.String(), tt.wantStdout)
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) || (tt.wantStderr == "" && stderr.Len() > 0) {
				t.Errorf("stderr %q, want %q", stderr.String(), tt.wantStderr)
			}
		})
	}
}
