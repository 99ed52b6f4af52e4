package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/plan/*.want.json from the current output")

// farFuture is the clock of the fixture tests: every Lease in testdata is long expired by then,
// so a fixture that forgets --now shows up as a different role source.
func farFuture() time.Time { return time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC) }

// Each fixture is a state file (NAME.yaml or NAME.json) with optional siblings:
// NAME.members.json (passed as --member-status), NAME.args (extra flags), and either
// NAME.want.json (the expected output) or NAME.want.err (text the one-line error must contain;
// the exit code must be 2).
func TestPlanFixtures(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "plan", "*"))
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, f := range files {
		if isSibling(f) {
			continue
		}
		states = append(states, f)
	}
	if len(states) < 10 {
		t.Fatalf("found only %d fixtures in testdata/plan", len(states))
	}
	for _, state := range states {
		base := strings.TrimSuffix(state, filepath.Ext(state))
		t.Run(filepath.Base(base), func(t *testing.T) {
			args := []string{"-f", state}
			if _, err := os.Stat(base + ".members.json"); err == nil {
				args = append(args, "--member-status", base+".members.json")
			}
			if extra, err := os.ReadFile(base + ".args"); err == nil {
				args = append(args, strings.Fields(string(extra))...)
			}
			var stdout, stderr bytes.Buffer
			code := planCommand(args, strings.NewReader(""), &stdout, &stderr, farFuture)

			if wantErr, err := os.ReadFile(base + ".want.err"); err == nil {
				assertOneLineError(t, code, stdout.String(), stderr.String(), strings.TrimSpace(string(wantErr)))
				return
			}
			if code != 0 || stderr.Len() != 0 {
				t.Fatalf("exit %d, stderr %q", code, stderr.String())
			}
			got := decodeOneObject(t, stdout.Bytes())
			wantPath := base + ".want.json"
			if *update {
				if err := os.WriteFile(wantPath, stdout.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			wantData, err := os.ReadFile(wantPath)
			if err != nil {
				t.Fatalf("no expected output (run go test -run TestPlanFixtures -update and review it): %v", err)
			}
			if want := decodeOneObject(t, wantData); !reflect.DeepEqual(got, want) {
				t.Fatalf("output differs from %s\ngot:\n%s", wantPath, stdout.String())
			}
		})
	}
}

func isSibling(path string) bool {
	for _, suffix := range []string{".members.json", ".want.json", ".want.err", ".args"} {
		if strings.HasSuffix(path, suffix) {
			return true
		}
	}
	return false
}

// decodeOneObject checks the output is exactly one JSON object and returns it.
func decodeOneObject(t *testing.T, data []byte) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		t.Fatalf("output is not a JSON object: %v\n%s", err, data)
	}
	if dec.More() {
		t.Fatalf("output holds more than one JSON value:\n%s", data)
	}
	for _, key := range []string{"action", "pods", "rule", "reason", "roleSource"} {
		if _, ok := obj[key]; !ok {
			t.Errorf("output lacks %q", key)
		}
	}
	return obj
}

func assertOneLineError(t *testing.T, code int, stdout, stderr, want string) {
	t.Helper()
	if code != 2 {
		t.Errorf("exit code %d, want 2", code)
	}
	if stdout != "" {
		t.Errorf("stdout %q, want nothing", stdout)
	}
	if strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") {
		t.Errorf("stderr is not exactly one line: %q", stderr)
	}
	if !strings.HasPrefix(stderr, "etcd-conductor plan: ") || !strings.Contains(stderr, want) {
		t.Errorf("stderr %q, want a plan error containing %q", stderr, want)
	}
}

func TestPlanUsageErrors(t *testing.T) {
	fixture := filepath.Join("testdata", "plan", "single-node.yaml")
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"missing file", []string{"-f", filepath.Join("testdata", "plan", "does-not-exist.yaml")}, "reading state: open testdata/plan/does-not-exist.yaml: no such file or directory"},
		{"missing member status file", []string{"-f", fixture, "--member-status", "nope.json"}, "reading member status: open nope.json"},
		{"no -f", nil, "-f STATE is required"},
		{"unknown flag", []string{"-f", fixture, "--bogus"}, "flag provided but not defined: -bogus"},
		{"stray argument", []string{"-f", fixture, "extra"}, `unexpected arguments ["extra"]`},
		{"bad --now", []string{"-f", fixture, "--now", "yesterday"}, "--now: parsing time"},
		{"live mode not there yet", []string{"--kubeconfig", "kc", "-n", "shoot", "--etcd", "etcd-main"}, "live mode (--kubeconfig, -n, --etcd) is not implemented yet"},
		{"empty stdin", []string{"-f", "-"}, "state is empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := planCommand(tc.args, strings.NewReader(""), &stdout, &stderr, farFuture)
			assertOneLineError(t, code, stdout.String(), stderr.String(), tc.want)
		})
	}
}

func TestPlanReadsStdin(t *testing.T) {
	state, err := os.ReadFile(filepath.Join("testdata", "plan", "single-node.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := planCommand([]string{"-f", "-", "--now", "2026-11-22T09:00:00Z"}, bytes.NewReader(state), &stdout, &stderr, farFuture)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	got := decodeOneObject(t, stdout.Bytes())
	if got["action"] != "delete" || got["rule"] != "single-node" || got["roleSource"] != "lease" {
		t.Fatalf("unexpected decision %v", got)
	}
}

func TestPlanWithoutNowUsesTheClock(t *testing.T) {
	// The same state evaluated on the day it was captured and years later: the Leases have
	// expired, so the roles are no longer known.
	fixture := filepath.Join("testdata", "plan", "single-node.yaml")
	for _, tc := range []struct {
		clock      func() time.Time
		roleSource string
	}{
		{func() time.Time { return time.Date(2026, 11, 22, 9, 0, 1, 0, time.UTC) }, "lease"},
		{farFuture, "none"},
	} {
		var stdout, stderr bytes.Buffer
		if code := planCommand([]string{"-f", fixture}, strings.NewReader(""), &stdout, &stderr, tc.clock); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		if got := decodeOneObject(t, stdout.Bytes()); got["roleSource"] != tc.roleSource {
			t.Errorf("at %s roleSource = %v, want %s", tc.clock(), got["roleSource"], tc.roleSource)
		}
	}
}

func TestPlanHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := planCommand([]string{"-h"}, strings.NewReader(""), &stdout, &stderr, farFuture); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(stderr.String(), "usage: etcd-conductor plan -f STATE") {
		t.Fatalf("help text missing: %q", stderr.String())
	}
}
