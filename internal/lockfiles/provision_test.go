package lockfiles

import (
	"strings"
	"testing"
)

// TestProvisionHashRoundTrip: provision_hash is written after
// input_hash, read back, and part of equality; a lock without it is
// written as before.
func TestProvisionHashRoundTrip(t *testing.T) {
	h := "sha256:" + strings.Repeat("ab", 32)
	l := &Lock{Images: map[string]*Image{"agent": {
		Name: "agent", Platform: "linux/amd64", InputHash: "sha256:" + strings.Repeat("01", 32), ProvisionHash: h,
		Inputs:  map[string]*Pin{"base": {Source: "alpine:3.23", Kind: "oci", Digest: "sha256:" + strings.Repeat("02", 32), Manifest: "sha256:" + strings.Repeat("03", 32)}},
		Outputs: map[string]string{"disk": "sha256:" + strings.Repeat("04", 32)},
	}}}
	data := Marshal(l)
	if !strings.Contains(string(data), "provision_hash = \""+h+"\"") {
		t.Fatalf("no provision_hash written:\n%s", data)
	}
	back, diags := Parse(data, "sbx.lock.hcl")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if !back.Equal(l) || back.Images["agent"].ProvisionHash != h {
		t.Errorf("read back %+v", back.Images["agent"])
	}
	back.Images["agent"].ProvisionHash = ""
	if back.Equal(l) {
		t.Error("locks that differ in provision_hash are equal")
	}
	if strings.Contains(string(Marshal(back)), "provision_hash") {
		t.Error("an image without steps is written with provision_hash")
	}
	if _, diags := Parse([]byte(strings.Replace(string(data), h, "sha256:nothex", 1)), "sbx.lock.hcl"); !diags.HasErrors() {
		t.Error("a malformed provision_hash was accepted")
	}
}
