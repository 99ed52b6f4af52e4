package snapshot

import (
	"compress/gzip"
	"compress/lzw"
	"compress/zlib"
	"fmt"
	"io"
	"strings"
)

// Compression is how an object's bytes are compressed, told by its name's suffix as
// etcd-backup-restore names them ("" is none). The values are etcd-druid's
// spec.backup.compression.policy values.
type Compression string

const (
	CompressionNone Compression = ""
	CompressionGzip Compression = "gzip"
	CompressionLZW  Compression = "lzw"
	CompressionZlib Compression = "zlib"
)

// etcd-backup-restore's LZW stream: least significant bit first, 8-bit literals. The ".Z" suffix
// is its name only: there is no compress(1) header, so the unix tools cannot read it.
const (
	lzwOrder        = lzw.LSB
	lzwLiteralWidth = 8
)

// suffixes are the name suffixes of etcd-backup-restore's compressor, one per compression.
var suffixes = map[Compression]string{
	CompressionGzip: ".gz",
	CompressionLZW:  ".Z",
	CompressionZlib: ".zlib",
}

// Compressions lists the compressions a name may carry, none first.
func Compressions() []Compression {
	return []Compression{CompressionNone, CompressionGzip, CompressionLZW, CompressionZlib}
}

// ParseCompression reads a policy as the member-agent's flag and etcd-druid's
// spec.backup.compression.policy spell it; "" (and "none") is no compression.
func ParseCompression(policy string) (Compression, error) {
	c := Compression(strings.ToLower(policy))
	if c == "none" {
		return CompressionNone, nil
	}
	if _, ok := suffixes[c]; !ok && c != CompressionNone {
		return CompressionNone, fmt.Errorf("compression policy %q: want gzip, lzw or zlib", policy)
	}
	return c, nil
}

// Suffix is what a name of an object compressed with c ends in ("" for none).
func (c Compression) Suffix() string { return suffixes[c] }

func (c Compression) String() string {
	if c == CompressionNone {
		return "none"
	}
	return string(c)
}

// compressionOfSuffix is the compression a name suffix (with its dot) stands for.
func compressionOfSuffix(suffix string) (Compression, bool) {
	for c, s := range suffixes {
		if s == suffix {
			return c, true
		}
	}
	return CompressionNone, false
}

// Decompress reads r as compressed with c, streaming. The caller closes the result (and r).
// gzip and zlib carry checksums and a truncated stream is an error; LZW carries none, which is
// why every object also carries its own hash (the full snapshot etcd's, a delta its events').
func Decompress(r io.Reader, c Compression) (io.ReadCloser, error) {
	switch c {
	case CompressionNone:
		return io.NopCloser(r), nil
	case CompressionGzip:
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return zr, nil
	case CompressionZlib:
		zr, err := zlib.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("zlib: %w", err)
		}
		return zr, nil
	case CompressionLZW:
		return lzw.NewReader(r, lzwOrder, lzwLiteralWidth), nil
	}
	return nil, fmt.Errorf("compression %q is not supported", c)
}

// Compress writes to w compressed with c, streaming. Close flushes the compressor's end (it
// must be called for the object to be whole) and leaves w open.
func Compress(w io.Writer, c Compression) (io.WriteCloser, error) {
	switch c {
	case CompressionNone:
		return nopWriteCloser{w}, nil
	case CompressionGzip:
		return gzip.NewWriter(w), nil
	case CompressionZlib:
		return zlib.NewWriter(w), nil
	case CompressionLZW:
		return lzw.NewWriter(w, lzwOrder, lzwLiteralWidth), nil
	}
	return nil, fmt.Errorf("compression %q is not supported", c)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
