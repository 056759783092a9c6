package apkrepo

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	_ "crypto/sha512" // RSA512 signatures hash with SHA-512
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Keys are the RSA public keys a repository's indexes and packages may
// be signed with, by file name as in /etc/apk/keys
// ("alpine-devel@lists.alpinelinux.org-6165ee59.rsa.pub"): a signature
// names its key by that file name.
type Keys map[string]*rsa.PublicKey

// Names returns the key names, sorted, for messages.
func (k Keys) Names() []string {
	out := make([]string, 0, len(k))
	for n := range k {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// minKeyBits is the smallest RSA key accepted.
const minKeyBits = 2048

// ParseKey reads a PEM public key ("PUBLIC KEY", as apk keys are, or
// "RSA PUBLIC KEY").
func ParseKey(data []byte) (*rsa.PublicKey, error) {
	blk, _ := pem.Decode(data)
	if blk == nil {
		return nil, errors.New("no PEM block")
	}
	var pub *rsa.PublicKey
	switch blk.Type {
	case "PUBLIC KEY":
		k, err := x509.ParsePKIXPublicKey(blk.Bytes)
		if err != nil {
			return nil, err
		}
		rk, ok := k.(*rsa.PublicKey)
		if !ok {
			return nil, fmt.Errorf("a %T, not an RSA key", k)
		}
		pub = rk
	case "RSA PUBLIC KEY":
		k, err := x509.ParsePKCS1PublicKey(blk.Bytes)
		if err != nil {
			return nil, err
		}
		pub = k
	default:
		return nil, fmt.Errorf("PEM block %q is not a public key", blk.Type)
	}
	if pub.N.BitLen() < minKeyBits {
		return nil, fmt.Errorf("RSA key of %d bits; at least %d are required", pub.N.BitLen(), minKeyBits)
	}
	return pub, nil
}

// ReadKeys reads every regular file of dir as a key (as apk reads
// /etc/apk/keys). A file that is not an RSA public key is an error
// naming it.
func ReadKeys(dir string) (Keys, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	keys := Keys{}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		k, err := ParseKey(data)
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", filepath.Join(dir, e.Name()), err)
		}
		keys[e.Name()] = k
	}
	return keys, nil
}

// member is one gzip member of a file: its compressed bytes and what
// they decompress to.
type member struct {
	raw, plain []byte
}

// Bounds on what a repository file may expand to.
const (
	maxMembers     = 8
	maxIndexPlain  = 512 << 20
	maxSigPlain    = 1 << 20
	maxControlSize = 16 << 20
)

// gzipMembers splits data into its gzip members. Member i's
// decompressed size is bounded by limit(i) (exceeding it is an error);
// a member whose limit is negative is decompressed without bound to find
// its end, and its plain bytes are not kept.
func gzipMembers(data []byte, limit func(i int) int64) ([]member, error) {
	br := bytes.NewReader(data)
	// A bytes.Reader is an io.ByteReader, so the decompressor reads no
	// further than each member's end and the offsets below are exact.
	zr, err := gzip.NewReader(br)
	if err != nil {
		return nil, fmt.Errorf("gzip member 0: %w", err)
	}
	var out []member
	start := 0
	for i := 0; ; i++ {
		if i >= maxMembers {
			return nil, fmt.Errorf("more than %d gzip members", maxMembers)
		}
		zr.Multistream(false)
		var b bytes.Buffer
		if l := limit(i); l < 0 {
			if _, err := io.Copy(io.Discard, zr); err != nil {
				return nil, fmt.Errorf("gzip member %d: %w", i, err)
			}
		} else {
			n, err := io.Copy(&b, io.LimitReader(zr, l+1))
			if err != nil {
				return nil, fmt.Errorf("gzip member %d: %w", i, err)
			}
			if n > l {
				return nil, fmt.Errorf("gzip member %d expands to more than %d bytes", i, l)
			}
		}
		end := int(br.Size()) - br.Len()
		out = append(out, member{raw: data[start:end], plain: b.Bytes()})
		start = end
		if br.Len() == 0 {
			return out, nil
		}
		if err := zr.Reset(br); err != nil {
			return nil, fmt.Errorf("gzip member %d: %w", i+1, err)
		}
	}
}

// signature is one .SIGN.* entry of a signature segment.
type signature struct {
	hash    crypto.Hash
	keyName string
	sig     []byte
}

// parseSignatures reads the entries of a signature segment. Any entry
// that is not a signature makes the segment invalid.
func parseSignatures(plain []byte) ([]signature, error) {
	tr := tar.NewReader(bytes.NewReader(plain))
	var out []signature
	for i := 0; ; i++ {
		if i > 16 {
			return nil, errors.New("more than 16 entries in the signature segment")
		}
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("signature segment: %w", err)
		}
		rest, ok := strings.CutPrefix(h.Name, ".SIGN.")
		if !ok {
			return nil, fmt.Errorf("signature segment holds %q, not a .SIGN. entry", h.Name)
		}
		typ, key, _ := strings.Cut(rest, ".")
		var hash crypto.Hash
		switch typ {
		case "RSA":
			hash = crypto.SHA1
		case "RSA256":
			hash = crypto.SHA256
		case "RSA512":
			hash = crypto.SHA512
		default:
			// Other algorithms (DSA) are not accepted; the entry is
			// skipped as apk skips signature types it cannot use.
			continue
		}
		if h.Size > 64<<10 || key == "" || strings.ContainsAny(key, "/\x00") {
			return nil, fmt.Errorf("signature entry %q is malformed", h.Name)
		}
		sig, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		out = append(out, signature{hash: hash, keyName: key, sig: sig})
	}
}

// SignatureError says a file is not signed by a trusted key, or its
// signature does not verify.
type SignatureError struct {
	What   string // "index", "package foo-1.0-r0"
	Reason string
}

func (e *SignatureError) Error() string { return e.What + ": " + e.Reason }

// verifySigned checks that one of sigs, by a key in keys, signs signed.
// As apk does, the first signature by a trusted key decides.
func verifySigned(what string, sigs []signature, signed []byte, keys Keys) (string, error) {
	if len(sigs) == 0 {
		return "", &SignatureError{What: what, Reason: "unsigned (no RSA signature entry)"}
	}
	var unknown []string
	for _, s := range sigs {
		pub := keys[s.keyName]
		if pub == nil {
			unknown = append(unknown, s.keyName)
			continue
		}
		h := s.hash.New()
		h.Write(signed)
		if err := rsa.VerifyPKCS1v15(pub, s.hash, h.Sum(nil), s.sig); err != nil {
			return "", &SignatureError{What: what, Reason: fmt.Sprintf("the signature by %s does not verify", s.keyName)}
		}
		return s.keyName, nil
	}
	return "", &SignatureError{What: what, Reason: fmt.Sprintf("signed only by %s, which is not a trusted key (trusted: %s)", strings.Join(unknown, ", "), strings.Join(keys.Names(), ", "))}
}

// Index file contents once verified.
type verifiedIndex struct {
	apkindex    []byte
	description string
	key         string
}

// VerifyIndex checks an APKINDEX.tar.gz: its first gzip member is a
// signature segment whose signature, by a key in keys, covers every
// byte after it; those bytes are a tar holding APKINDEX. It returns the
// APKINDEX text and the name of the key that signed it.
func VerifyIndex(data []byte, keys Keys) (apkindex []byte, key string, err error) {
	v, err := verifyIndex(data, keys)
	if err != nil {
		return nil, "", err
	}
	return v.apkindex, v.key, nil
}

func verifyIndex(data []byte, keys Keys) (*verifiedIndex, error) {
	ms, err := gzipMembers(data, func(i int) int64 {
		if i == 0 {
			return maxSigPlain
		}
		return maxIndexPlain
	})
	if err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	if len(ms) < 2 {
		return nil, &SignatureError{What: "index", Reason: "unsigned (a single gzip member, no signature segment)"}
	}
	sigs, err := parseSignatures(ms[0].plain)
	if err != nil {
		return nil, &SignatureError{What: "index", Reason: "unsigned: " + err.Error()}
	}
	signed := data[len(ms[0].raw):]
	key, err := verifySigned("index", sigs, signed, keys)
	if err != nil {
		return nil, err
	}
	var plain []byte
	for _, m := range ms[1:] {
		plain = append(plain, m.plain...)
	}
	v := &verifiedIndex{key: key}
	tr := tar.NewReader(bytes.NewReader(plain))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("index: %w", err)
		}
		switch h.Name {
		case "APKINDEX":
			v.apkindex, err = io.ReadAll(tr)
		case "DESCRIPTION":
			var d []byte
			d, err = io.ReadAll(io.LimitReader(tr, 4096))
			v.description = strings.TrimSpace(string(d))
		}
		if err != nil {
			return nil, fmt.Errorf("index: %w", err)
		}
	}
	if v.apkindex == nil {
		return nil, errors.New("index: the signed archive has no APKINDEX")
	}
	return v, nil
}

// Identity is the apk identity of a control segment: "Q1" and the
// base64 SHA-1 of its compressed bytes.
func Identity(control []byte) string {
	s := sha1.Sum(control)
	return "Q1" + base64.StdEncoding.EncodeToString(s[:])
}

// Verified is an .apk whose signature, identity and data hash were
// checked.
type Verified struct {
	// Info holds .PKGINFO's fields; repeated keys (depend, provides…)
	// joined by a space.
	Info map[string]string
	// Scripts are the control segment's other entries by name
	// (".post-install", ".trigger"…). sbx never runs them.
	Scripts map[string][]byte
	// Identity is the control segment's identity ("Q1…").
	Identity string
	// Key is the name of the key that signed the control segment.
	Key string
	// Data is the data segment as in the file (gzip), checked against
	// .PKGINFO's datahash.
	Data []byte
}

// VerifyPackage checks an .apk (three gzip members: signature, control,
// data): the signature by a key in keys over the control member's
// compressed bytes; when identity is not empty, the control member's
// identity against it (the index's C: field); .PKGINFO's datahash
// against the SHA-256 of the data member(s). what names the package in
// errors.
func VerifyPackage(data []byte, keys Keys, identity, what string) (*Verified, error) {
	ms, err := gzipMembers(data, func(i int) int64 {
		switch i {
		case 0:
			return maxSigPlain
		case 1:
			return maxControlSize
		}
		// The data member is hashed, not read here.
		return -1
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if len(ms) < 3 {
		return nil, &SignatureError{What: what, Reason: fmt.Sprintf("%d gzip members; a signed package has a signature, a control and a data segment", len(ms))}
	}
	sigs, err := parseSignatures(ms[0].plain)
	if err != nil {
		return nil, &SignatureError{What: what, Reason: "unsigned: " + err.Error()}
	}
	key, err := verifySigned(what, sigs, ms[1].raw, keys)
	if err != nil {
		return nil, err
	}
	v := &Verified{Info: map[string]string{}, Scripts: map[string][]byte{}, Identity: Identity(ms[1].raw), Key: key}
	if identity != "" && v.Identity != identity {
		return nil, fmt.Errorf("%s: control segment identity %s, but the index says %s", what, v.Identity, identity)
	}
	tr := tar.NewReader(bytes.NewReader(ms[1].plain))
	seen := false
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: control segment: %w", what, err)
		}
		if !strings.HasPrefix(h.Name, ".") || strings.Contains(h.Name, "/") {
			return nil, fmt.Errorf("%s: control segment holds %q", what, h.Name)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		if h.Name == ".PKGINFO" {
			seen = true
			parsePKGINFO(string(body), v.Info)
			continue
		}
		v.Scripts[h.Name] = body
	}
	if !seen {
		return nil, fmt.Errorf("%s: the control segment has no .PKGINFO", what)
	}
	want := v.Info["datahash"]
	if want == "" {
		return nil, fmt.Errorf("%s: .PKGINFO has no datahash, so its data cannot be checked", what)
	}
	dataRaw := data[len(ms[0].raw)+len(ms[1].raw):]
	got := sha256.Sum256(dataRaw)
	if hex.EncodeToString(got[:]) != strings.ToLower(want) {
		return nil, fmt.Errorf("%s: the data segment's sha256 is %x, but the signed .PKGINFO says %s", what, got, want)
	}
	v.Data = dataRaw
	return v, nil
}

func parsePKGINFO(s string, f map[string]string) {
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		k, val, ok := strings.Cut(line, " = ")
		if !ok {
			continue
		}
		if old, ok := f[k]; ok {
			val = old + " " + val
		}
		f[k] = val
	}
}
