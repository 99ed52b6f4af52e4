package snapshot

import (
	"bytes"
	"compress/gzip"
	"compress/lzw"
	"compress/zlib"
	"io"
	"math/rand/v2"
	"testing"
)

// compressed writes data through Compress(c) and returns the bytes.
func compressed(t *testing.T, data []byte, c Compression) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := Compress(&buf, c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func decompressed(data []byte, c Compression) ([]byte, error) {
	r, err := Decompress(bytes.NewReader(data), c)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// sample is half text, half noise, larger than one compressor block.
func sample() []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	data := bytes.Repeat([]byte("key/0001 value-with-some-repetition "), 4096)
	for range 100_000 {
		data = append(data, byte(rng.IntN(256)))
	}
	return data
}

func TestCompressRoundTrip(t *testing.T) {
	data := sample()
	for _, c := range Compressions() {
		t.Run(c.String(), func(t *testing.T) {
			z := compressed(t, data, c)
			if c != CompressionNone && len(z) >= len(data) {
				t.Errorf("%s: %d bytes from %d, no smaller", c, len(z), len(data))
			}
			got, err := decompressed(z, c)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("round trip changed the data (%d bytes back of %d)", len(got), len(data))
			}
		})
	}
}

// TestDecompressReadsBackupRestoreStreams: the streams etcd-backup-restore's compressor writes
// (the standard library's writers with its parameters: gzip and zlib defaults, LZW LSB order
// with 8-bit literals) are what Decompress reads.
func TestDecompressReadsBackupRestoreStreams(t *testing.T) {
	data := sample()
	writers := map[Compression]func(io.Writer) io.WriteCloser{
		CompressionGzip: func(w io.Writer) io.WriteCloser { return gzip.NewWriter(w) },
		CompressionZlib: func(w io.Writer) io.WriteCloser { return zlib.NewWriter(w) },
		CompressionLZW:  func(w io.Writer) io.WriteCloser { return lzw.NewWriter(w, lzw.LSB, 8) },
	}
	for c, newWriter := range writers {
		t.Run(c.String(), func(t *testing.T) {
			var buf bytes.Buffer
			w := newWriter(&buf)
			if _, err := w.Write(data); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			got, err := decompressed(buf.Bytes(), c)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("read %d bytes of %d: %v", len(got), len(data), err)
			}
		})
	}
}

// TestDecompressRefusesDamage: gzip and zlib check their streams; LZW has no checksum, so only
// a cut in the middle of a code shows (the object's own hash covers the rest).
func TestDecompressRefusesDamage(t *testing.T) {
	data := sample()
	for _, c := range []Compression{CompressionGzip, CompressionZlib} {
		z := compressed(t, data, c)
		for _, tc := range []struct {
			name string
			data []byte
		}{
			{"truncated", z[:len(z)-10]},
			{"bit flipped", flip(z, len(z)/2)},
			{"empty", nil},
		} {
			t.Run(c.String()+"/"+tc.name, func(t *testing.T) {
				if got, err := decompressed(tc.data, c); err == nil && bytes.Equal(got, data) {
					t.Fatal("damaged stream read back whole")
				} else if err == nil {
					t.Fatalf("damaged stream read as %d bytes without an error", len(got))
				}
			})
		}
	}
	t.Run("lzw truncated reads short", func(t *testing.T) {
		z := compressed(t, data, CompressionLZW)
		got, _ := decompressed(z[:len(z)/2], CompressionLZW)
		if bytes.Equal(got, data) {
			t.Fatal("half an LZW stream read back whole")
		}
	})
}

func flip(b []byte, i int) []byte {
	out := bytes.Clone(b)
	out[i] ^= 0x10
	return out
}

func TestParseCompression(t *testing.T) {
	for _, tc := range []struct {
		policy string
		want   Compression
		suffix string
		bad    bool
	}{
		{"", CompressionNone, "", false},
		{"none", CompressionNone, "", false},
		{"gzip", CompressionGzip, ".gz", false},
		{"lzw", CompressionLZW, ".Z", false},
		{"zlib", CompressionZlib, ".zlib", false},
		{"GZIP", CompressionGzip, ".gz", false},
		{"bzip2", "", "", true},
		{".gz", "", "", true},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			c, err := ParseCompression(tc.policy)
			if (err != nil) != tc.bad {
				t.Fatalf("ParseCompression(%q) error %v, want error %v", tc.policy, err, tc.bad)
			}
			if !tc.bad && (c != tc.want || c.Suffix() != tc.suffix) {
				t.Fatalf("ParseCompression(%q) = %q (suffix %q), want %q (%q)", tc.policy, c, c.Suffix(), tc.want, tc.suffix)
			}
		})
	}
	if _, err := Decompress(bytes.NewReader(nil), "bzip2"); err == nil {
		t.Error("Decompress accepted an unknown compression")
	}
	if _, err := Compress(io.Discard, "bzip2"); err == nil {
		t.Error("Compress accepted an unknown compression")
	}
}
