package recipe

import (
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/sbx-dev/sbx/lang"
	"github.com/sbx-dev/sbx/policy"
)

// provisionVersion opens the encoding ProvisionHash hashes.
const provisionVersion = "sbx-provision-v1"

// ProvisionHash returns "sha256:<hex>" over img's provision steps, in
// the order they run: each step's name, its argument vector, its
// environment sorted by name, its timeout and its egress policy
// (policy.Hash, which leaves out where each rule is written). It is ""
// when img has no steps.
//
// The steps are not part of InputHash: the disk they start from is
// built, and cached, by the image's input hash alone, so that a changed
// step runs again on the same base disk.
func ProvisionHash(img *lang.Image) string {
	if img == nil || len(img.Provision) == 0 {
		return ""
	}
	var e encoder
	e.raw(provisionVersion)
	e.count("steps", len(img.Provision))
	for _, s := range img.Provision {
		e.str("step", s.Name)
		e.strs("run", s.Run)
		keys := sortedKeys(s.Env)
		e.count("env", len(keys))
		for _, k := range keys {
			e.str("key", k)
			e.str("value", s.Env[k])
		}
		e.int("timeout_ms", int64(s.Timeout/time.Millisecond))
		e.str("egress", policy.Hash(s.Egress))
	}
	sum := sha256.Sum256(e.b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ImageHash is the hash a sandbox records for its image, whose change
// replaces the sandbox: the input hash alone for an image without
// provision steps (provisionHash ""), else "sha256:<hex>" over both.
func ImageHash(inputHash, provisionHash string) string {
	if provisionHash == "" {
		return inputHash
	}
	h := sha256.New()
	h.Write([]byte("sbx provisioned image\ninput " + inputHash + "\nprovision " + provisionHash + "\n"))
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
