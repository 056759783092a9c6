package egress

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/sbx-dev/sbx/internal/egress/sigv4"
	"github.com/sbx-dev/sbx/policy"
)

// MaxAWSBufferedBody bounds the body of a Signature Version 4 request
// that does not carry x-amz-content-sha256: its signature covers the
// body's hash, so the body is read whole before the signature can be
// checked (STS, Bedrock and most services but S3 send no such header).
const MaxAWSBufferedBody = 16 << 20

// awsCred is an AWS credential a sandbox may use: the real one, the
// placeholder the guest signs with, and where it may be used.
type awsCred struct {
	binding policy.SecretBinding
	real    sigv4.Credential
	ph      sigv4.Credential
}

// compileAWS makes the three secrets of AWS credential b (value as
// secretsrc resolves it, ph as sigv4.PlaceholderString renders it): its
// key id in b.Env, its secret key and its session token in the
// variables b.AWS names. A credential without a session token still
// gives the guest one, which the host drops.
func compileAWS(b policy.SecretBinding, value []byte, ph string) ([]*secret, error) {
	real, err := sigv4.ParseCredential(value)
	if err != nil {
		return nil, fmt.Errorf("secret %q: %v", b.Name, err)
	}
	phc, err := sigv4.ParsePlaceholder(ph)
	if err != nil {
		return nil, fmt.Errorf("secret %q: %v", b.Name, err)
	}
	c := &awsCred{binding: b, real: real, ph: phc}
	token := []byte(real.SessionToken)
	if len(token) == 0 {
		// Nothing real to mask or refuse: a random stand-in no text holds.
		var r [32]byte
		if _, err := rand.Read(r[:]); err != nil {
			return nil, err
		}
		token = []byte(hex.EncodeToString(r[:]))
	}
	part := func(env string, value []byte, ph string) *secret {
		sb := b
		sb.Env = env
		return &secret{SecretBinding: sb, value: value, placeholder: ph, aws: c}
	}
	return []*secret{
		part(b.Env, []byte(real.AccessKeyID), phc.AccessKeyID),
		part(b.AWS.SecretKeyEnv, []byte(real.SecretAccessKey), phc.SecretAccessKey),
		part(b.AWS.SessionTokenEnv, token, phc.SessionToken),
	}, nil
}

// awsRequest is a guest request whose signature was verified, to be
// signed again with the real credential just before it leaves (resign
// returns the new signature, which masking turns back into the guest's).
type awsRequest struct {
	cred        *awsCred
	auth        *sigv4.Auth
	amzDate     string
	payloadHash string
	streaming   bool
	// bodyCheck verifies a declared payload hash as the body streams.
	bodyCheck *hashCheck
	denied    atomic.Pointer[secretDenial]
}

// checkAWS verifies a request signed with an AWS placeholder credential
// bound to host, over the request as received (Signature Version 4,
// header authorization): the key id must be the placeholder's, the
// signature made with the placeholder secret, the scope's service and
// region among those the secret declares, the session token (if sent)
// the placeholder's, and the payload one of: UNSIGNED-PAYLOAD, a hex
// SHA-256 (then checked as the body streams), an aws-chunked signed body
// (each chunk checked), STREAMING-UNSIGNED-PAYLOAD-TRAILER, or no
// x-amz-content-sha256 at all (the body is read, up to
// MaxAWSBufferedBody, and hashed). The Authorization and
// X-Amz-Security-Token headers are removed (resign puts the real ones
// back), so that the placeholder checks of rewriteRequest see no
// placeholder where one was verified. A URL with query authorization
// (a presigned URL) carrying a placeholder is refused: it could only be
// forwarded as it is. It returns nil, nil for a request with no AWS
// placeholder in its Authorization or query; anything left with a
// placeholder is then refused by rewriteRequest.
func (p *Policy) checkAWS(host string, isTLS bool, r *http.Request) (*awsRequest, *secretDenial) {
	if len(p.aws) == 0 {
		return nil, nil
	}
	if q := r.URL.Query(); sigv4.IsPresigned(q) {
		// Decoded: the guest may percent-encode what it likes.
		for _, c := range p.aws {
			for _, vals := range q {
				for _, v := range vals {
					if strings.Contains(v, c.ph.AccessKeyID) || strings.Contains(v, c.ph.SessionToken) {
						return nil, c.refuse(host, "it is a presigned URL (query authorization) made with the placeholder credential; sbx re-signs only requests signed in the Authorization header, and never forwards a placeholder")
					}
				}
			}
		}
	}
	var (
		c    *awsCred
		auth *sigv4.Auth
	)
	vals := r.Header.Values("Authorization")
	for _, v := range vals {
		a, err := sigv4.ParseAuth(v)
		for _, cand := range p.aws {
			if !strings.Contains(v, cand.ph.AccessKeyID) {
				continue
			}
			if !cand.bound(host) {
				return nil, nil // rewriteRequest refuses the placeholder
			}
			if err != nil {
				return nil, cand.refuse(host, "its Authorization header carries the placeholder key id but is no Signature Version 4 (AWS4-HMAC-SHA256) authorization: "+err.Error())
			}
			if a.AccessKeyID != cand.ph.AccessKeyID {
				return nil, cand.refuse(host, "its Authorization header carries the placeholder key id elsewhere than as the credential's key id")
			}
			c, auth = cand, a
		}
	}
	if c == nil {
		return nil, nil
	}
	if len(vals) != 1 {
		return nil, c.refuse(host, "it has more than one Authorization header")
	}
	if !isTLS {
		return nil, c.refuse(host, "it is plain HTTP; an AWS credential signs only requests that leave over verified TLS")
	}
	if !slices.Contains(c.binding.AWS.Services, auth.Service) {
		return nil, c.refuse(host, fmt.Sprintf("it is signed for service %q, and the secret signs only for %s", auth.Service, strings.Join(c.binding.AWS.Services, ", ")))
	}
	if !slices.Contains(c.binding.AWS.Regions, auth.Region) {
		return nil, c.refuse(host, fmt.Sprintf("it is signed for region %q, and the secret signs only for %s", auth.Region, strings.Join(c.binding.AWS.Regions, ", ")))
	}
	date, err := sigv4.AmzDate(r.Header, auth)
	if err != nil {
		return nil, c.refuse(host, err.Error())
	}
	if tok := r.Header.Values("X-Amz-Security-Token"); len(tok) > 1 || len(tok) == 1 && tok[0] != c.ph.SessionToken {
		return nil, c.refuse(host, "its X-Amz-Security-Token is not the placeholder session token")
	}
	ar := &awsRequest{cred: c, auth: auth, amzDate: date}
	hasBody := r.Body != nil && r.Body != http.NoBody
	switch h := r.Header.Values("X-Amz-Content-Sha256"); {
	case len(h) > 1:
		return nil, c.refuse(host, "it has more than one x-amz-content-sha256")
	case len(h) == 0:
		// The signature covers the body's hash: read it (bounded).
		var body []byte
		if hasBody {
			body, err = io.ReadAll(io.LimitReader(r.Body, MaxAWSBufferedBody+1))
			if err != nil {
				return nil, c.refuse(host, "reading its body: "+err.Error())
			}
			if len(body) > MaxAWSBufferedBody {
				return nil, c.refuse(host, fmt.Sprintf("its body is over %d bytes and it declares no x-amz-content-sha256, so its signature could not be checked without holding it all", MaxAWSBufferedBody))
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		sum := sha256.Sum256(body)
		ar.payloadHash = hex.EncodeToString(sum[:])
	case h[0] == sigv4.UnsignedPayload || h[0] == sigv4.StreamingUnsignedTrailer:
		ar.payloadHash = h[0]
	case h[0] == sigv4.StreamingPayload:
		ar.payloadHash, ar.streaming = h[0], true
	case sigv4.IsHexSHA256(h[0]):
		ar.payloadHash = h[0]
		if hasBody {
			ar.bodyCheck = &hashCheck{src: r.Body, want: h[0], h: sha256.New(), ar: ar, host: host}
			r.Body = ar.bodyCheck
		} else if h[0] != sigv4.EmptySHA256 {
			return nil, c.refuse(host, "its x-amz-content-sha256 is not the hash of its empty body")
		}
	default:
		return nil, c.refuse(host, fmt.Sprintf("its x-amz-content-sha256 %q is a payload signing mode sbx does not re-sign", h[0]))
	}
	if err := sigv4.Verify(sigv4.FromHTTP(r), auth, date, ar.payloadHash, c.ph.SecretAccessKey); err != nil {
		return nil, c.refuse(host, "its signature was not made with the placeholder credential over the request as received ("+err.Error()+")")
	}
	r.Header.Del("Authorization")
	r.Header.Del("X-Amz-Security-Token")
	return ar, nil
}

// resign signs r again with the real credential, at the guest's time,
// over the headers the guest signed that are still there (sbx drops
// some, such as Range, on the way) with the outgoing host, and puts the
// real session token in (or drops it, for a credential without one).
// An aws-chunked body is re-signed chunk by chunk, chained from the new
// signature.
func (ar *awsRequest) resign(r *http.Request, authority string) (string, error) {
	real := ar.cred.real
	var signed []string
	for _, h := range ar.auth.SignedHeaders {
		switch {
		case h == "host" || h == "content-length" && r.ContentLength >= 0:
		case h == "x-amz-security-token":
			continue // decided below
		case len(r.Header.Values(h)) == 0:
			continue
		}
		signed = append(signed, h)
	}
	if real.SessionToken != "" {
		r.Header.Set("X-Amz-Security-Token", real.SessionToken)
		signed = append(signed, "x-amz-security-token")
		sort.Strings(signed)
	}
	na := *ar.auth
	na.AccessKeyID, na.SignedHeaders = real.AccessKeyID, signed
	sr := sigv4.FromHTTP(r)
	sr.Host = authority
	sig, err := sigv4.Sign(sr, &na, ar.amzDate, ar.payloadHash, real.SecretAccessKey)
	if err != nil {
		return "", err
	}
	na.Signature = sig
	r.Header.Set("Authorization", na.String())
	if ar.streaming && r.Body != nil && r.Body != http.NoBody {
		declared := int64(-1)
		if v := r.Header.Get("X-Amz-Decoded-Content-Length"); v != "" {
			if declared, err = strconv.ParseInt(v, 10, 64); err != nil || declared < 0 {
				return "", errors.New("malformed x-amz-decoded-content-length")
			}
		}
		r.Body = &chunkCheck{Resigner: sigv4.NewResigner(r.Body,
			sigv4.NewChunkSigner(ar.auth, ar.amzDate, ar.auth.Signature, ar.cred.ph.SecretAccessKey),
			sigv4.NewChunkSigner(&na, ar.amzDate, sig, real.SecretAccessKey), declared), ar: ar}
	}
	return sig, nil
}

func (c *awsCred) bound(host string) bool {
	for _, hp := range c.binding.Hosts {
		if hp.Match(host) {
			return true
		}
	}
	return false
}

func (c *awsCred) refuse(host, why string) *secretDenial {
	return &secretDenial{
		reason: fmt.Sprintf("a request to %s signed with the placeholder credential of AWS secret %q is refused: %s (%s)",
			host, c.binding.Name, why, originString(c.binding.Origin)),
		rule: c.binding.Origin,
	}
}

// hashCheck passes a body on while hashing it, and fails the read
// instead of ending it when the hash is not the one declared: the last
// read's bytes are held back until the next read (or the end) so that a
// body that does not match never leaves whole.
type hashCheck struct {
	src  io.ReadCloser
	want string
	h    interface {
		io.Writer
		Sum([]byte) []byte
	}
	ar   *awsRequest
	host string
	held []byte
	out  []byte
	err  error
	buf  [32 << 10]byte
}

func (b *hashCheck) Read(p []byte) (int, error) {
	for len(b.out) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		n, err := b.src.Read(b.buf[:])
		b.h.Write(b.buf[:n])
		b.out, b.held = b.held, append([]byte(nil), b.buf[:n]...)
		switch {
		case err == io.EOF:
			if hex.EncodeToString(b.h.Sum(nil)) != b.want {
				d := b.ar.cred.refuse(b.host, "its body is not the one its x-amz-content-sha256 declares")
				b.ar.denied.Store(d)
				b.out, b.held, b.err = nil, nil, errors.New(d.reason)
				continue
			}
			b.out, b.held = append(b.out, b.held...), nil
			b.err = io.EOF
		case err != nil:
			b.err = err
		}
	}
	n := copy(p, b.out)
	b.out = b.out[n:]
	return n, nil
}

func (b *hashCheck) Close() error { return b.src.Close() }

// chunkCheck records the refusal of an aws-chunked body whose chunk
// failed its check.
type chunkCheck struct {
	*sigv4.Resigner
	ar *awsRequest
}

func (c *chunkCheck) Read(p []byte) (int, error) {
	n, err := c.Resigner.Read(p)
	if errors.Is(err, sigv4.ErrChunk) && c.ar.denied.Load() == nil {
		c.ar.denied.Store(c.ar.cred.refuse("the upstream", err.Error()))
	}
	return n, err
}
