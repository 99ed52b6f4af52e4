package snapshot

import (
	"fmt"
	"io"
)

// Compression is how an object's bytes are compressed, told by its name's suffix as
// etcd-backup-restore names them ("" is none).
type Compression string

const (
	CompressionNone Compression = ""
	CompressionGzip Compression = "gzip"
	CompressionLZW  Compression = "lzw"
	CompressionZlib Compression = "zlib"
)

// Decompress reads r as compressed with c. The caller closes the result (and r).
func Decompress(r io.Reader, c Compression) (io.ReadCloser, error) {
	switch c {
	case CompressionNone:
		return io.NopCloser(r), nil
	}
	return nil, fmt.Errorf("compression %q is not supported", c)
}
