package policy

import (
	"path/filepath"
	"sort"
	"strings"
)

// Local source prefixes: the image inputs read from the host's file system.
const (
	fileSourcePrefix   = "file:"
	layoutSourcePrefix = "oci-layout:"
)

// CompareImageInputs classifies the host files an image's inputs bring
// into the guest. old and new map recipe input keys ("base", "kernel",
// "artifact.NAME") to their sources as written, as state.ImageAttrs.Inputs
// records them; block names the image ("image.agent") for the changes'
// origin.
//
// A file: or oci-layout: input that is new, or that names another path
// than before, widens: the guest sees that host file (or that local OCI
// image) from then on, and a reviewer must see which. One that is removed,
// or replaced by a source of another kind, narrows. Inputs of other kinds
// (registries, npm, https, Debian) are not host files and are not listed.
// A path outside the configuration directory (absolute, or through "..",
// which the spec allows only for directories it lists in host_paths) is
// said to be so. A change of a file's content under the same path is not
// a policy change: it replaces the image (its input hash changes) and is
// reviewed as a change of that file.
//
// The result is sorted by input key, with Kind "image.input".
func CompareImageInputs(old, new map[string]string, block string) []Change {
	var cs []Change
	for k, src := range new {
		path, kind, ok := localSource(src)
		if !ok || old[k] == src {
			continue
		}
		op := RuleAdded
		if _, had := old[k]; had {
			op = RuleModified
		}
		detail := "guest sees host " + kind + " " + path
		if outsideConfigDir(path) {
			detail += ", outside the configuration directory"
		}
		cs = append(cs, Change{Direction: Widen, Op: op, Kind: "image.input", Subject: k,
			Detail: detail + " (" + k + ")", Origin: Origin{Block: block}})
	}
	for k, src := range old {
		path, kind, ok := localSource(src)
		if !ok {
			continue
		}
		if n, kept := new[k]; kept {
			if _, _, local := localSource(n); local {
				continue // listed above when it changed
			}
		}
		cs = append(cs, Change{Direction: Narrow, Op: RuleRemoved, Kind: "image.input", Subject: k,
			Detail: "guest no longer sees host " + kind + " " + path + " (" + k + ")", Origin: Origin{Block: block}})
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].Subject != cs[j].Subject {
			return cs[i].Subject < cs[j].Subject
		}
		return cs[i].Direction < cs[j].Direction
	})
	return cs
}

// localSource returns the path a file: or oci-layout: source names and
// what it is ("file", "OCI layout"); ok is false for other sources.
func localSource(src string) (path, kind string, ok bool) {
	if p, ok := strings.CutPrefix(src, fileSourcePrefix); ok {
		return p, "file", true
	}
	if p, ok := strings.CutPrefix(src, layoutSourcePrefix); ok {
		return p, "OCI layout", true
	}
	return "", "", false
}

// outsideConfigDir reports whether a local source's path, as written,
// leaves the configuration directory.
func outsideConfigDir(p string) bool {
	c := filepath.Clean(p)
	return filepath.IsAbs(c) || c == ".." || strings.HasPrefix(c, "../")
}
