// Package bindings reads the user's bindings file, which says where this
// host reads the values of the secrets a configuration declares.
//
// A spec names what a sandbox needs (secret "openai": a credential for
// api.openai.com in $OPENAI_API_KEY); it is committed, and may arrive
// in someone else's pull request. Where the value comes from on the
// host is bound outside any repository, in a file of the user's own:
// $SBX_BINDINGS, else $XDG_CONFIG_HOME/sbx/bindings.hcl, else
// ~/.config/sbx/bindings.hcl (Path):
//
//	binding "openai" {
//	  source = "command:pass show openai"   # env:NAME, file:PATH or command:CMD
//	  config = "~/src/project"              # optional: only for configurations in this directory or below
//	}
//
// Load reads the file, refusing one another user could have written (a
// symbolic link, a file owned by someone else or writable by group or
// others, or one in a directory others may replace it in), with
// diagnostics at file:line for unknown attributes, bad sources, bad
// scopes and duplicate bindings. It reads no value and runs nothing.
//
// Choose applies the rule for one secret of a configuration: the most
// specific binding that covers the configuration's directory (a scoped
// one before an unscoped one) wins over the spec's own source; a spec's
// env: and file: sources are used when nothing binds the secret; a
// spec's command: source is never used, since running it would let a
// checkout run code on the host of whoever starts its sandboxes. A
// secret left without a source is an *UnboundError that says what to add
// to the bindings file. Package sandboxnet reads the chosen sources
// (ResolveSecrets, through package secretsrc); package plan shows them.
package bindings
