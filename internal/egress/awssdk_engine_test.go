package egress

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/sbx-dev/sbx/internal/egress/audit"
	"github.com/sbx-dev/sbx/internal/egress/sigv4"
	"github.com/sbx-dev/sbx/policy"
)

// sdkE2EReal is the real credential, which only the host and the fake
// service know.
var sdkE2EReal = sigv4.Credential{
	AccessKeyID:     "ASIAREALREALREAL1234",
	SecretAccessKey: "realSecretKeyrealSecretKeyrealSecretKey0",
	SessionToken:    "realSessionTokenrealSessionTokenrealSessionToken",
}

// sdkE2EFake accepts a request only when its SigV4 signature, computed
// again by the aws-sdk-go-v2 signer (not sbx's) over the headers the
// request names, is the real credential's. It sends what it saw on seen.
type sdkE2EFake struct{ seen chan string }

func (f *sdkE2EFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	auth := r.Header.Get("Authorization")
	f.seen <- auth + " " + r.Header.Get("X-Amz-Security-Token") + " " + r.URL.RawQuery
	a, err := sigv4.ParseAuth(auth)
	if err != nil || a.AccessKeyID != sdkE2EReal.AccessKeyID || r.Header.Get("X-Amz-Security-Token") != sdkE2EReal.SessionToken {
		http.Error(w, "InvalidClientTokenId", http.StatusForbidden)
		return
	}
	body, _ := io.ReadAll(r.Body)
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if payload == "" {
		s := sha256.Sum256(body)
		payload = hex.EncodeToString(s[:])
	}
	re, _ := http.NewRequest(r.Method, "https://"+r.Host+r.URL.RequestURI(), nil)
	re.ContentLength = r.ContentLength
	for _, h := range a.SignedHeaders {
		if h != "host" && h != "content-length" {
			re.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	when, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		http.Error(w, "bad date", http.StatusForbidden)
		return
	}
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = a.Service == "s3" })
	creds := aws.Credentials{AccessKeyID: sdkE2EReal.AccessKeyID, SecretAccessKey: sdkE2EReal.SecretAccessKey, SessionToken: sdkE2EReal.SessionToken}
	if err := signer.SignHTTP(context.Background(), creds, re, payload, a.Service, a.Region, when); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if re.Header.Get("Authorization") != auth {
		http.Error(w, "SignatureDoesNotMatch", http.StatusForbidden)
		return
	}
	if a.Service == "sts" {
		w.Header().Set("Content-Type", "text/xml")
		io.WriteString(w, `<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><GetCallerIdentityResult><Arn>arn:aws:iam::123456789012:user/sbx</Arn><UserId>`+sdkE2EReal.AccessKeyID+`</UserId><Account>123456789012</Account></GetCallerIdentityResult><ResponseMetadata><RequestId>1</RequestId></ResponseMetadata></GetCallerIdentityResponse>`)
		return
	}
	w.Header().Set("ETag", `"1"`)
}

// sdkE2EHarness serves sts.aws.test, s3.aws.test and other.aws.test from
// an sdkE2EFake; secret "aws" is declared for the first two, for
// services sts and s3 in us-east-1.
func sdkE2EHarness(t *testing.T) (*harness, *sdkE2EFake, sigv4.Credential) {
	t.Helper()
	pki := newUpstreamPKI(t)
	fake := &sdkE2EFake{seen: make(chan string, 100)}
	up := upstreamTLS(t, pki, fake, "sts.aws.test", "s3.aws.test", "other.aws.test")
	p := spec(pki, []policy.AllowRule{allow("sts.aws.test", 4), allow("s3.aws.test", 5), allow("other.aws.test", 6)},
		mapping("sts.aws.test", serverAddr(up)), mapping("s3.aws.test", serverAddr(up)), mapping("other.aws.test", serverAddr(up)))
	p.Secrets = []policy.SecretBinding{{
		Name: "aws", Env: "AWS_ACCESS_KEY_ID", Source: "env:AWS_CREDS",
		Hosts: []policy.HostPattern{policy.MustHostPattern("sts.aws.test"), policy.MustHostPattern("s3.aws.test")},
		AWS: &policy.AWSCredential{Services: []string{"s3", "sts"}, Regions: []string{"us-east-1"},
			SecretKeyEnv: "AWS_SECRET_ACCESS_KEY", SessionTokenEnv: "AWS_SESSION_TOKEN"},
		Origin: origin("secret.aws", 20),
	}}
	ph, err := sigv4.Placeholder()
	if err != nil {
		t.Fatal(err)
	}
	value, _ := json.Marshal(map[string]any{"Version": 1, "AccessKeyId": sdkE2EReal.AccessKeyID,
		"SecretAccessKey": sdkE2EReal.SecretAccessKey, "SessionToken": sdkE2EReal.SessionToken, "Expiration": "2030-01-01T00:00:00Z"})
	h := newHarness(t, p, map[string][]byte{"aws": value}, map[string]string{"aws": sigv4.PlaceholderString(ph)})
	return h, fake, ph
}

func sdkE2EConfig(h *harness, c sigv4.Credential, region string) aws.Config {
	return aws.Config{
		Region:      region,
		Credentials: credentials.NewStaticCredentialsProvider(c.AccessKeyID, c.SecretAccessKey, c.SessionToken),
		HTTPClient:  h.client(true),
	}
}

// TestAWSSDKClientsThroughEngine has aws-sdk-go-v2 clients holding the
// placeholder credential call STS (a signed body whose hash the engine
// computes) and S3 (PutObject, with the SDK's streaming checksum
// trailer) through the engine, over real TLS with a test CA; the fake
// accepts only the real credential's signature as the SDK's own signer
// computes it, and sees no placeholder. A presigned placeholder URL, a
// region outside the declaration, a signature made with another secret
// key and the placeholder sent to a host the secret is not bound to are
// refused with a 403 and an audit line, and never reach the fake. The
// real key id the fake echoes reaches the client as the placeholder.
func TestAWSSDKClientsThroughEngine(t *testing.T) {
	h, fake, ph := sdkE2EHarness(t)
	ctx := context.Background()
	stsAt := func(c sigv4.Credential, region, endpoint string) *sts.Client {
		return sts.NewFromConfig(sdkE2EConfig(h, c, region), func(o *sts.Options) { o.BaseEndpoint = aws.String(endpoint) })
	}

	out, err := stsAt(ph, "us-east-1", "https://sts.aws.test").GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		t.Fatalf("GetCallerIdentity: %v", err)
	}
	if aws.ToString(out.UserId) != ph.AccessKeyID {
		t.Errorf("UserId = %q, want the placeholder key id (the real one masked)", aws.ToString(out.UserId))
	}
	if got := <-fake.seen; !strings.Contains(got, sdkE2EReal.AccessKeyID) || strings.Contains(got, ph.AccessKeyID) || strings.Contains(got, ph.SessionToken) {
		t.Errorf("the fake saw %q, want the real key id and token only", got)
	}

	s3c := s3.NewFromConfig(sdkE2EConfig(h, ph, "us-east-1"), func(o *s3.Options) {
		o.BaseEndpoint = aws.String("https://s3.aws.test")
		o.UsePathStyle = true
	})
	body := bytes.Repeat([]byte("sandboxed object "), 10000)
	if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket"), Key: aws.String("dir/a key+1.txt"), Body: bytes.NewReader(body)}); err != nil {
		t.Fatalf("PutObject: %v", err)
	}
	<-fake.seen

	presigned, err := s3.NewPresignClient(s3c).PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bucket"), Key: aws.String("a")})
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.client(true).Get(presigned.URL)
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden || !strings.Contains(string(msg), "presigned") {
		t.Errorf("presigned URL: %d %s, want 403 naming the presigned URL", res.StatusCode, msg)
	}

	forged := ph
	forged.SecretAccessKey = strings.Repeat("x", 40)
	for name, c := range map[string]*sts.Client{
		"region outside the declaration": stsAt(ph, "eu-west-1", "https://sts.aws.test"),
		"another secret key":             stsAt(forged, "us-east-1", "https://sts.aws.test"),
		"a host the secret is not bound": stsAt(ph, "us-east-1", "https://other.aws.test"),
	} {
		if _, err := c.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{}); err == nil || !strings.Contains(err.Error(), "403") {
			t.Errorf("%s: %v, want a 403", name, err)
		}
	}
	select {
	case got := <-fake.seen:
		t.Errorf("a refused request reached the fake: %q", got)
	default:
	}

	var denied int
	for _, e := range h.entries() {
		for _, v := range []string{sdkE2EReal.AccessKeyID, sdkE2EReal.SecretAccessKey, sdkE2EReal.SessionToken} {
			if strings.Contains(e.Reason+e.Path, v) {
				t.Errorf("audit entry holds a real value: %+v", e)
			}
		}
		if e.Decision == audit.DecisionDeny {
			denied++
		}
	}
	if denied < 4 {
		t.Errorf("%d refusals in the audit log, want 4", denied)
	}
}
