package framework

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// A cut closes what the link carries and refuses new dials; a restore lets them through again.
func TestAPIServerLinkCutAndRestore(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, c) }()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	link := NewAPIServerLink()
	conn, err := link.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("dial while up: %v", err)
	}
	if n := link.open(); n != 1 {
		t.Fatalf("%d connections tracked, want 1", n)
	}
	link.Cut()
	if _, err := conn.Write([]byte("x")); err == nil {
		t.Errorf("a connection opened before the cut still writes after it")
	}
	if _, err := link.DialContext(ctx, "tcp", ln.Addr().String()); err == nil || !strings.Contains(err.Error(), "cut") {
		t.Errorf("dial while cut: %v, want a refusal naming the cut", err)
	}
	link.Restore()
	again, err := link.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("dial after the restore: %v", err)
	}
	_ = again.Close()
	if n := link.open(); n != 0 {
		t.Errorf("%d connections tracked after every one closed, want 0", n)
	}
}
