// Package diags holds the diagnostics every stage after the spec language
// returns: errors and warnings with a summary, a detail paragraph and,
// where one is known, the source range (an hcl.Range) they are about. It
// is modelled on Terraform's tfdiags: a stage returns Diagnostics next to
// its result, Append collects them from hcl.Diagnostics, other
// Diagnostics and plain errors, and the command line prints them once,
// with Render.
//
// An error raised far from the spec (a build step, an apply) keeps the
// range it is about by wrapping itself with WithSubject; its Error text
// stays "file:line: message", so code that only prints errors reads as
// before, while Append recovers the range for a snippet.
//
// Render is the one renderer: hcl's diagnostic text writer, the style
// the spec language's diagnostics have always had ("Error: summary",
// "on file line N:" with the source snippet, the detail). Package diags
// does not decide exit codes or colours; its callers pass them.
package diags
