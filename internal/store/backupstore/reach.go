package backupstore

import (
	"encoding/json"
	"fmt"
	"net"
	"path"
	"strings"
)

// Reach is the operator-wide allow-list of where the stores an Etcd or an EtcdCopyBackupsTask
// names may be (the OperatorConfiguration's backupStores). Whoever writes a backup Secret or a
// spec chooses the Local provider's host root and the S3 endpoint; the members upload the keyspace
// there and a copy task makes the manager itself dial it, so neither is taken from the namespace
// alone.
type Reach struct {
	// LocalRoots are the host directories the Local provider may use, each as the backup Secret's
	// hostPath names it exactly (an Etcd's directory is <root>/<namespace>/<name>). Empty:
	// DefaultLocalHostPath alone.
	LocalRoots []string `json:"localRoots,omitempty"`
	// Endpoints are the S3 endpoints allowed. Empty: any host over https.
	Endpoints []EndpointRule `json:"endpoints,omitempty"`
	// AllowInsecureEndpoints lets every allowed endpoint be plain http.
	AllowInsecureEndpoints bool `json:"allowInsecureEndpoints,omitempty"`
}

// EndpointsFlag is the endpoint part of r as the member processes take it (Flags.Reach): the
// members dial the endpoint themselves, from the Secret as mounted now, so they check it too.
func (r Reach) EndpointsFlag() string {
	b, _ := json.Marshal(Reach{Endpoints: r.Endpoints, AllowInsecureEndpoints: r.AllowInsecureEndpoints})
	return string(b)
}

// ParseEndpointsFlag reads EndpointsFlag's value.
func ParseEndpointsFlag(v string) (Reach, error) {
	var r Reach
	if err := json.Unmarshal([]byte(v), &r); err != nil {
		return Reach{}, fmt.Errorf("--backup-reach %q: %w", v, err)
	}
	return r, r.Validate()
}

// EndpointRule allows the S3 endpoints whose host matches Host: a name or an IP ("s3.example"),
// "*.example" for any name below example, "*" for any host; with ":port" only that port.
// AllowInsecure lets those be plain http.
type EndpointRule struct {
	Host          string `json:"host"`
	AllowInsecure bool   `json:"allowInsecure,omitempty"`
}

// localRoots is LocalRoots or its default.
func (r Reach) localRoots() []string {
	if len(r.LocalRoots) == 0 {
		return []string{DefaultLocalHostPath}
	}
	return r.LocalRoots
}

// Validate checks the allow-list itself: Local roots absolute, clean and none inside another (an
// Etcd's directory below one root would otherwise be a namespace's or an Etcd's directory below
// the other), endpoint patterns that can match.
func (r Reach) Validate() error {
	roots := r.localRoots()
	for i, root := range roots {
		if !path.IsAbs(root) || path.Clean(root) != root || root == "/" {
			return fmt.Errorf("backupStores.localRoots[%d]: %q is not an absolute clean path other than /", i, root)
		}
		for j, other := range roots {
			if i != j && (other == root || strings.HasPrefix(other, root+"/")) {
				return fmt.Errorf("backupStores.localRoots: %q lies inside (or is) %q: Etcds below the one would reach directories of Etcds below the other", other, root)
			}
		}
	}
	for i, e := range r.Endpoints {
		host := e.Host
		if strings.ContainsAny(host, "/ @") {
			return fmt.Errorf("backupStores.endpoints[%d].host: %q is not a host, *.domain or * (with an optional :port)", i, e.Host)
		}
		if h, port, err := net.SplitHostPort(host); err == nil {
			if port == "" {
				return fmt.Errorf("backupStores.endpoints[%d].host: %q has an empty port", i, e.Host)
			}
			host = h
		}
		if host == "" || strings.ContainsAny(host, "/ ") || (strings.Contains(host, "*") && host != "*" && !strings.HasPrefix(host, "*.")) ||
			strings.Count(host, "*") > 1 {
			return fmt.Errorf("backupStores.endpoints[%d].host: %q is not a host, *.domain or * (with an optional :port)", i, e.Host)
		}
	}
	return nil
}

// LocalRoot is the host root of a Local store whose backup Secret holds secret: its hostPath key,
// else DefaultLocalHostPath, when it is one of the allowed roots. The error is a *SecretError
// saying why not.
func (r Reach) LocalRoot(secret map[string][]byte) (string, error) {
	p := strings.TrimSpace(string(secret[KeyHostPath]))
	if p == "" {
		p = DefaultLocalHostPath
	}
	return p, r.CheckLocalRoot(p)
}

// CheckLocalRoot refuses a host root that is not exactly one of the allowed roots. A directory
// below an allowed root is refused too: <root>/<sub>/<namespace>/<name> of one Etcd can be
// <root>/<namespace>/<name>/… of another (namespace sub, name namespace), so an Etcd's own
// directory is unique only below the same roots for every Etcd.
func (r Reach) CheckLocalRoot(p string) error {
	if !path.IsAbs(p) || path.Clean(p) != p || strings.Contains(p, "..") {
		return &SecretError{Key: KeyHostPath, Reason: fmt.Sprintf("%q is not an absolute clean path (no .., no //, no trailing /)", p)}
	}
	roots := r.localRoots()
	for _, root := range roots {
		if p == root {
			return nil
		}
	}
	return &SecretError{Key: KeyHostPath, Reason: fmt.Sprintf("%q is not one of the host directories the operator allows for the Local provider (backupStores.localRoots: %s)",
		p, strings.Join(roots, ", "))}
}

// CheckEndpoint refuses an S3 endpoint the allow-list does not name, and plain http unless the
// rule that allows the endpoint (or AllowInsecureEndpoints) says so. The error is a *SecretError
// naming the endpoint.
func (r Reach) CheckEndpoint(s S3Settings) error {
	scheme := "https"
	if !s.Secure {
		scheme = "http"
	}
	shown := scheme + "://" + s.Endpoint
	host, port := s.Endpoint, ""
	if h, p, err := net.SplitHostPort(s.Endpoint); err == nil {
		host, port = h, p
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	insecureOK := r.AllowInsecureEndpoints
	if len(r.Endpoints) > 0 {
		matched := false
		for _, e := range r.Endpoints {
			if e.matches(host, port) {
				matched = true
				insecureOK = insecureOK || e.AllowInsecure
			}
		}
		if !matched {
			names := make([]string, len(r.Endpoints))
			for i, e := range r.Endpoints {
				names[i] = e.Host
			}
			return &SecretError{Key: KeyEndpoint, Reason: fmt.Sprintf("%s is not an endpoint the operator allows (backupStores.endpoints: %s)", shown, strings.Join(names, ", "))}
		}
	}
	if !s.Secure && !insecureOK {
		return &SecretError{Key: KeyEndpoint, Reason: fmt.Sprintf("%s is plain http: the members would send the keyspace and the credentials in clear; use https, or have the operator allow it (backupStores.allowInsecureEndpoints, or allowInsecure on the endpoint's entry)", shown)}
	}
	return nil
}

func (e EndpointRule) matches(host, port string) bool {
	pattern, wantPort := e.Host, ""
	if h, p, err := net.SplitHostPort(pattern); err == nil {
		pattern, wantPort = h, p
	}
	if wantPort != "" && wantPort != port {
		return false
	}
	pattern = strings.ToLower(strings.TrimSuffix(pattern, "."))
	switch {
	case pattern == "*":
		return true
	case strings.HasPrefix(pattern, "*."):
		return strings.HasSuffix(host, pattern[1:]) && len(host) > len(pattern)-1
	}
	return host == pattern
}
