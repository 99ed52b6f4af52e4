package nodesim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// The control endpoint exposes the fault API over HTTP on loopback so the
// CLI (and shell scripts) can inject faults into a running simulator:
//
//	POST /v1/fault/{kill,hang,resume,partition,heal,crash-on-start}?pod=ns/name&container=c[&on=true]
//	POST /v1/fault/delay-from?pod=ns/name&delay=250ms&peer=10.213.0.3[&peer=...]
//	POST /v1/fault/mute?pod=ns/name&port=2380
//	GET  /v1/pod-ip?pod=ns/name
//	GET  /v1/logs?pod=ns/name&container=c       (the log file path)
//
// Answers are JSON {"result": "..."} or {"error": "..."}.

func (s *Simulator) serveControl(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("control address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("control address %q must be a loopback IP", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	s.control = &http.Server{Handler: s.controlHandler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.control.Serve(ln) }()
	return nil
}

// ControlAddr is where the control endpoint listens ("" when disabled).
func (s *Simulator) ControlAddr() string { return s.o.ControlAddr }

func (s *Simulator) controlHandler() http.Handler {
	mux := http.NewServeMux()
	fault := func(name string, f func(pod, container string, q url.Values) error) {
		mux.HandleFunc("POST /v1/fault/"+name, func(rw http.ResponseWriter, r *http.Request) {
			q := r.URL.Query()
			reply(rw, "ok", f(q.Get("pod"), q.Get("container"), q))
		})
	}
	fault("kill", func(p, c string, _ url.Values) error { return s.Kill(p, c) })
	fault("hang", func(p, c string, _ url.Values) error { return s.Hang(p, c) })
	fault("resume", func(p, c string, _ url.Values) error { return s.Resume(p, c) })
	fault("partition", func(p, _ string, _ url.Values) error { return s.Partition(p) })
	fault("heal", func(p, _ string, _ url.Values) error { return s.Heal(p) })
	fault("crash-on-start", func(p, c string, q url.Values) error {
		on, err := strconv.ParseBool(q.Get("on"))
		if err != nil {
			return fmt.Errorf("on: %w", err)
		}
		s.CrashOnStart(p, c, on)
		return nil
	})
	fault("mute", func(p, _ string, q url.Values) error {
		port, err := strconv.Atoi(q.Get("port"))
		if err != nil {
			return fmt.Errorf("port: %w", err)
		}
		return s.Mute(p, port)
	})
	fault("delay-from", func(p, _ string, q url.Values) error {
		delay, err := time.ParseDuration(q.Get("delay"))
		if err != nil {
			return fmt.Errorf("delay: %w", err)
		}
		return s.DelayFrom(p, delay, q["peer"]...)
	})
	mux.HandleFunc("GET /v1/pod-ip", func(rw http.ResponseWriter, r *http.Request) {
		ip, err := s.PodIP(r.URL.Query().Get("pod"))
		reply(rw, ip, err)
	})
	mux.HandleFunc("GET /v1/logs", func(rw http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		p, err := s.Logs(q.Get("pod"), q.Get("container"))
		reply(rw, p, err)
	})
	return mux
}

type controlReply struct {
	Result string `json:"result,omitempty"`
	Error  string `json:"error,omitempty"`
}

func reply(rw http.ResponseWriter, result string, err error) {
	rw.Header().Set("Content-Type", "application/json")
	if err != nil {
		rw.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(rw).Encode(controlReply{Error: err.Error()})
		return
	}
	_ = json.NewEncoder(rw).Encode(controlReply{Result: result})
}

// ControlRequest calls a running simulator's control endpoint; method is
// GET or POST, path e.g. "/v1/fault/kill", and it returns the result string.
func ControlRequest(ctx context.Context, addr, method, path string, params url.Values) (string, error) {
	u := url.URL{Scheme: "http", Host: addr, Path: path, RawQuery: params.Encode()}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("calling nodesim at %s: %w", addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	var r controlReply
	if err := json.Unmarshal(body, &r); err != nil {
		return "", fmt.Errorf("nodesim answered %s: %s", resp.Status, body)
	}
	if r.Error != "" {
		return "", errors.New(r.Error)
	}
	return r.Result, nil
}
