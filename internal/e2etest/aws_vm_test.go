package e2etest

import (
	"bytes"
	"context"
	"crypto/tls"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx"
	"github.com/sbx-dev/sbx/internal/egress/audit"
	"github.com/sbx-dev/sbx/internal/egress/sigv4"
	"github.com/sbx-dev/sbx/internal/egress/sigv4/sigv4test"
)

// awsReal is the credential only the host and the fake service know.
var awsReal = sigv4.Credential{
	AccessKeyID:     "ASIAREALHOSTKEY12345",
	SecretAccessKey: "hostSecretKeyhostSecretKeyhostSecretKey0",
	SessionToken:    "IQoJhostSessionTokenhostSessionTokenhostSessionToken",
}

// TestAWSSigV4InVM boots a busybox guest whose spec declares an AWS
// credential for two hosts mapped to a fake AWS service, and runs a
// static aws-sdk-go-v2 program in it (testdata/aws/awsclient) that takes
// its credential from the environment: STS GetCallerIdentity and S3
// PutObject succeed, the fake having checked, with the SDK's own
// signer, that each was signed with the real credential; a presigned
// GetObject URL made with the placeholders is refused by the host with
// a 403 and an audit entry and never reaches the fake. The guest's
// variables hold placeholders shaped like a temporary credential, and
// no real value appears in anything the guest printed.
func TestAWSSigV4InVM(t *testing.T) {
	cfgDir := t.TempDir()
	for _, name := range []string{"kernel.deb", "busybox.deb"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cfgDir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	buildCtx, cancelBuild := context.WithTimeout(context.Background(), 5*time.Minute)
	build := exec.CommandContext(buildCtx, "go", "build", "-trimpath", "-o", filepath.Join(cfgDir, "awsclient"), "./testdata/aws/awsclient")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if out, err := build.CombinedOutput(); err != nil {
		cancelBuild()
		t.Fatalf("building awsclient: %v\n%s", err, out)
	}
	cancelBuild()

	caPEM, cert := testPKI(t, "s3.aws.test", "sts.aws.test")
	fake := &sigv4test.Fake{Credential: awsReal}
	srv := httptest.NewUnstartedServer(fake)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()

	tmpl, err := os.ReadFile("testdata/aws/sbx.hcl")
	if err != nil {
		t.Fatal(err)
	}
	spec := strings.ReplaceAll(string(tmpl), "@UPSTREAM@", srv.Listener.Addr().String())
	for name, data := range map[string]string{"sbx.hcl": spec, "upstream-ca.pem": string(caPEM)} {
		if err := os.WriteFile(filepath.Join(cfgDir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	t.Setenv("XDG_STATE_HOME", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cfg, err := sbx.Load(cfgDir, sbx.Options{Environ: environ})
	if err != nil {
		t.Fatal(err)
	}
	// What `aws configure export-credentials --format process` prints.
	creds := `{
  "Version": 1,
  "AccessKeyId": "` + awsReal.AccessKeyID + `",
  "SecretAccessKey": "` + awsReal.SecretAccessKey + `",
  "SessionToken": "` + awsReal.SessionToken + `",
  "Expiration": "2030-01-01T00:00:00+00:00"
}`
	auditDir := t.TempDir()
	start := time.Now()
	sb, err := sbx.Start(ctx, cfg, "aws", sbx.StartOptions{
		Environ:  append(environ[:len(environ):len(environ)], "SBX_AWS_TEST_CREDENTIALS="+creds),
		AuditDir: auditDir,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Stop(context.Background())
	t.Logf("built and booted in %v", time.Since(start).Round(time.Second))

	var out bytes.Buffer
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Minute)
	st, err := sb.Exec(rctx, sbx.Cmd{Args: []string{"/usr/local/bin/awsclient"}, Stdout: &out, Stderr: &out})
	rcancel()
	guest := out.String()
	if err != nil || st.Code != 0 {
		t.Fatalf("awsclient: %v %v\n%s", st, err, guest)
	}
	var envOut bytes.Buffer
	if _, err := sb.Exec(ctx, sbx.Cmd{Args: []string{"env"}, User: "root", Stdout: &envOut, Stderr: &envOut}); err != nil {
		t.Fatal(err)
	}
	guest += envOut.String()
	t.Logf("guest:\n%s", out.String())

	for _, want := range []string{"sts ok account=123456789012", "s3 ok bytes=69632", "presigned status=403 sbx egress:", "presigned URL"} {
		if !strings.Contains(guest, want) {
			t.Errorf("the guest's output lacks %q", want)
		}
	}
	if !regexp.MustCompile(`AWS_ACCESS_KEY_ID=ASIA[A-Z2-7]{16} AWS_SECRET_ACCESS_KEY=[A-Za-z0-9+/]{40} AWS_SESSION_TOKEN=IQoJ[A-Za-z0-9+/]+\n`).MatchString(guest) {
		t.Errorf("the guest's credential is not shaped like a temporary AWS credential:\n%s", guest)
	}
	for _, v := range []string{awsReal.AccessKeyID, awsReal.SecretAccessKey, awsReal.SessionToken} {
		if strings.Contains(guest, v) {
			t.Errorf("the guest saw a real value")
		}
	}

	var accepted int
	for _, r := range fake.Received() {
		if strings.Contains(r.Query, "X-Amz-Signature") {
			t.Errorf("the presigned URL reached the fake: %s %s?%s", r.Method, r.Path, r.Query)
		}
		if r.Err != "" {
			t.Errorf("the fake refused %s %s: %s", r.Method, r.Path, r.Err)
			continue
		}
		accepted++
	}
	if accepted != 2 {
		t.Errorf("the fake accepted %d requests signed with the real credential, want 2 (STS and S3)", accepted)
	}

	if err := sb.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	es, err := audit.Tail(auditDir, 10000)
	if err != nil {
		t.Fatal(err)
	}
	var denied, resigned int
	for _, e := range es {
		for _, v := range []string{awsReal.AccessKeyID, awsReal.SecretAccessKey, awsReal.SessionToken} {
			if strings.Contains(e.Reason+e.Path, v) {
				t.Errorf("an audit entry holds a real value: %+v", e)
			}
		}
		switch {
		case e.Decision == audit.DecisionDeny && strings.Contains(e.Reason, "presigned URL"):
			denied++
		case e.Decision == audit.DecisionAllow && len(e.Secrets) == 1 && e.Secrets[0] == "aws":
			resigned++
		}
	}
	if denied != 1 || resigned != 2 {
		t.Errorf("audit: %d presigned refusals and %d re-signed requests, want 1 and 2:\n%+v", denied, resigned, es)
	}
}
