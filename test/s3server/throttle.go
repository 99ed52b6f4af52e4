package s3server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

// Throttle stands in front of a Server and answers some object reads 503 SlowDown, as S3 does
// when a prefix is read faster than it allows: the store is up, lists and takes uploads, but
// will not hand over those objects. It passes every other request to the server unchanged (the
// Host header included, so the clients' SigV4 signatures still hold).
type Throttle struct {
	target *Server
	addr   string
	srv    *http.Server

	mu sync.Mutex
	// match selects the reads to throttle (by object key and the client's IP); nil: none.
	match func(key, client string) bool
	// allow is how many matching reads still pass before the rest are refused.
	allow int
	// refused counts the reads answered 503.
	refused int
}

// NewThrottle listens on host (the address the clients reach) and forwards to target.
func NewThrottle(target *Server, host string) (*Throttle, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("s3server: throttle listen: %w", err)
	}
	upstream, err := url.Parse(target.Endpoint())
	if err != nil {
		l.Close()
		return nil, err
	}
	t := &Throttle{target: target, addr: l.Addr().String()}
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(upstream)
		r.Out.Host = r.In.Host
	}}
	t.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if t.refuse(r) {
			slowDown(w, r)
			return
		}
		proxy.ServeHTTP(w, r)
	})}
	go func() { _ = t.srv.Serve(l) }()
	return t, nil
}

// SlowDown refuses object reads that match selects (by key and client IP), after the next allow
// of them pass.
func (t *Throttle) SlowDown(match func(key, client string) bool, allow int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.match, t.allow = match, allow
}

// Lift lets every request through again.
func (t *Throttle) Lift() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.match = nil
}

// Refused is how many reads were answered 503 so far.
func (t *Throttle) Refused() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.refused
}

// Endpoint is the URL clients use to reach the server through the throttle.
func (t *Throttle) Endpoint() string { return "http://" + t.addr }

// SecretData is the server's backup Secret with the throttle as its endpoint.
func (t *Throttle) SecretData() map[string][]byte {
	data := t.target.SecretData()
	data[backupstore.KeyEndpoint] = []byte(t.Endpoint())
	return data
}

// Close stops listening.
func (t *Throttle) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func (t *Throttle) refuse(r *http.Request) bool {
	if r.Method != http.MethodGet {
		return false
	}
	// Path style: /<bucket>/<key>; a listing is /<bucket> or /<bucket>/ with a query.
	_, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if key == "" {
		return false
	}
	client, _, _ := net.SplitHostPort(r.RemoteAddr)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.match == nil || !t.match(key, client) {
		return false
	}
	if t.allow > 0 {
		t.allow--
		return false
	}
	t.refused++
	return true
}

// slowDown answers as S3 does when throttling.
func slowDown(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(http.StatusServiceUnavailable)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message><Resource>%s</Resource></Error>`, r.URL.Path)
}
