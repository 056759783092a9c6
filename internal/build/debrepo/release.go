package debrepo

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/clearsign"
)

// Release is the verified content of a suite's InRelease file.
type Release struct {
	Suite, Codename string
	Architectures   []string
	Components      []string
	AcquireByHash   bool
	// Files maps a path relative to dists/SUITE ("main/binary-amd64/
	// Packages.xz") to its size and sha256.
	Files map[string]FileSum
}

// FileSum is the size and sha256 (hex) of an index file.
type FileSum struct {
	Size   int64
	SHA256 string
}

// ReadKeyring reads an OpenPGP keyring file, binary (as apt's .gpg
// keyrings are) or ASCII-armored (.asc).
func ReadKeyring(path string) (openpgp.EntityList, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseKeyring(data)
}

// ParseKeyring parses the bytes of a binary or armored keyring.
func ParseKeyring(data []byte) (openpgp.EntityList, error) {
	var ks openpgp.EntityList
	var err error
	if bytes.HasPrefix(bytes.TrimSpace(data), []byte("-----BEGIN PGP")) {
		ks, err = openpgp.ReadArmoredKeyRing(bytes.NewReader(data))
	} else {
		ks, err = openpgp.ReadKeyRing(bytes.NewReader(data))
	}
	if err != nil {
		return nil, fmt.Errorf("reading keyring: %w", err)
	}
	if len(ks) == 0 {
		return nil, errors.New("the keyring holds no keys")
	}
	return ks, nil
}

// VerifyInRelease checks the clear signature of an InRelease file against
// keyring and parses the signed text. Only the text the signature covers
// is read: anything before or after the signed block is ignored.
func VerifyInRelease(data []byte, keyring openpgp.EntityList) (*Release, error) {
	b, _ := clearsign.Decode(data)
	if b == nil {
		return nil, errors.New("InRelease is not a clear-signed document")
	}
	if _, err := b.VerifySignature(keyring, nil); err != nil {
		return nil, fmt.Errorf("InRelease signature does not verify with the keyring: %w", err)
	}
	return ParseRelease(b.Plaintext)
}

// ParseRelease parses the fields of a Release file sbx uses.
func ParseRelease(text []byte) (*Release, error) {
	st := splitStanzas(string(text))
	if len(st) == 0 {
		return nil, errors.New("Release file is empty")
	}
	f := stanzaFields(st[0])
	r := &Release{
		Suite:         f["suite"],
		Codename:      f["codename"],
		Architectures: strings.Fields(f["architectures"]),
		Components:    strings.Fields(f["components"]),
		AcquireByHash: strings.EqualFold(f["acquire-by-hash"], "yes"),
		Files:         map[string]FileSum{},
	}
	sums, ok := f["sha256"]
	if !ok {
		return nil, errors.New("Release file has no SHA256 list")
	}
	for _, line := range strings.Split(sums, "\n") {
		fs := strings.Fields(line)
		if len(fs) != 3 {
			continue
		}
		n, err := strconv.ParseInt(fs[1], 10, 64)
		if err != nil || n < 0 || !isHex64(fs[0]) {
			return nil, fmt.Errorf("Release file: bad SHA256 line %q", line)
		}
		r.Files[fs[2]] = FileSum{Size: n, SHA256: strings.ToLower(fs[0])}
	}
	return r, nil
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}
