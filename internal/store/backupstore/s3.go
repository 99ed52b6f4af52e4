package backupstore

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// metaSHA256 is the user metadata key (x-amz-meta-sha256) holding an object's checksum.
const metaSHA256 = "sha256"

// S3 is a bucket of AWS S3 or an S3-compatible server.
type S3 struct {
	client *minio.Client
	bucket string
	prefix string
	name   string
}

var _ Store = (*S3)(nil)

// NewS3 prepares a client; it does not contact the server.
func NewS3(s S3Settings, bucket, prefix string) (*S3, error) {
	transport, err := minio.DefaultTransport(s.Secure)
	if err != nil {
		return nil, fmt.Errorf("s3 transport: %w", err)
	}
	if len(s.TrustedCAPEM) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(s.TrustedCAPEM) {
			return nil, &SecretError{Key: KeyTrustedCACert, Reason: "holds no PEM certificate"}
		}
		transport.TLSClientConfig.RootCAs = pool
	}
	lookup := minio.BucketLookupAuto
	if s.ForcePathStyle {
		lookup = minio.BucketLookupPath
	}
	client, err := minio.New(s.Endpoint, &minio.Options{
		Creds:        credentials.NewStaticV4(s.AccessKeyID, s.SecretKey, ""),
		Secure:       s.Secure,
		Region:       s.Region,
		BucketLookup: lookup,
		Transport:    transport,
	})
	if err != nil {
		return nil, &SecretError{Key: KeyEndpoint, Reason: err.Error()}
	}
	scheme := "https"
	if !s.Secure {
		scheme = "http"
	}
	prefix = strings.Trim(prefix, "/")
	return &S3{client: client, bucket: bucket, prefix: prefix,
		name: fmt.Sprintf("S3 %s://%s bucket %s (prefix %q)", scheme, s.Endpoint, bucket, prefix)}, nil
}

func (s *S3) String() string { return s.name }

func (s *S3) full(key string) string {
	if s.prefix == "" {
		return key
	}
	return s.prefix + "/" + key
}

func (s *S3) rel(full string) string {
	if s.prefix == "" {
		return full
	}
	return strings.TrimPrefix(full, s.prefix+"/")
}

// PutPartSize is the part size of every multipart upload, and so the memory one Put holds: the
// S3 client buffers one part of a reader it cannot seek, and left to choose it sizes the part
// from the object's size (size / 10000 parts, 537 MiB for a 5 TiB object), so an object that
// claims a huge size would take the process's memory with it.
const PutPartSize = 16 << 20

// MaxPutSize is the largest object Put takes: 10000 parts (S3's limit) of PutPartSize.
const MaxPutSize = int64(PutPartSize) * 10000

func (s *S3) Put(ctx context.Context, key string, r io.Reader, size int64, sha256Hex string) (Object, error) {
	if size > MaxPutSize {
		return Object{}, fmt.Errorf("put %s to %s: %d bytes, more than the %d one upload of %d-byte parts takes", key, s.name, size, MaxPutSize, PutPartSize)
	}
	// A checksum mismatch makes the reader fail, which aborts the upload (single or multipart)
	// before the object is committed.
	check := newCheckingReader(r, key, size, sha256Hex)
	_, err := s.client.PutObject(ctx, s.bucket, s.full(key), check, size, minio.PutObjectOptions{
		UserMetadata: map[string]string{metaSHA256: sha256Hex},
		ContentType:  "application/octet-stream",
		PartSize:     PutPartSize,
	})
	if err != nil {
		return Object{}, fmt.Errorf("put %s to %s: %w", key, s.name, err)
	}
	obj, err := s.Stat(ctx, key)
	if err != nil {
		return Object{}, fmt.Errorf("verify %s: %w", key, err)
	}
	if obj.Size != size {
		return Object{}, &VerifyError{Key: key, What: "stored size", Want: fmt.Sprint(size), Have: fmt.Sprint(obj.Size)}
	}
	if obj.SHA256 != sha256Hex {
		return Object{}, &VerifyError{Key: key, What: "stored sha256", Want: sha256Hex, Have: obj.SHA256}
	}
	return obj, nil
}

func (s *S3) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	obj, err := s.Stat(ctx, key)
	if err != nil {
		return nil, err
	}
	o, err := s.client.GetObject(ctx, s.bucket, s.full(key), minio.GetObjectOptions{})
	if err != nil {
		return nil, fmt.Errorf("get %s from %s: %w", key, s.name, err)
	}
	return readCloser{Reader: newCheckingReader(o, key, obj.Size, obj.SHA256), Closer: o}, nil
}

func (s *S3) Stat(ctx context.Context, key string) (Object, error) {
	info, err := s.client.StatObject(ctx, s.bucket, s.full(key), minio.StatObjectOptions{})
	if err != nil {
		if isNotFound(err) {
			return Object{}, fmt.Errorf("stat %s in %s: %w", key, s.name, ErrNotFound)
		}
		return Object{}, fmt.Errorf("stat %s in %s: %w", key, s.name, err)
	}
	return Object{Key: key, Size: info.Size, SHA256: userMeta(info, metaSHA256), LastModified: info.LastModified}, nil
}

func (s *S3) List(ctx context.Context, prefix string) ([]Object, error) {
	var out []Object
	for info := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.full(prefix), Recursive: true}) {
		if info.Err != nil {
			return nil, fmt.Errorf("list %q in %s: %w", prefix, s.name, info.Err)
		}
		out = append(out, Object{Key: s.rel(info.Key), Size: info.Size, LastModified: info.LastModified})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

func (s *S3) Delete(ctx context.Context, key string) error {
	if err := s.client.RemoveObject(ctx, s.bucket, s.full(key), minio.RemoveObjectOptions{}); err != nil && !isNotFound(err) {
		return fmt.Errorf("delete %s from %s: %w", key, s.name, err)
	}
	return nil
}

func isNotFound(err error) bool {
	resp := minio.ToErrorResponse(err)
	return resp.Code == minio.NoSuchKey || resp.StatusCode == http.StatusNotFound && resp.Code != minio.NoSuchBucket
}

// userMeta finds a user metadata value whatever case the server returned its key in.
func userMeta(info minio.ObjectInfo, key string) string {
	for k, v := range info.UserMetadata {
		if strings.EqualFold(strings.TrimPrefix(strings.ToLower(k), "x-amz-meta-"), key) {
			return v
		}
	}
	if v := info.Metadata.Get("X-Amz-Meta-" + key); v != "" {
		return v
	}
	return ""
}

// IsUnreachable tells a store that did not answer (network, DNS, TLS) from one that answered
// with an error, for the condition's reason.
func IsUnreachable(err error) bool {
	var resp minio.ErrorResponse
	return err != nil && !errors.As(err, &resp) && !errors.Is(err, ErrNotFound)
}
