package sigv4test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/sbx-dev/sbx/internal/egress/sigv4"
)

// Received is one request the fake accepted or refused.
type Received struct {
	Method, Path, Query, Service string
	Header                       http.Header
	// Body is the payload as decoded (aws-chunked bodies de-chunked).
	Body []byte
	// Err is why the request was refused; empty when accepted.
	Err string
}

// Fake verifies requests with Credential.
type Fake struct {
	Credential sigv4.Credential
	mu         sync.Mutex
	got        []Received
}

// Received returns what the fake has seen.
func (f *Fake) Received() []Received {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Received(nil), f.got...)
}

func (f *Fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, service, err := f.verify(r)
	rec := Received{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Service: service, Header: r.Header.Clone(), Body: body}
	if err != nil {
		rec.Err = err.Error()
	}
	f.mu.Lock()
	f.got = append(f.got, rec)
	f.mu.Unlock()
	if err != nil {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, "<Error><Code>SignatureDoesNotMatch</Code><Message>%s</Message></Error>", escapeXML(err.Error()))
		return
	}
	switch {
	case service == "sts":
		w.Header().Set("Content-Type", "text/xml")
		fmt.Fprint(w, `<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><GetCallerIdentityResult><Arn>arn:aws:iam::123456789012:user/fake</Arn><UserId>AIDAFAKE</UserId><Account>123456789012</Account></GetCallerIdentityResult><ResponseMetadata><RequestId>1</RequestId></ResponseMetadata></GetCallerIdentityResponse>`)
	case r.Method == http.MethodPut:
		sum := sha256.Sum256(body)
		w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:16])+`"`)
	default:
		// Echoes the authorization, as a hostile or debugging service
		// might: the guest must not get a real signature from it.
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"ok":true,"authorization":%q}`, r.Header.Get("Authorization"))
	}
}

// verify checks r's signature with the fake's credential by signing the
// request again with aws-sdk-go-v2 over the headers r signed, and
// returns the payload.
func (f *Fake) verify(r *http.Request) ([]byte, string, error) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, "", err
	}
	if r.URL.Query().Get("X-Amz-Signature") != "" {
		return raw, "", fmt.Errorf("query authorization is not accepted by this fake")
	}
	a, err := sigv4.ParseAuth(r.Header.Get("Authorization"))
	if err != nil {
		return raw, "", err
	}
	if a.AccessKeyID != f.Credential.AccessKeyID {
		return raw, a.Service, fmt.Errorf("unknown access key id")
	}
	if f.Credential.SessionToken != "" && r.Header.Get("X-Amz-Security-Token") != f.Credential.SessionToken {
		return raw, a.Service, fmt.Errorf("the security token is not the session's")
	}
	signTime, err := time.Parse(sigv4.TimeFormat, r.Header.Get("X-Amz-Date"))
	if err != nil {
		return raw, a.Service, err
	}
	payloadHash := r.Header.Get("X-Amz-Content-Sha256")
	if payloadHash == "" {
		sum := sha256.Sum256(raw)
		payloadHash = hex.EncodeToString(sum[:])
	}
	if sigv4.IsHexSHA256(payloadHash) {
		if sum := sha256.Sum256(raw); hex.EncodeToString(sum[:]) != payloadHash {
			return raw, a.Service, fmt.Errorf("the body is not the one x-amz-content-sha256 names")
		}
	}
	// Sign a copy holding only the signed headers, as the SDK would.
	c, _ := http.NewRequest(r.Method, "https://"+r.Host+r.URL.RequestURI(), nil)
	c.Host = r.Host
	c.ContentLength = r.ContentLength
	for _, h := range a.SignedHeaders {
		switch h {
		case "host", "content-length", "x-amz-date", "x-amz-security-token":
			continue
		}
		for _, v := range r.Header.Values(h) {
			c.Header.Add(h, v)
		}
	}
	s := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = a.Service == "s3" })
	creds := aws.Credentials{AccessKeyID: f.Credential.AccessKeyID, SecretAccessKey: f.Credential.SecretAccessKey, SessionToken: f.Credential.SessionToken}
	if err := s.SignHTTP(context.Background(), creds, c, payloadHash, a.Service, a.Region, signTime); err != nil {
		return raw, a.Service, err
	}
	want, err := sigv4.ParseAuth(c.Header.Get("Authorization"))
	if err != nil {
		return raw, a.Service, err
	}
	if strings.Join(want.SignedHeaders, ";") != strings.Join(a.SignedHeaders, ";") {
		return raw, a.Service, fmt.Errorf("signed headers %v, the SDK signs %v", a.SignedHeaders, want.SignedHeaders)
	}
	if !hmac.Equal([]byte(want.Signature), []byte(a.Signature)) {
		return raw, a.Service, fmt.Errorf("the request signature we calculated does not match the signature you provided")
	}
	if payloadHash != sigv4.StreamingPayload {
		return raw, a.Service, nil
	}
	body, err := dechunk(raw, sigv4.NewChunkSigner(a, r.Header.Get("X-Amz-Date"), a.Signature, f.Credential.SecretAccessKey))
	return body, a.Service, err
}

// dechunk checks every chunk of an aws-chunked body with cs.
func dechunk(raw []byte, cs *sigv4.ChunkSigner) ([]byte, error) {
	var out []byte
	for {
		line, rest, ok := bytes.Cut(raw, []byte("\r\n"))
		if !ok {
			return out, fmt.Errorf("truncated aws-chunked body")
		}
		size, sig, ok := strings.Cut(string(line), ";chunk-signature=")
		var n int
		if _, err := fmt.Sscanf(size, "%x", &n); !ok || err != nil || len(rest) < n+2 {
			return out, fmt.Errorf("malformed chunk")
		}
		data := rest[:n]
		if cs.Sign(data) != sig {
			return out, fmt.Errorf("a chunk signature does not match")
		}
		out = append(out, data...)
		raw = rest[n+2:]
		if n == 0 {
			if len(raw) != 0 {
				return out, fmt.Errorf("bytes after the last chunk")
			}
			return out, nil
		}
	}
}

func escapeXML(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
