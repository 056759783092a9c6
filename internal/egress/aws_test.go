package egress

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/sbx-dev/sbx/internal/egress/sigv4"
	"github.com/sbx-dev/sbx/internal/egress/sigv4/sigv4test"
	"github.com/sbx-dev/sbx/policy"
)

// awsHarness serves s3.aws.test and bedrock.aws.test from a
// sigv4test.Fake that knows only the real credential.
func awsHarness(t *testing.T) (*harness, *sigv4test.Fake, sigv4.Credential) {
	t.Helper()
	pki := newUpstreamPKI(t)
	fake := &sigv4test.Fake{Credential: sdkE2EReal}
	up := upstreamTLS(t, pki, fake, "s3.aws.test", "bedrock.aws.test")
	p := spec(pki, []policy.AllowRule{allow("s3.aws.test", 4), allow("bedrock.aws.test", 5)},
		mapping("s3.aws.test", serverAddr(up)), mapping("bedrock.aws.test", serverAddr(up)))
	p.Secrets = []policy.SecretBinding{{
		Name: "aws", Env: "AWS_ACCESS_KEY_ID", Source: "env:AWS_CREDS",
		Hosts: []policy.HostPattern{policy.MustHostPattern("s3.aws.test"), policy.MustHostPattern("bedrock.aws.test")},
		AWS: &policy.AWSCredential{Services: []string{"bedrock", "s3"}, Regions: []string{"us-east-1"},
			SecretKeyEnv: "AWS_SECRET_ACCESS_KEY", SessionTokenEnv: "AWS_SESSION_TOKEN"},
		Origin: origin("secret.aws", 20),
	}}
	ph, err := sigv4.Placeholder()
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, p, map[string][]byte{"aws": sdkE2EReal.Compact()}, map[string]string{"aws": sigv4.PlaceholderString(ph)})
	return h, fake, ph
}

var awsSignTime = time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)

// signed returns a request signed by aws-sdk-go-v2 with c.
func signed(t *testing.T, c sigv4.Credential, method, url, service, region, payloadHash string, body []byte) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if payloadHash != "" {
		req.Header.Set("X-Amz-Content-Sha256", payloadHash)
	} else {
		s := sha256.Sum256(body)
		payloadHash = hex.EncodeToString(s[:])
	}
	req.Header.Set("Content-Type", "application/json")
	s := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = service == "s3" })
	if err := s.SignHTTP(context.Background(), aws.Credentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey, SessionToken: c.SessionToken},
		req, payloadHash, service, region, awsSignTime); err != nil {
		t.Fatal(err)
	}
	return req
}

// chunkedPut is an S3 PUT with a STREAMING-AWS4-HMAC-SHA256-PAYLOAD body
// signed by c, chunks chained from the SDK's seed signature; tamper, when
// set, changes a byte of the second chunk after signing.
func chunkedPut(t *testing.T, c sigv4.Credential, chunks [][]byte, tamper bool) *http.Request {
	t.Helper()
	var decoded int
	for _, d := range chunks {
		decoded += len(d)
	}
	// The encoded length, known before signing: signatures are 64 hex.
	var length int
	for _, d := range append(chunks, nil) {
		length += len(sigv4.EncodeChunk(d, strings.Repeat("0", 64)))
	}
	req, _ := http.NewRequest(http.MethodPut, "https://s3.aws.test/bucket/chunked.bin", nil)
	req.ContentLength = int64(length)
	req.Header.Set("Content-Encoding", "aws-chunked")
	req.Header.Set("X-Amz-Decoded-Content-Length", strconv.Itoa(decoded))
	req.Header.Set("X-Amz-Content-Sha256", sigv4.StreamingPayload)
	s := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	if err := s.SignHTTP(context.Background(), aws.Credentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey, SessionToken: c.SessionToken},
		req, sigv4.StreamingPayload, "s3", "us-east-1", awsSignTime); err != nil {
		t.Fatal(err)
	}
	a, _ := sigv4.ParseAuth(req.Header.Get("Authorization"))
	cs := sigv4.NewChunkSigner(a, req.Header.Get("X-Amz-Date"), a.Signature, c.SecretAccessKey)
	var body []byte
	for i, d := range append(chunks, nil) {
		enc := sigv4.EncodeChunk(d, cs.Sign(d))
		if tamper && i == 1 {
			enc[len(enc)-3] ^= 1
		}
		body = append(body, enc...)
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	return req
}

// TestAWSChunkedResigned sends an aws-chunked upload signed chunk by
// chunk with the placeholder: the fake, which checks the seed with the
// SDK's signer and every chunk with the real credential's chain,
// accepts it and gets the payload intact.
func TestAWSChunkedResigned(t *testing.T) {
	h, fake, ph := awsHarness(t)
	chunks := [][]byte{bytes.Repeat([]byte("a"), 65536), bytes.Repeat([]byte("b"), 1000)}
	res, err := h.client(true).Do(chunkedPut(t, ph, chunks, false))
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("chunked PUT: %d %s", res.StatusCode, msg)
	}
	got := fake.Received()
	if len(got) != 1 || got[0].Err != "" || !bytes.Equal(got[0].Body, bytes.Join(chunks, nil)) {
		t.Fatalf("the fake got %d requests (%+v)", len(got), got)
	}
}

// TestAWSRefusals plays requests the engine must refuse with a 403
// naming the AWS secret rather than re-sign, and checks none reached
// the fake with a valid signature.
func TestAWSRefusals(t *testing.T) {
	h, fake, ph := awsHarness(t)
	other := ph
	other.SecretAccessKey = strings.Repeat("Z", 40)
	body := []byte(`{"prompt":"hi"}`)
	bedrock := "https://bedrock.aws.test/model/m/invoke"
	cases := []struct {
		name string
		req  func() *http.Request
		want string
	}{
		{"signed with another secret", func() *http.Request { return signed(t, other, "POST", bedrock, "bedrock", "us-east-1", "", body) }, "not made with the placeholder"},
		{"service outside the declaration", func() *http.Request { return signed(t, ph, "POST", bedrock, "sts", "us-east-1", "", body) }, `service "sts"`},
		{"region outside the declaration", func() *http.Request { return signed(t, ph, "POST", bedrock, "bedrock", "eu-west-1", "", body) }, `region "eu-west-1"`},
		{"body changed after signing", func() *http.Request {
			r := signed(t, ph, "POST", bedrock, "bedrock", "us-east-1", "", body)
			r.Body = io.NopCloser(strings.NewReader(`{"prompt":"ho"}`))
			return r
		}, "not made with the placeholder"},
		{"signed header changed", func() *http.Request {
			r := signed(t, ph, "POST", bedrock, "bedrock", "us-east-1", "", body)
			r.Header.Set("Content-Type", "text/plain")
			return r
		}, "not made with the placeholder"},
		{"declared hash not the body's", func() *http.Request {
			s := sha256.Sum256([]byte("other"))
			return signed(t, ph, "PUT", "https://s3.aws.test/bucket/k", "s3", "us-east-1", hex.EncodeToString(s[:]), body)
		}, "x-amz-content-sha256 declares"},
		{"unknown payload mode", func() *http.Request {
			return signed(t, ph, "PUT", "https://s3.aws.test/bucket/k", "s3", "us-east-1", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER", body)
		}, "payload signing mode"},
		{"another session token", func() *http.Request {
			c := ph
			c.SessionToken = "IQoJsomethingelse"
			return signed(t, c, "POST", bedrock, "bedrock", "us-east-1", "", body)
		}, "X-Amz-Security-Token"},
		{"placeholder secret key in a header", func() *http.Request {
			r := signed(t, ph, "POST", bedrock, "bedrock", "us-east-1", "", body)
			r.Header.Set("X-Leak", ph.SecretAccessKey)
			return r
		}, "header x-leak"},
		{"placeholder key id as a bearer token", func() *http.Request {
			r, _ := http.NewRequest("GET", bedrock, nil)
			r.Header.Set("Authorization", "Bearer "+ph.AccessKeyID)
			return r
		}, "no Signature Version 4"},
		{"placeholder secret key as a bearer token", func() *http.Request {
			r, _ := http.NewRequest("GET", bedrock, nil)
			r.Header.Set("Authorization", "Bearer "+ph.SecretAccessKey)
			return r
		}, "never substituted"},
		{"tampered chunk", func() *http.Request {
			return chunkedPut(t, ph, [][]byte{bytes.Repeat([]byte("a"), 8192), []byte("tail")}, true)
		}, "chunk"},
		{"presigned URL", func() *http.Request {
			r, _ := http.NewRequest("GET", "https://s3.aws.test/bucket/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential="+ph.AccessKeyID+"%2F20261203%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Signature="+strings.Repeat("a", 64), nil)
			return r
		}, "presigned URL"},
		{"presigned URL, key id percent-encoded", func() *http.Request {
			enc := "%" + strconv.FormatInt(int64(ph.AccessKeyID[0]), 16) + ph.AccessKeyID[1:]
			r, _ := http.NewRequest("GET", "https://s3.aws.test/bucket/k?X-Amz-Credential="+enc+"%2F20261203%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Signature="+strings.Repeat("a", 64), nil)
			return r
		}, "presigned URL"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := h.client(false).Do(c.req())
			if err != nil {
				t.Fatal(err)
			}
			msg, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusForbidden || !strings.Contains(string(msg), "sbx egress") || !strings.Contains(string(msg), c.want) {
				t.Errorf("%d %s, want a 403 from sbx saying %q", res.StatusCode, msg, c.want)
			}
		})
	}
	for _, r := range fake.Received() {
		if r.Err == "" {
			t.Errorf("the fake accepted a request that should have been refused: %s %s", r.Method, r.Path)
		}
	}
	es := h.entries()
	var denied int
	for _, e := range es {
		if e.Decision == "deny" && strings.Contains(e.Reason, "AWS secret") {
			denied++
		}
	}
	if denied < len(cases) {
		t.Errorf("%d audit refusals naming the AWS secret, want %d", denied, len(cases))
	}
}

// TestAWSBedrockStylePOST sends a JSON POST signed as Bedrock's
// InvokeModel is (no x-amz-content-sha256, so the engine hashes the
// body; a model id whose ":" the path escapes twice when signed): the
// fake accepts the real credential's signature and gets the body, and
// the echo of the real Authorization reaches the guest as its own.
func TestAWSBedrockStylePOST(t *testing.T) {
	h, fake, ph := awsHarness(t)
	body := []byte(`{"anthropic_version":"bedrock-2023-05-31","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`)
	req := signed(t, ph, "POST", "https://bedrock.aws.test/model/anthropic.claude-sonnet-4%3A0/invoke", "bedrock", "us-east-1", "", body)
	for _, h2 := range []bool{true, false} {
		res, err := h.client(h2).Do(req.Clone(context.Background()))
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Errorf("h2=%v: %d %s", h2, res.StatusCode, msg)
		}
		// The fake echoes the Authorization it got: the guest sees its
		// own signature and the placeholder key id, never the real ones.
		guestAuth := req.Header.Get("Authorization")
		if !strings.Contains(string(msg), guestAuth) || strings.Contains(string(msg), sdkE2EReal.AccessKeyID) {
			t.Errorf("h2=%v: the echoed authorization is not the guest's own: %s (sent %s)", h2, msg, guestAuth)
		}
		req = signed(t, ph, "POST", "https://bedrock.aws.test/model/anthropic.claude-sonnet-4%3A0/invoke", "bedrock", "us-east-1", "", body)
	}
	got := fake.Received()
	if len(got) != 2 {
		t.Fatalf("the fake got %d requests", len(got))
	}
	for _, r := range got {
		if r.Err != "" || r.Service != "bedrock" || !bytes.Equal(r.Body, body) {
			t.Errorf("the fake: %+v", r)
		}
	}
}
