package agent

import (
	"errors"
	"flag"
	"fmt"

	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

// ClientFiles is how the sidecar and the init step reach members: the client material's mounted
// files, reloaded at each use since a mounted Secret is rotated in place, or plain HTTP for an
// Etcd without client TLS.
type ClientFiles struct {
	CAFile   string
	CertFile string
	KeyFile  string
	// Plaintext: the members serve clients over plain HTTP; no file is read.
	Plaintext bool
}

// Register adds --ca-file, --cert-file, --key-file and --plaintext to fs.
func (f *ClientFiles) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.CAFile, "ca-file", "", "CA bundle that signed the members' serving certificates")
	fs.StringVar(&f.CertFile, "cert-file", "", "client certificate")
	fs.StringVar(&f.KeyFile, "key-file", "", "client key")
	fs.BoolVar(&f.Plaintext, "plaintext", false, "the members serve clients over plain HTTP (no --ca-file, --cert-file, --key-file)")
}

// Validate demands the three files unless Plaintext, and none with it: a pod given both was
// rendered wrongly, and guessing which was meant could dial a TLS member in plaintext.
func (f ClientFiles) Validate() error {
	files := []struct{ flag, value string }{{"ca-file", f.CAFile}, {"cert-file", f.CertFile}, {"key-file", f.KeyFile}}
	var errs []error
	for _, file := range files {
		switch {
		case f.Plaintext && file.value != "":
			errs = append(errs, fmt.Errorf("--%s and --plaintext exclude each other", file.flag))
		case !f.Plaintext && file.value == "":
			errs = append(errs, fmt.Errorf("--%s is required (or --plaintext)", file.flag))
		}
	}
	return errors.Join(errs...)
}

// Load reads and verifies the material, or returns plaintext material.
func (f ClientFiles) Load() (conductortls.ClientMaterial, error) {
	if f.Plaintext {
		return conductortls.PlaintextMaterial(), nil
	}
	return conductortls.LoadFiles(f.CAFile, f.CertFile, f.KeyFile)
}
