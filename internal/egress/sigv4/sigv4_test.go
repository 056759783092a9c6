package sigv4_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/sbx-dev/sbx/internal/egress/sigv4"
)

const (
	exampleKeyID  = "AKIAIOSFODNN7EXAMPLE"
	exampleSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
)

// sdkSigned returns a request signed by aws-sdk-go-v2's own signer.
func sdkSigned(t *testing.T, service, url, payloadHash string, hdr map[string]string, opts ...func(*v4.SignerOptions)) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	s := v4.NewSigner(opts...)
	creds := aws.Credentials{AccessKeyID: exampleKeyID, SecretAccessKey: exampleSecret, SessionToken: "tok"}
	if err := s.SignHTTP(context.Background(), creds, req, payloadHash, service, "us-east-1", time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	return req
}

// TestVerifySDKSignature checks that a signature aws-sdk-go-v2 makes
// verifies with its secret and with no other, over the request as sent,
// for a service whose path is escaped twice and for S3, whose is not.
func TestVerifySDKSignature(t *testing.T) {
	hash := sigv4.EmptySHA256
	cases := []struct {
		name, service, url string
		opts               []func(*v4.SignerOptions)
	}{
		{"bedrock", "bedrock", "https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude%3A1/invoke?b=2&a=x%20y&a=1", nil},
		{"sts", "sts", "https://sts.amazonaws.com/", nil},
		{"s3", "s3", "https://bucket.s3.us-east-1.amazonaws.com/dir/a%20b+c~.txt?x-id=PutObject&uploads",
			[]func(*v4.SignerOptions){func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := sdkSigned(t, c.service, c.url, hash, map[string]string{"Content-Type": "application/json", "X-Amz-Target": "a.b", "X-Odd": "  two   spaces  "}, c.opts...)
			a, err := sigv4.ParseAuth(req.Header.Get("Authorization"))
			if err != nil {
				t.Fatal(err)
			}
			if a.AccessKeyID != exampleKeyID || a.Service != c.service || a.Region != "us-east-1" {
				t.Fatalf("parsed %+v", a)
			}
			date, err := sigv4.AmzDate(req.Header, a)
			if err != nil {
				t.Fatal(err)
			}
			r := sigv4.FromHTTP(req)
			if err := sigv4.Verify(r, a, date, hash, exampleSecret); err != nil {
				t.Fatalf("the SDK's signature does not verify: %v", err)
			}
			if err := sigv4.Verify(r, a, date, hash, exampleSecret+"x"); err == nil {
				t.Error("verified with another secret")
			}
			req.Header.Set("X-Amz-Target", "a.c")
			if err := sigv4.Verify(sigv4.FromHTTP(req), a, date, hash, exampleSecret); err == nil {
				t.Error("verified after a signed header changed")
			}
			req.Header.Set("X-Amz-Target", "a.b")
			req.URL.RawQuery += "&z=1"
			if err := sigv4.Verify(sigv4.FromHTTP(req), a, date, hash, exampleSecret); err == nil {
				t.Error("verified after the query changed")
			}
			if err := sigv4.Verify(r, a, date, strings.Repeat("0", 64), exampleSecret); err == nil {
				t.Error("verified with another payload hash")
			}
		})
	}
}

// TestResignVerifiesWithSDK re-signs a request with another credential
// over the same signed headers and checks the result against a
// signature aws-sdk-go-v2 makes over those headers with that credential.
func TestResignVerifiesWithSDK(t *testing.T) {
	req := sdkSigned(t, "bedrock", "https://bedrock-runtime.us-east-1.amazonaws.com/model/m/invoke", sigv4.EmptySHA256, map[string]string{"Content-Type": "application/json"})
	a, _ := sigv4.ParseAuth(req.Header.Get("Authorization"))
	date, _ := sigv4.AmzDate(req.Header, a)
	real := "REALSECRETREALSECRETREALSECRETREALSECRET"
	sig, err := sigv4.Sign(sigv4.FromHTTP(req), a, date, sigv4.EmptySHA256, real)
	if err != nil {
		t.Fatal(err)
	}
	again := req.Clone(context.Background())
	again.Header.Del("Authorization")
	s := v4.NewSigner()
	if err := s.SignHTTP(context.Background(), aws.Credentials{AccessKeyID: "AKIDREAL", SecretAccessKey: real, SessionToken: "tok"},
		again, sigv4.EmptySHA256, "bedrock", "us-east-1", time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	b, _ := sigv4.ParseAuth(again.Header.Get("Authorization"))
	if b.Signature != sig {
		t.Errorf("re-signed %s, the SDK signs %s (signed %v / %v)", sig, b.Signature, a.SignedHeaders, b.SignedHeaders)
	}
}

func TestParseAuthRefusals(t *testing.T) {
	good := "AWS4-HMAC-SHA256 Credential=AKID/20261203/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature=" + strings.Repeat("a", 64)
	if _, err := sigv4.ParseAuth(good); err != nil {
		t.Fatalf("good: %v", err)
	}
	for _, v := range []string{
		"Bearer x",
		"AWS4-HMAC-SHA256 Credential=AKID/20261203/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=zz",
		"AWS4-HMAC-SHA256 Credential=AKID/20261203/us-east-1/aws4_request, SignedHeaders=host, Signature=" + strings.Repeat("a", 64),
		"AWS4-HMAC-SHA256 Credential=AKID/20261203/us-east-1/s3/aws4_request, SignedHeaders=x-amz-date, Signature=" + strings.Repeat("a", 64),
		"AWS4-HMAC-SHA256 Credential=AKID/20261203/us-east-1/s3/aws4_request, SignedHeaders=x-amz-date;host, Signature=" + strings.Repeat("a", 64),
		"AWS4-HMAC-SHA256 Credential=AKID/20261203/us-east-1/s3/aws4_request, Credential=B/20261203/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=" + strings.Repeat("a", 64),
		"AWS4-HMAC-SHA256 Credential=AKID/20261203/us-east-1/s3/aws4_request, SignedHeaders=host",
	} {
		if _, err := sigv4.ParseAuth(v); err == nil {
			t.Errorf("ParseAuth(%q) accepted", v)
		}
	}
}

// TestChunkedExample checks the chunk signatures against AWS's worked
// example of a STREAMING-AWS4-HMAC-SHA256-PAYLOAD upload.
func TestChunkedExample(t *testing.T) {
	a := &sigv4.Auth{AccessKeyID: exampleKeyID, Date: "20130524", Region: "us-east-1", Service: "s3"}
	c := sigv4.NewChunkSigner(a, "20130524T000000Z", "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9", exampleSecret)
	for i, want := range []struct {
		n   int
		sig string
	}{
		{65536, "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648"},
		{1024, "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497"},
		{0, "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9"},
	} {
		if got := c.Sign(bytes.Repeat([]byte("a"), want.n)); got != want.sig {
			t.Errorf("chunk %d: signature %s, want %s", i, got, want.sig)
		}
	}
}

// chunkedBody encodes chunks signed in the chain of secret from seed.
func chunkedBody(a *sigv4.Auth, seed, secret string, chunks ...[]byte) []byte {
	c := sigv4.NewChunkSigner(a, "20261203T070000Z", seed, secret)
	var out []byte
	for _, d := range append(chunks, nil) {
		out = append(out, sigv4.EncodeChunk(d, c.Sign(d))...)
	}
	return out
}

// TestResigner re-signs a chunked body from a placeholder chain into a
// real one and checks the output is exactly the body the real secret
// would have signed; a tampered chunk, a bad frame, a short or long body
// and bytes after the end fail the read.
func TestResigner(t *testing.T) {
	a := &sigv4.Auth{AccessKeyID: "AKIAPLACEHOLDER00000", Date: "20261203", Region: "us-east-1", Service: "s3"}
	phSeed, realSeed := strings.Repeat("1", 64), strings.Repeat("2", 64)
	ph, real := "PLACEHOLDERSECRETPLACEHOLDERSECRET000000", "REALSECRETREALSECRETREALSECRETREALSECRET"
	chunks := [][]byte{bytes.Repeat([]byte("x"), 65536), []byte("tail")}
	in := chunkedBody(a, phSeed, ph, chunks...)
	want := chunkedBody(a, realSeed, real, chunks...)
	resign := func(body []byte, declared int64) ([]byte, error) {
		r := sigv4.NewResigner(io.NopCloser(bytes.NewReader(body)),
			sigv4.NewChunkSigner(a, "20261203T070000Z", phSeed, ph), sigv4.NewChunkSigner(a, "20261203T070000Z", realSeed, real), declared)
		return io.ReadAll(r)
	}
	got, err := resign(in, 65540)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("re-signed body differs from the real chain's (%d vs %d bytes)", len(got), len(want))
	}
	tampered := bytes.Clone(in)
	tampered[len(tampered)/2] ^= 1
	wrongSecret := chunkedBody(a, phSeed, real, chunks...)
	for _, c := range []struct {
		name     string
		body     []byte
		declared int64
	}{
		{"tampered chunk", tampered, 65540},
		{"signed with another secret", wrongSecret, 65540},
		{"declared length short", in, 65539},
		{"declared length long", in, 65541},
		{"truncated", in[:len(in)-10], 65540},
		{"bytes after the end", append(bytes.Clone(in), 'x'), 65540},
		{"no signature", []byte("4\r\ntail\r\n0\r\n\r\n"), 4},
		{"chunk too big", []byte("ffffffff;chunk-signature=" + strings.Repeat("a", 64) + "\r\n"), -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := resign(c.body, c.declared); !errors.Is(err, sigv4.ErrChunk) {
				t.Errorf("err = %v, want a chunk error", err)
			}
		})
	}
}
