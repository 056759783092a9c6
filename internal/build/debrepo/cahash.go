package debrepo

import (
	"bytes"
	"crypto/sha1"
	"encoding/asn1"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"unicode/utf16"
	"unicode/utf8"
)

// SubjectHash is OpenSSL's X509_NAME_hash of a DER-encoded subject name
// (x509.Certificate.RawSubject), as `openssl x509 -hash` prints it and
// as c_rehash and update-ca-certificates name the links in
// /etc/ssl/certs: the first four bytes, little endian, of the SHA-1 of
// the name's canonical encoding. The canonical encoding re-encodes every
// string value as UTF8String with ASCII letters lower-cased, leading and
// trailing white space removed and inner runs of white space made one
// space, and concatenates the RDN sets without the outer SEQUENCE.
func SubjectHash(rawSubject []byte) (uint32, error) {
	var name asn1.RawValue
	if rest, err := asn1.Unmarshal(rawSubject, &name); err != nil || len(rest) > 0 || name.Tag != asn1.TagSequence {
		return 0, errors.New("subject is not a DER SEQUENCE")
	}
	var canon bytes.Buffer
	for rdns := name.Bytes; len(rdns) > 0; {
		var set asn1.RawValue
		var err error
		rdns, err = asn1.Unmarshal(rdns, &set)
		if err != nil || set.Tag != asn1.TagSet {
			return 0, errors.New("subject RDN is not a SET")
		}
		var atvs [][]byte
		for rest := set.Bytes; len(rest) > 0; {
			var atv struct {
				Type  asn1.ObjectIdentifier
				Value asn1.RawValue
			}
			rest, err = asn1.Unmarshal(rest, &atv)
			if err != nil {
				return 0, fmt.Errorf("subject attribute: %w", err)
			}
			if s, ok := stringValue(atv.Value); ok {
				atv.Value = asn1.RawValue{Class: asn1.ClassUniversal, Tag: asn1.TagUTF8String, Bytes: canonString(s)}
			}
			b, err := asn1.Marshal(atv)
			if err != nil {
				return 0, err
			}
			atvs = append(atvs, b)
		}
		sort.Slice(atvs, func(i, j int) bool { return bytes.Compare(atvs[i], atvs[j]) < 0 })
		b, err := asn1.Marshal(asn1.RawValue{Class: asn1.ClassUniversal, Tag: asn1.TagSet, IsCompound: true, Bytes: bytes.Join(atvs, nil)})
		if err != nil {
			return 0, err
		}
		canon.Write(b)
	}
	sum := sha1.Sum(canon.Bytes())
	return binary.LittleEndian.Uint32(sum[:4]), nil
}

// stringValue returns an ASN.1 string's value as UTF-8 for the string
// types OpenSSL canonicalises.
func stringValue(v asn1.RawValue) ([]byte, bool) {
	if v.Class != asn1.ClassUniversal {
		return nil, false
	}
	switch v.Tag {
	case asn1.TagUTF8String, asn1.TagPrintableString, asn1.TagIA5String, 26 /* VisibleString */ :
		return v.Bytes, true
	case asn1.TagT61String: // read as Latin-1, as OpenSSL does
		var b []byte
		for _, c := range v.Bytes {
			b = utf8.AppendRune(b, rune(c))
		}
		return b, true
	case asn1.TagBMPString:
		if len(v.Bytes)%2 != 0 {
			return nil, false
		}
		u := make([]uint16, len(v.Bytes)/2)
		for i := range u {
			u[i] = binary.BigEndian.Uint16(v.Bytes[2*i:])
		}
		return []byte(string(utf16.Decode(u))), true
	case 28: // UniversalString
		if len(v.Bytes)%4 != 0 {
			return nil, false
		}
		var b []byte
		for i := 0; i < len(v.Bytes); i += 4 {
			b = utf8.AppendRune(b, rune(binary.BigEndian.Uint32(v.Bytes[i:])))
		}
		return b, true
	}
	return nil, false
}

// canonString lower-cases ASCII letters, drops leading and trailing
// white space and makes each inner run of white space one space.
func canonString(s []byte) []byte {
	isSpace := func(c byte) bool { return c == ' ' || c >= '\t' && c <= '\r' }
	for len(s) > 0 && isSpace(s[0]) {
		s = s[1:]
	}
	for len(s) > 0 && isSpace(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isSpace(c) {
			for i+1 < len(s) && isSpace(s[i+1]) {
				i++
			}
			out = append(out, ' ')
			continue
		}
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		out = append(out, c)
	}
	return out
}
