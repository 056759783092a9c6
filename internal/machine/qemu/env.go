package qemu

import "github.com/sbx-dev/sbx/internal/hostenv"

// environKeep are the variables of the user's environment QEMU is given:
// PATH and HOME, which programs expect to find, and TMPDIR, where QEMU
// makes its temporary files. Nothing else reaches it.
var environKeep = []string{"PATH", "HOME", "TMPDIR"}

// Environment returns the environment QEMU runs with (Launch, and the
// probes that run it), from the user's environ (as os.Environ gives it):
// the variables of environKeep that are set, and LC_ALL=C so that its
// messages, quoted in errors, do not depend on the user's locale. The
// user's tokens, credentials and other settings stay out of the emulator,
// whose process every guest escape would start from.
func Environment(environ []string) []string {
	var env []string
	for _, name := range environKeep {
		if v, ok := hostenv.Lookup(environ, name); ok {
			env = append(env, name+"="+v)
		}
	}
	return append(env, "LC_ALL=C")
}
