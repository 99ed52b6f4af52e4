package backupstore

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// Provider is the kind of store a spec.backup.store.provider value stands for.
type Provider string

const (
	ProviderS3    Provider = "S3"
	ProviderLocal Provider = "Local"
)

// providers maps etcd-druid's provider names (infrastructure names and etcd-backup-restore's
// storage names) to the stores here. S3-compatible ones go through the S3 client.
var providers = map[string]Provider{
	"aws": ProviderS3, "S3": ProviderS3, "s3": ProviderS3,
	"stackit": ProviderS3,
	"Local":   ProviderLocal, "local": ProviderLocal,
}

// druidOnly are the providers etcd-druid knows that are not implemented here.
var druidOnly = map[string]bool{
	"azure": true, "ABS": true, "gcp": true, "GCS": true, "alicloud": true, "OSS": true,
	"openstack": true, "Swift": true, "dell": true, "ECS": true, "openshift": true, "OCS": true,
}

// ProviderError is an unknown or unsupported spec.backup.store.provider.
type ProviderError struct {
	Provider string
	// Known is true for a provider etcd-druid supports that etcd-conductor does not (yet).
	Known bool
}

func (e *ProviderError) Error() string {
	if e.Known {
		return fmt.Sprintf("backup store provider %q is not supported here (supported: aws/S3, stackit, Local)", e.Provider)
	}
	if e.Provider == "" {
		return "backup store provider is not set (supported: aws/S3, stackit, Local)"
	}
	return fmt.Sprintf("unknown backup store provider %q (supported: aws/S3, stackit, Local)", e.Provider)
}

// SecretError is a backup Secret that lacks a key or holds an unusable value.
type SecretError struct {
	Key    string
	Reason string
}

func (e *SecretError) Error() string {
	return fmt.Sprintf("backup store secret: %s: %s", e.Key, e.Reason)
}

// ParseProvider resolves a spec.backup.store.provider value; the error is a *ProviderError.
func ParseProvider(name string) (Provider, error) {
	if p, ok := providers[name]; ok {
		return p, nil
	}
	return "", &ProviderError{Provider: name, Known: druidOnly[name]}
}

// Secret keys, as etcd-backup-restore reads them from an S3 backup Secret.
const (
	KeyAccessKeyID        = "accessKeyID"
	KeySecretAccessKey    = "secretAccessKey"
	KeyRegion             = "region"
	KeyEndpoint           = "endpoint"
	KeyForcePathStyle     = "s3ForcePathStyle"
	KeyDisableSSL         = "disableSSL"
	KeyTrustedCACert      = "trustedCaCert"
	KeyInsecureSkipVerify = "insecureSkipVerify"
	// KeyHostPath is etcd-druid's key for the host directory of the Local provider.
	KeyHostPath = "hostPath"
)

// DefaultLocalHostPath is etcd-druid's default host directory for the Local provider.
const DefaultLocalHostPath = "/etc/gardener/local-backupbuffer"

// Config is what a store is built from: spec.backup.store and the Secret's data.
type Config struct {
	Provider  string
	Container string
	Prefix    string
	// EndpointOverride is spec.backup.store.endpointOverride: it replaces the Secret's endpoint.
	EndpointOverride string
	Secret           map[string][]byte
	// LocalRoot is where the Local provider's volume is mounted; the container is a directory
	// below it.
	LocalRoot string
	// Reach, when set, is checked before an S3 store is built: an endpoint it refuses is an error
	// (a *SecretError) and never dialled.
	Reach *Reach
}

// S3Settings is an S3 Secret read and checked.
type S3Settings struct {
	Endpoint       string // host[:port], no scheme
	Secure         bool
	Region         string
	AccessKeyID    string
	SecretKey      string
	ForcePathStyle bool
	TrustedCAPEM   []byte
}

// ParseS3Secret reads etcd-backup-restore's S3 keys. Without an endpoint it is AWS
// (s3.<region>.amazonaws.com). insecureSkipVerify is refused: name the CA with trustedCaCert.
func ParseS3Secret(data map[string][]byte) (S3Settings, error) {
	var s S3Settings
	s.AccessKeyID = strings.TrimSpace(string(data[KeyAccessKeyID]))
	s.SecretKey = strings.TrimSpace(string(data[KeySecretAccessKey]))
	s.Region = strings.TrimSpace(string(data[KeyRegion]))
	switch {
	case s.AccessKeyID == "":
		return S3Settings{}, &SecretError{Key: KeyAccessKeyID, Reason: "missing or empty"}
	case s.SecretKey == "":
		return S3Settings{}, &SecretError{Key: KeySecretAccessKey, Reason: "missing or empty"}
	}
	for _, k := range []string{KeyForcePathStyle, KeyDisableSSL, KeyInsecureSkipVerify} {
		if v, ok := data[k]; ok {
			if _, err := strconv.ParseBool(strings.TrimSpace(string(v))); err != nil {
				return S3Settings{}, &SecretError{Key: k, Reason: fmt.Sprintf("%q is not true or false", v)}
			}
		}
	}
	flag := func(k string) bool { b, _ := strconv.ParseBool(strings.TrimSpace(string(data[k]))); return b }
	if flag(KeyInsecureSkipVerify) {
		return S3Settings{}, &SecretError{Key: KeyInsecureSkipVerify, Reason: "certificate verification cannot be turned off; put the endpoint's CA in trustedCaCert"}
	}
	s.ForcePathStyle = flag(KeyForcePathStyle)
	s.Secure = !flag(KeyDisableSSL)
	s.TrustedCAPEM = data[KeyTrustedCACert]
	endpoint := strings.TrimSpace(string(data[KeyEndpoint]))
	if endpoint == "" {
		if s.Region == "" {
			return S3Settings{}, &SecretError{Key: KeyRegion, Reason: "missing: without an endpoint the store is AWS S3, which needs a region"}
		}
		s.Endpoint = "s3." + s.Region + ".amazonaws.com"
		return s, nil
	}
	if strings.Contains(endpoint, "://") {
		u, err := url.Parse(endpoint)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return S3Settings{}, &SecretError{Key: KeyEndpoint, Reason: fmt.Sprintf("%q is not http(s)://host[:port]", endpoint)}
		}
		if u.Path != "" && u.Path != "/" {
			return S3Settings{}, &SecretError{Key: KeyEndpoint, Reason: fmt.Sprintf("%q has a path; the bucket is spec.backup.store.container", endpoint)}
		}
		s.Endpoint, s.Secure = u.Host, u.Scheme == "https"
	} else {
		s.Endpoint = endpoint
	}
	if s.Region == "" {
		s.Region = "us-east-1"
	}
	return s, nil
}

// New builds the store cfg describes. Errors are a *ProviderError or *SecretError (or wrap
// one), so a caller can report them as a spec problem, not a crash.
func New(cfg Config) (Store, error) {
	p, err := ParseProvider(cfg.Provider)
	if err != nil {
		return nil, err
	}
	if cfg.Container == "" {
		return nil, fmt.Errorf("backup store container (bucket or directory) is not set")
	}
	switch p {
	case ProviderLocal:
		if cfg.LocalRoot == "" {
			return nil, fmt.Errorf("local backup store: no directory to write to")
		}
		return NewLocal(cfg.LocalRoot, cfg.Container, cfg.Prefix)
	default:
		s, err := ParseS3Secret(WithEndpointOverride(cfg.Secret, cfg.EndpointOverride))
		if err != nil {
			return nil, err
		}
		if cfg.Reach != nil {
			if err := cfg.Reach.CheckEndpoint(s); err != nil {
				return nil, err
			}
		}
		return NewS3(s, cfg.Container, cfg.Prefix)
	}
}

// WithEndpointOverride is the Secret's data with spec.backup.store.endpointOverride, when set, in
// place of its endpoint; data itself is not changed.
func WithEndpointOverride(data map[string][]byte, override string) map[string][]byte {
	if override == "" {
		return data
	}
	out := make(map[string][]byte, len(data)+1)
	for k, v := range data {
		out[k] = v
	}
	out[KeyEndpoint] = []byte(override)
	return out
}

// Location names the objects a configuration reaches, so that two configurations can be told to
// reach the same ones: the provider's kind, the S3 endpoint or the Local root, the container and
// the prefix. "" when the configuration cannot be opened.
func (c Config) Location() string {
	p, err := ParseProvider(c.Provider)
	if err != nil {
		return ""
	}
	where := c.LocalRoot
	if p == ProviderS3 {
		s, err := ParseS3Secret(WithEndpointOverride(c.Secret, c.EndpointOverride))
		if err != nil {
			return ""
		}
		where = s.Endpoint
	}
	return fmt.Sprintf("%s %s/%s/%s", p, strings.TrimRight(where, "/"), strings.Trim(c.Container, "/"), strings.Trim(c.Prefix, "/"))
}
