// Package policy holds the effective policy of one sandbox — which hosts it
// may reach, which credentials are brokered for it and what host files it
// sees — as plain data, and the pure functions over that data: host pattern
// matching, the request rules of an allow rule (methods are checked here;
// path and git ref patterns, like mount rule patterns, are the language
// of package policy/match, which lang validates with and the enforcers
// match with), which rule governs a host, canonical hashing, and
// classifying a change between two policies as widening or narrowing what
// the sandbox may do.
//
// Package lang builds a Sandbox policy from a configuration; package plan
// compares the desired policy with the last-applied one; the host-side
// enforcers (egress, vfs) evaluate it. Nothing here reads files, resolves
// secrets or touches the network.
package policy
