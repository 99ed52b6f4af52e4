package main

import (
	"compress/gzip"
	"compress/lzw"
	"compress/zlib"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// compression is one of etcd-backup-restore's compression policies: its name suffix and its
// writer (the standard library's, with etcd-backup-restore's parameters).
type compression struct {
	dir, suffix string
	writer      func(io.Writer) io.WriteCloser
}

var gzipCompression = compression{"gzip", ".gz", func(w io.Writer) io.WriteCloser { return gzip.NewWriter(w) }}

var compressions = []compression{
	{"none", "", nil},
	gzipCompression,
	{"lzw", ".Z", func(w io.Writer) io.WriteCloser { return lzw.NewWriter(w, lzw.LSB, 8) }},
	{"zlib", ".zlib", func(w io.Writer) io.WriteCloser { return zlib.NewWriter(w) }},
}

// object is one backup object before compression.
type object struct {
	name  string
	data  []byte
	final bool
}

// name is etcd-backup-restore's object name, without its suffixes.
func name(kind string, start, end int64, at time.Time) string {
	return fmt.Sprintf("%s-%08d-%08d-%d", kind, start, end, at.Unix())
}

// write puts o into the store dir as <dir>/v2/<name><suffix>[.final], compressed with c.
func (o object) write(dir string, c compression) error {
	path := filepath.Join(dir, "v2", o.name+c.suffix)
	if o.final {
		path += ".final"
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	var w io.WriteCloser = f
	if c.writer != nil {
		w = c.writer(f)
	}
	if _, err := w.Write(o.data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if c.writer != nil {
		if err := w.Close(); err != nil {
			f.Close()
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	return f.Close()
}

// encodeDelta is etcd-backup-restore's delta: every watch event marshalled by encoding/json as
// {"etcdEvent": <clientv3.Event>, "time": <when it was seen>}, joined into one JSON array, and
// the raw SHA-256 of the array's bytes appended.
func encodeDelta(events []*clientv3.Event) ([]byte, error) {
	data := []byte{'['}
	for i, e := range events {
		b, err := json.Marshal(struct {
			EtcdEvent *clientv3.Event `json:"etcdEvent"`
			Time      time.Time       `json:"time"`
		}{e, time.Now()})
		if err != nil {
			return nil, fmt.Errorf("marshal event %d: %w", i, err)
		}
		if i > 0 {
			data = append(data, ',')
		}
		data = append(data, b...)
	}
	data = append(data, ']')
	sum := sha256.Sum256(data)
	return append(data, sum[:]...), nil
}
