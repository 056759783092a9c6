package debrepo_test

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/build/debrepo"
)

// TestSubjectHashMatchesOpenSSL compares SubjectHash with what `openssl
// x509 -hash` prints for the host's CA certificates.
func TestSubjectHashMatchesOpenSSL(t *testing.T) {
	certs, _ := filepath.Glob("/usr/share/ca-certificates/mozilla/*.crt")
	if len(certs) == 0 {
		t.Fatal("the host has no certificates under /usr/share/ca-certificates/mozilla (install ca-certificates)")
	}
	if len(certs) > 40 {
		certs = certs[:40]
	}
	for _, p := range certs {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(data)
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		h, err := debrepo.SubjectHash(c.RawSubject)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out, err := exec.Command("openssl", "x509", "-hash", "-noout", "-in", p).Output()
		if err != nil {
			t.Fatalf("openssl: %v", err)
		}
		if got, want := fmt.Sprintf("%08x", h), strings.TrimSpace(string(out)); got != want {
			t.Errorf("%s: hash %s, openssl says %s", filepath.Base(p), got, want)
		}
	}
}
