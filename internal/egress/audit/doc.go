// Package audit holds a sandbox's egress audit log: one JSON object per
// line in egress.jsonl in the supervisor's directory, one Entry per
// decision the egress proxy takes (allowed requests and connections with
// their bytes and status, refusals with their reason and the spec rule).
//
// Writer appends without ever blocking the proxy for long: entries go
// through a bounded queue, and what does not fit is counted and reported
// by a summary entry. The file is rotated to egress.jsonl.1 past a size
// bound, so a guest that floods connections cannot fill the host's disk.
// Tail, Follow and Format serve `sbx logs -egress`.
//
// Entries carry secret names, never values: callers must not put a
// secret's value in any field, and Format escapes every string for a
// terminal because names and paths come from the guest.
package audit
