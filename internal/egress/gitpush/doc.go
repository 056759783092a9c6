// Package gitpush reads the ref-update commands at the start of a git
// smart-HTTP push (a git-receive-pack request body) so that the egress
// proxy can refuse a push touching refs outside a rule's patterns before
// any of it reaches the upstream, and writes the receive-pack response
// that makes the git client print why.
//
// It parses only the pkt-line command list, bounded by a byte limit; it
// does not read the pack that follows, talk to the upstream or decide
// which patterns apply (the egress policy does). ParseCommands reads the
// body as the server will: a caller that forwards a body with a
// Content-Encoding (git gzips some requests) must decode it first and
// forward the decoded bytes, or refuse it, so that what was checked is
// what the upstream sees.
//
// IsReceivePack says which requests are to be read as pushes; it errs
// wide (any method but GET and HEAD, in any case; git-receive-pack
// anywhere in the path or query, however encoded), since a push it
// missed would reach the server unchecked.
package gitpush
