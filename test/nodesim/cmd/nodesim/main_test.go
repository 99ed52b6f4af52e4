package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
)

func TestUsageErrors(t *testing.T) {
	// A port nothing listens on: bind, then close.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := ln.Addr().String()
	ln.Close()
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no command", nil, "missing command"},
		{"unknown command", []string{"reboot"}, "unknown command"},
		{"fault without kind", []string{"fault"}, "missing kind"},
		{"fault without pod", []string{"fault", "kill", "--container", "etcd"}, "--pod"},
		{"simulator not running", []string{"fault", "kill", "--pod", "ns/etcd-0", "--container", "etcd", "--addr", deadAddr}, "calling nodesim"},
		{"net without verb", []string{"net"}, "want up or down"},
		{"run without kubeconfig", []string{"run", "--kubeconfig", ""}, "--kubeconfig"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := run(tc.args, &out, &errOut)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("run(%q) = %v, want an error containing %q", tc.args, err, tc.wantErr)
			}
		})
	}
}

func TestNetUpDown(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	for index := 240; index < 256; index++ {
		name := fmt.Sprintf("eccli%d", index)
		var out, errOut bytes.Buffer
		args := []string{"--index", fmt.Sprint(index), "--name", name}
		if err := run(append([]string{"net", "up"}, args...), &out, &errOut); err != nil {
			t.Logf("index %d: %v", index, err)
			continue
		}
		if got, want := strings.TrimSpace(out.String()), fmt.Sprintf("10.213.%d.1", index); got != want {
			t.Errorf("net up printed %q, want %q", got, want)
		}
		if _, err := net.InterfaceByName(name); err != nil {
			t.Errorf("bridge %s missing after net up: %v", name, err)
		}
		if err := run(append([]string{"net", "down"}, args...), &out, &errOut); err != nil {
			t.Fatalf("net down: %v", err)
		}
		if _, err := net.InterfaceByName(name); err == nil {
			t.Errorf("bridge %s still there after net down", name)
		}
		return
	}
	t.Fatal("no free network index in 240..255")
}
