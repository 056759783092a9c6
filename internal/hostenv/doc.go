// Package hostenv reads environment lists: the "KEY=value" entries of
// os.Environ, of an image's config, of an exec request, of the -e flags
// of sbx exec and sbx run. Every place that looks a variable up in such
// a list, turns one into a map, names its entries or checks -e flags
// does it here, so they agree on the rules:
//
//   - an entry's name is what precedes its first "=", its value what
//     follows; an entry without "=" is a bare name with no value;
//   - when a name appears more than once, the last entry wins (as for
//     execve and os.Getenv on a list with duplicates).
//
// It reads only the lists it is given, never the process's own
// environment (callers pass os.Environ() where they mean it), and it
// decides nothing about which variables may be set: package sandboxnet
// (forbid_env, secret placeholders) and package lang do.
//
// The entry points are Lookup and Get, Split and Name, Map, Parse and
// Merge.
package hostenv
