// Package match is the one pattern language of sbx: the request path and
// git ref patterns of egress request rules, and the hide, readonly and
// tmpfs patterns of mounts. Package lang validates a spec with it, and
// every enforcer and classifier matches with it: the egress engine
// (request paths), its git push check (refs), the file server (mount
// rules), plan's mount effects and fanout's tree copy and compare. So
// what validation accepts is exactly what enforcement compiles, and a
// path is judged the same way everywhere.
//
// A pattern is compiled once (CompilePath, CompileRef, CompileMount,
// CompileMountRules); the error names the pattern and what is wrong with
// it. Compiled values are immutable and safe for concurrent use.
//
// # Request path patterns (egress request "paths")
//
// A pattern starts with "/" and matches the whole path of a request,
// without its query, one segment (the text between slashes) at a time.
// "*" stands for any run of characters within a segment; a segment that
// is exactly "**" stands for any number of segments, none included
// ("/v1/**" matches "/v1", "/v1/" and "/v1/a/b"). Characters are written
// as they are, not percent-escaped: requests are matched after each of
// their segments is decoded. Refused: "." and ".." segments, empty
// segments other than a trailing one ("/a//b"; request paths holding
// "//" are refused under path rules, so such a pattern could never
// match), "**" inside a longer segment, "?", "#", "%", "\", white space
// and control characters. A pattern holding ";" or a Unicode look-alike
// of a separator compiles but matches nothing (Path.MatchesNothing).
//
// A request path is matched only when CheckRequestPath accepts it: a path
// that could mean something else to some server than its plain segments
// (dot segments, plain or encoded; "//"; ";"; "\"; "%25"; control bytes;
// invalid escapes; overlong UTF-8; Unicode look-alikes) never matches
// under a path rule. A path holding an encoded "/" matches only when it
// matches both with and without that "/" decoded.
//
// # Git ref patterns (egress request "git_push")
//
// A full ref name under "refs/" ("refs/heads/agent/*"), matched component
// by component with the same "*" and "**" as path patterns. Otherwise
// only what git accepts in a ref name (git check-ref-format): no "..",
// "@{", "~", "^", ":", "?", "[", "\", white space, control characters, no
// component starting with "." or ending in ".lock", no trailing "." or
// "/", and at least three components unless one is "**".
//
// # Mount rule patterns (vfs mount "hide", "readonly", "tmpfs")
//
// Paths are relative to the mount's root. Patterns follow gitignore: a
// pattern with no slash but a trailing one matches a name at any depth
// ("*.pem", ".env", "secrets/"); one with a slash elsewhere is anchored
// at the root (".git/config", "docs/*.md"); "*", "?" and "[...]" match
// within one name (path.Match syntax, "\" escaping); a "**" name matches
// any number of names ("**/*.pem", "build/**"; a trailing "/**" matches
// what is inside, not the directory itself). A rule that matches a
// directory applies to everything under it. Unlike gitignore, a trailing
// slash does not limit a pattern to directories: "secrets/" also matches
// a file named secrets, the safe reading for hide and readonly. Refused:
// an empty pattern, "/", negation ("!x"), an absolute pattern, a NUL
// byte, an empty, "." or ".." name ("a//b", "./secrets", "x/../y"), and a
// name path.Match cannot parse ("[a"). When rules overlap the most
// restrictive wins: hidden, read-only, tmpfs, plain (MountRules.Classify).
//
// This package does not serve files, proxy requests or parse git's wire
// format: internal/vfs, internal/egress and internal/egress/gitpush do,
// with these matchers. It imports nothing of sbx but the standard
// library, so it builds everywhere and outside programs may use it.
package match
