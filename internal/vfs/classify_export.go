package vfs

// HiddenBy returns the hide patterns, as the mount lists them, that
// match rel itself (a slash-separated path relative to the mount's root,
// as Classify takes). A path under a hidden directory is hidden too
// (Classify says Hidden) without being listed here: this is for callers
// that walk a host tree from the top, stop at the first hidden name and
// say which rules hid it, as sbx plan does.
func (r *Rules) HiddenBy(rel string) []string {
	names := split(rel)
	var out []string
	for _, p := range r.hide {
		if len(names) > 0 && p.matchExact(names) {
			out = append(out, p.src)
		}
	}
	return out
}
