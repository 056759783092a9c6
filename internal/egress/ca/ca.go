package ca

import (
	"container/list"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strings"
	"sync"
	"time"
)

// Lifetimes. A leaf lives a week at most so that a certificate copied
// out of a guest's memory is soon useless; it is minted again a day
// before it ends so that no connection receives one about to expire.
const (
	caLifetime    = 10 * 365 * 24 * time.Hour
	leafLifetime  = 7 * 24 * time.Hour
	leafBackdate  = time.Hour
	leafRenewLead = 24 * time.Hour

	// DefaultCacheSize bounds how many leaves an Authority keeps: a guest
	// that makes up names cannot grow the host's memory past it.
	DefaultCacheSize = 1024
)

// Authority is a CA certificate with its private key and a bounded
// cache of the leaf certificates it minted. It is safe for concurrent
// use.
type Authority struct {
	cert    *x509.Certificate
	certPEM []byte
	key     *ecdsa.PrivateKey

	// leafKey is shared by every leaf of this Authority: generating a key
	// per name would cost more than the signature and buy nothing, since
	// the key is as private as the CA's own.
	leafKey *ecdsa.PrivateKey

	now func() time.Time

	mu       sync.Mutex
	cacheCap int
	lru      *list.List // of *leafEntry, most recently used first
	byName   map[string]*list.Element
}

type leafEntry struct {
	name     string
	cert     *tls.Certificate
	notAfter time.Time
}

// New returns an Authority with a fresh key and certificate held only in
// memory, named "sbx sandbox CA (user@host)" like a stored one.
func New() (*Authority, error) {
	certDER, key, err := create(caName(), time.Now())
	if err != nil {
		return nil, err
	}
	return fromParts(certDER, key)
}

// fromParts makes an Authority of a CA certificate and its key, checking
// that they belong together and that the certificate is a CA still valid.
func fromParts(certDER []byte, key *ecdsa.PrivateKey) (*Authority, error) {
	cert, err := x509.ParseCertificate(certDER)
	if err != nil {
		return nil, fmt.Errorf("parsing CA certificate: %w", err)
	}
	if !cert.IsCA || !cert.BasicConstraintsValid || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, errors.New("certificate is not a CA certificate")
	}
	pub, ok := cert.PublicKey.(*ecdsa.PublicKey)
	if !ok || !pub.Equal(key.Public()) {
		return nil, errors.New("CA certificate does not match its key")
	}
	now := time.Now()
	if now.After(cert.NotAfter) {
		return nil, fmt.Errorf("CA certificate expired on %s (remove its directory to make a new one, then restart the sandboxes)", cert.NotAfter.UTC().Format(time.DateOnly))
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return &Authority{
		cert:     cert,
		certPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certDER}),
		key:      key,
		leafKey:  leafKey,
		now:      time.Now,
		cacheCap: DefaultCacheSize,
		lru:      list.New(),
		byName:   make(map[string]*list.Element),
	}, nil
}

// create makes a new CA key and self-signed certificate named name.
func create(name string, now time.Time) (certDER []byte, key *ecdsa.PrivateKey, err error) {
	key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name, Organization: []string{"sbx"}},
		NotBefore:             now.Add(-leafBackdate),
		NotAfter:              now.Add(caLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		// Only leaves below it, never another CA a stolen leaf key could mint.
		MaxPathLenZero: true,
	}
	certDER, err = x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, err
	}
	return certDER, key, nil
}

func randomSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

// CertPEM returns the CA certificate, PEM-encoded: what a guest adds to
// its trust store. It never contains the key.
func (a *Authority) CertPEM() []byte {
	return append([]byte(nil), a.certPEM...)
}

// Certificate returns the parsed CA certificate.
func (a *Authority) Certificate() *x509.Certificate { return a.cert }

// Pool returns a new pool holding only the CA certificate, for clients
// that should trust what this Authority mints (tests, the guest's view).
func (a *Authority) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(a.cert)
	return p
}

// Leaf returns a certificate for name, a DNS name (or an IP address)
// that is its only subject alternative name, valid from an hour ago
// until seven days from now or the CA's own expiry if sooner. Leaves are
// cached by name, at most DefaultCacheSize of them with the least
// recently used dropped first, and minted again when less than a day of
// validity is left.
func (a *Authority) Leaf(name string) (*tls.Certificate, error) {
	name, err := normalizeName(name)
	if err != nil {
		return nil, err
	}
	now := a.now()
	a.mu.Lock()
	if el, ok := a.byName[name]; ok {
		e := el.Value.(*leafEntry)
		if now.Before(e.notAfter.Add(-leafRenewLead)) {
			a.lru.MoveToFront(el)
			a.mu.Unlock()
			return e.cert, nil
		}
	}
	a.mu.Unlock()

	// Minting happens outside the lock so that one slow signature does
	// not hold up every other name; two callers minting the same name at
	// once both get a valid certificate and the cache keeps the last.
	cert, notAfter, err := a.mint(name, now)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if el, ok := a.byName[name]; ok {
		el.Value = &leafEntry{name: name, cert: cert, notAfter: notAfter}
		a.lru.MoveToFront(el)
		return cert, nil
	}
	a.byName[name] = a.lru.PushFront(&leafEntry{name: name, cert: cert, notAfter: notAfter})
	for a.lru.Len() > a.cacheCap {
		last := a.lru.Back()
		a.lru.Remove(last)
		delete(a.byName, last.Value.(*leafEntry).name)
	}
	return cert, nil
}

func (a *Authority) mint(name string, now time.Time) (*tls.Certificate, time.Time, error) {
	serial, err := randomSerial()
	if err != nil {
		return nil, time.Time{}, err
	}
	notAfter := now.Add(leafLifetime)
	if a.cert.NotAfter.Before(notAfter) {
		notAfter = a.cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-leafBackdate),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	if ip := net.ParseIP(name); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{name}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, a.leafKey.Public(), a.key)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("minting certificate for %s: %w", name, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, time.Time{}, err
	}
	return &tls.Certificate{
		Certificate: [][]byte{der},
		PrivateKey:  a.leafKey,
		Leaf:        leaf,
	}, notAfter, nil
}

// normalizeName lower-cases name and drops a trailing dot, and refuses
// anything that is not a DNS name or an IP address: the name may come
// from a guest's SNI, and a certificate is no place for arbitrary bytes.
func normalizeName(name string) (string, error) {
	if ip := net.ParseIP(name); ip != nil {
		return ip.String(), nil
	}
	n := strings.TrimSuffix(strings.ToLower(name), ".")
	if n == "" || len(n) > 253 {
		return "", fmt.Errorf("invalid certificate name %q", name)
	}
	for label := range strings.SplitSeq(n, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return "", fmt.Errorf("invalid certificate name %q", name)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Errorf("invalid certificate name %q", name)
			}
		}
	}
	return n, nil
}
