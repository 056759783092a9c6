package sbx

import (
	"context"
	"os"

	"github.com/sbx-dev/sbx/internal/sandbox/sandboxnet"
	"github.com/sbx-dev/sbx/policy"
)

// Update makes the running sandbox enforce p from now on, as sbx apply
// does for an in-place update: new connections and requests follow it at
// once, connections to hosts p no longer allows are closed, a secret
// keeps the placeholder the guest knows (a rotated value reaches
// upstreams with no change in the guest), and a secret p adds is in the
// environment of the commands run from then on. The values of p's
// secrets are read as Start reads them, from the bindings file Start
// read and the spec's env: and file: sources, with environ (nil meaning
// this process's environment); a missing one is an error and leaves the
// old policy in force. The VM is not restarted, and its workspace mounts stay
// as they started: a p whose mounts differ from the sandbox's in
// anything but where their rules were written (host directory, access,
// hide, readonly, tmpfs, git protection, owner) is refused, and the old
// policy stays in force; such a change needs a new sandbox, as sbx
// apply replaces one.
func (s *Sandbox) Update(ctx context.Context, p policy.Sandbox, environ []string) error {
	if environ == nil {
		environ = os.Environ()
	}
	secrets, err := sandboxnet.ResolveSecrets(ctx, p, sandboxnet.SecretSources{ConfigDir: s.sb.Spec().ConfigDir, Bindings: s.binds, Environ: environ})
	if err != nil {
		return err
	}
	_, err = s.sb.Update(ctx, p, secrets)
	return err
}

// policy is the policy the sandbox enforces now.
func (s *Sandbox) policy() policy.Sandbox {
	return s.sb.Spec().Policy
}
