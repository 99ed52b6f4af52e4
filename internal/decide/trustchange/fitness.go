package trustchange

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The checks a renewed pair passes before the members mount it (issue #39, item 4): a pair that
// fails one would fail every new handshake on every member at once, since the kubelet puts it into
// every pod's files together. Each is named in the reason, the condition and the Warning.
const (
	CheckKeyMatch = "key-matches-certificate"
	CheckValidNow = "valid-now"
	CheckNames    = "covers-member-names"
	CheckUsage    = "extended-key-usage"
	// CheckUnreadable: the certificate or key does not parse at all.
	CheckUnreadable = "readable"
)

// Need is what the members need of each certificate, as internal/operator/resources names them.
type Need struct {
	// ServerNames must each be covered by the serving certificate (every member's DNS name: the
	// operator and the member-agents verify it on the client port); ServerAnyOf, one of them at
	// least (the client Service, in whichever form clients spell it).
	ServerNames, ServerAnyOf []string
	// PeerNames must each be covered by the peer certificate: every member's peer URL hosts, which
	// the other members verify when they dial it.
	PeerNames []string
}

// SecretNames are the Etcd's Secrets each certificate comes from, for the reasons.
type SecretNames struct {
	Server, Client, Peer string
}

// unfitError is a failed check.
type unfitError struct {
	check, detail string
}

func (e *unfitError) Error() string { return fmt.Sprintf("check %s failed: %s", e.check, e.detail) }

func unfit(check, format string, args ...any) error {
	return &unfitError{check: check, detail: fmt.Sprintf(format, args...)}
}

// leafKind is what one certificate is for.
type leafKind struct {
	kind   string
	usages []x509.ExtKeyUsage
}

var (
	kindServing = leafKind{"serving", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	kindClient  = leafKind{"client", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	// A peer certificate serves the peer port and dials the others with it.
	kindPeer = leafKind{"peer", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
)

// fit checks p for what k needs at now: the key is the certificate's, every certificate of the
// chain is valid at now, the leaf covers every name of all and one of anyOf, and it allows k's
// extended key usages (a certificate without any allows every one, as Go's and etcd's TLS have it).
func fit(k leafKind, p Pair, now time.Time, all, anyOf []string) error {
	chain, err := certificates(p.Cert)
	if err != nil {
		return unfit(CheckUnreadable, "%v", err)
	}
	if err := keyMatches(chain[0], p.Key); err != nil {
		return unfit(CheckKeyMatch, "%v", err)
	}
	for i, c := range chain {
		what := "the certificate"
		if i > 0 {
			what = fmt.Sprintf("chain certificate %d (%s)", i, c.Subject.CommonName)
		}
		if now.Before(c.NotBefore) {
			// Not the time now: the reason is a condition's message, written only when it changes.
			return unfit(CheckValidNow, "%s is not valid before %s", what, c.NotBefore.UTC().Format(time.RFC3339))
		}
		if now.After(c.NotAfter) {
			return unfit(CheckValidNow, "%s expired at %s", what, c.NotAfter.UTC().Format(time.RFC3339))
		}
	}
	leaf := chain[0]
	var missing []string
	for _, name := range all {
		if leaf.VerifyHostname(name) != nil {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return unfit(CheckNames, "it does not cover %s", strings.Join(missing, ", "))
	}
	if len(anyOf) > 0 && !slices.ContainsFunc(anyOf, func(name string) bool { return leaf.VerifyHostname(name) == nil }) {
		return unfit(CheckNames, "it covers none of %s", strings.Join(anyOf, ", "))
	}
	if len(leaf.ExtKeyUsage) > 0 && !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageAny) {
		var lacking []string
		for _, u := range k.usages {
			if !slices.Contains(leaf.ExtKeyUsage, u) {
				lacking = append(lacking, usageName(u))
			}
		}
		if len(lacking) > 0 {
			return unfit(CheckUsage, "a %s certificate needs %s", k.kind, strings.Join(lacking, " and "))
		}
	}
	return nil
}

// keyMatches tells whether keyPEM holds the private key of cert's public key (what crypto/tls's
// X509KeyPair checks, without the package, which this pure one does not import).
func keyMatches(cert *x509.Certificate, keyPEM []byte) error {
	var block *pem.Block
	for rest := keyPEM; ; {
		block, rest = pem.Decode(rest)
		if block == nil {
			return errors.New("no PEM private key")
		}
		if strings.HasSuffix(block.Type, "PRIVATE KEY") {
			break
		}
	}
	var key any
	var err error
	switch block.Type {
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	}
	if err != nil {
		return fmt.Errorf("parsing the private key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return fmt.Errorf("a private key of type %T signs nothing", key)
	}
	pub, ok := signer.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return errors.New("the private key is not the certificate's")
	}
	return nil
}

func usageName(u x509.ExtKeyUsage) string {
	switch u {
	case x509.ExtKeyUsageServerAuth:
		return "serverAuth"
	case x509.ExtKeyUsageClientAuth:
		return "clientAuth"
	}
	return fmt.Sprintf("usage %d", u)
}

// checkedLeaf is one certificate of a Material with what it is checked against.
type checkedLeaf struct {
	k            leafKind
	secret       string
	user, held   *Pair
	ca           []byte
	names, anyOf []string
}

// leavesOf are the three certificates of user and held, in order, with the CA bundle of held that
// verifies each.
func leavesOf(o Observed, user, held *Material) []checkedLeaf {
	return []checkedLeaf{
		{kindServing, o.Secrets.Server, &user.Server, &held.Server, held.ClientCA, o.Need.ServerNames, o.Need.ServerAnyOf},
		{kindClient, o.Secrets.Client, &user.Client, &held.Client, held.ClientCA, nil, nil},
		{kindPeer, o.Secrets.Peer, &user.Peer, &held.Peer, held.PeerCA, o.Need.PeerNames, nil},
	}
}

// check is fit for l's user pair, as a sentence naming the Secret and the check; "" when it fits.
func (l checkedLeaf) check(now time.Time) string {
	err := fit(l.k, *l.user, now, l.names, l.anyOf)
	if err == nil {
		return ""
	}
	secret := ""
	if l.secret != "" {
		secret = " of Secret " + l.secret
	}
	return fmt.Sprintf("the %s certificate%s: %v", l.k.kind, secret, err)
}
