package plan

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sbx-dev/sbx/internal/termtext"
	"github.com/sbx-dev/sbx/lang"
	"github.com/sbx-dev/sbx/policy"
)

// MountReport is what one mount shows a guest of its host directory, as
// the directory is when the plan is made: the files each hide rule keeps
// out of sight, and the files that look like secrets which no rule hides.
// It is not a change: the host directory is live, so these lists follow
// the checkout, not the configuration.
//
// Paths are relative to the mount's root, slash-separated, a directory's
// with a trailing "/", and escaped as termtext.Line escapes them, so that
// a file name can neither drive a terminal nor pass for a line of the
// plan, in the text form or printed from the JSON one. File contents are
// never shown.
type MountReport struct {
	Guest string `json:"guest"`
	// Host is the host directory as the spec names it.
	Host   string        `json:"host"`
	Origin policy.Origin `json:"origin"`
	// Sandboxes are the addresses of the sandboxes that have this mount.
	Sandboxes []string `json:"sandboxes"`
	// Outside is set when the spec names a host directory outside the
	// configuration directory (an absolute path, or one starting with
	// ".."): the plan inspects it because the spec asks for it by name.
	Outside bool `json:"outside,omitempty"`
	// Problem says why the host directory was not inspected (it does not
	// exist, is not a directory, or leads out of the configuration
	// directory through a symbolic link); the lists are then empty.
	Problem string `json:"problem,omitempty"`
	// Entries is how many directory entries the walk looked at.
	Entries int `json:"entries"`
	// Truncated says why the walk stopped before the end of the tree
	// (InspectOptions bounds it); what lies beyond was not checked.
	Truncated string `json:"truncated,omitempty"`
	// Hide has one entry per hide rule of the mount, in its order.
	Hide []HiddenPaths `json:"hide"`
	// Secrets are the visible files that look like secrets, at most
	// InspectOptions.MaxSecrets of them, and SecretsMore how many others.
	Secrets     []SecretFile `json:"secrets"`
	SecretsMore int          `json:"secrets_more,omitempty"`
}

// HiddenPaths are the existing host paths one hide rule hides: at most
// InspectOptions.MaxShown, sorted, and More how many others. A hidden
// directory is one path; what it holds is not walked.
type HiddenPaths struct {
	Pattern string   `json:"pattern"`
	Paths   []string `json:"paths"`
	More    int      `json:"more,omitempty"`
}

// SecretFile is a visible file that looks like a secret, and what it
// looks like ("an environment file", "an SSH private key", …).
type SecretFile struct {
	Path string `json:"path"`
	Kind string `json:"kind"`
}

// InspectOptions bound InspectMounts. Zero values take the defaults.
type InspectOptions struct {
	// MaxEntries is the number of directory entries one mount's walk
	// looks at before it stops (default 50,000).
	MaxEntries int
	// Timeout is how long one mount's walk may take (default 5s).
	Timeout time.Duration
	// MaxShown is how many paths are listed per hide rule (default 10);
	// the rest are counted.
	MaxShown int
	// MaxSecrets is how many secret-looking files are listed per mount
	// (default 50); the rest are counted.
	MaxSecrets int
	// Outside walks a host directory the spec names outside the
	// configuration directory (absolute, or starting with ".."). Unset,
	// such a mount is reported without reading the directory: a checkout
	// under review could name any directory (/root, ~/.ssh) and have its
	// file names printed into the plan. Set it only for a configuration
	// the user runs as trusted (apply).
	Outside bool
}

// Defaults of InspectOptions.
const (
	DefaultInspectEntries = 50_000
	DefaultInspectTimeout = 5 * time.Second
	DefaultInspectShown   = 10
	DefaultInspectSecrets = 50
)

func (o InspectOptions) withDefaults() InspectOptions {
	if o.MaxEntries <= 0 {
		o.MaxEntries = DefaultInspectEntries
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultInspectTimeout
	}
	if o.MaxShown <= 0 {
		o.MaxShown = DefaultInspectShown
	}
	if o.MaxSecrets <= 0 {
		o.MaxSecrets = DefaultInspectSecrets
	}
	return o
}

// InspectMounts reports, for every mount of every sandbox of cfg (a mount
// that several sandboxes share is reported once), the host files its hide
// rules hide and the visible files that look like secrets. The plan runs
// on untrusted checkouts, so:
//
//   - A host directory inside the configuration directory is opened
//     through an os.Root of that directory: one that leads out of it
//     through a symbolic link is not inspected, and the report says so.
//     One the spec names outside (absolute, or starting with "..") is
//     not read at all unless opts.Outside is set: the report shows the
//     mount and says why it was not inspected. With opts.Outside it is
//     inspected, since the spec asks for that directory by name.
//   - The walk never follows a symbolic link (a link is an entry like any
//     other, matched by its own name), never leaves the host directory,
//     and stops after opts.MaxEntries entries or opts.Timeout, saying so.
//     Hidden paths and tmpfs paths are not walked into: the guest sees
//     nothing of the host there.
//   - Files are opened without waiting (a named pipe cannot block the
//     plan), only when regular, and only to look for a private key header
//     or credentials in a git remote URL; nothing read is kept or shown.
//
// Rules are matched by package vfs, the file server's own matcher, so the
// plan shows what the server will hide. What looks like a secret:
// ".env*", "*.pem", "id_*" private keys (not "*.pub"), ".npmrc",
// ".netrc", a ".git/config" with credentials in a URL, and cloud
// credential files (".aws/credentials", ".config/gcloud/", ".azure/",
// ".docker/config.json", ".kube/config"), at any depth. Only regular files
// (and those two directories) count: a symbolic link shows the guest only
// what it leads to inside the mount, which is checked under its own name.
//
// The result is sorted by guest path, then block. Problems are reported
// in it, never returned: a plan is still made.
func InspectMounts(ctx context.Context, cfg *lang.Config, opts InspectOptions) []MountReport {
	if cfg == nil {
		return nil
	}
	opts = opts.withDefaults()
	type entry struct {
		m         policy.Mount
		sandboxes []string
	}
	byKey := map[string]*entry{}
	for _, name := range sortedNames(cfg.Sandboxes) {
		sb := cfg.Sandboxes[name]
		for _, m := range sb.Policy.Mounts {
			key := m.Origin.Block + "\x00" + m.Guest
			e := byKey[key]
			if e == nil {
				e = &entry{m: m}
				byKey[key] = e
			}
			e.sandboxes = append(e.sandboxes, sb.Addr().String())
		}
	}
	var out []MountReport
	for _, e := range byKey {
		r := inspectMount(ctx, cfg.Dir, e.m, opts)
		r.Sandboxes = e.sandboxes
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Guest != out[j].Guest {
			return out[i].Guest < out[j].Guest
		}
		return out[i].Origin.Block < out[j].Origin.Block
	})
	return out
}

func inspectMount(ctx context.Context, configDir string, m policy.Mount, opts InspectOptions) MountReport {
	r := MountReport{Guest: m.Guest, Host: m.Host, Origin: m.Origin, Hide: []HiddenPaths{}, Secrets: []SecretFile{}}
	for _, p := range m.Hide {
		r.Hide = append(r.Hide, HiddenPaths{Pattern: p, Paths: []string{}})
	}
	rules, err := compileRules(m)
	if err == nil {
		_, err = secretMatcher()
	}
	if err != nil {
		r.Problem = fmt.Sprintf("not inspected: %v", err)
		return r
	}
	r.Outside = filepath.IsAbs(m.Host) || m.Host == ".." || strings.HasPrefix(m.Host, ".."+string(filepath.Separator))
	if r.Outside && !opts.Outside {
		r.Problem = OutsideNotInspected
		return r
	}
	root, problem := openHostDir(configDir, m.Host, r.Outside)
	if root == nil {
		r.Problem = problem
		return r
	}
	defer root.Close()

	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	w := &walker{ctx: ctx, root: root, rules: rules, max: opts.MaxEntries, timeout: opts.Timeout, hidden: map[string][]string{}}
	w.walk()
	r.Entries, r.Truncated = w.n, w.stopped
	for i := range r.Hide {
		paths := w.hidden[r.Hide[i].Pattern]
		sort.Strings(paths)
		r.Hide[i].Paths, r.Hide[i].More = firstN(paths, opts.MaxShown)
	}
	sort.Slice(w.secrets, func(i, j int) bool { return w.secrets[i].Path < w.secrets[j].Path })
	if len(w.secrets) > opts.MaxSecrets {
		r.Secrets, r.SecretsMore = w.secrets[:opts.MaxSecrets], len(w.secrets)-opts.MaxSecrets
	} else {
		r.Secrets = append(r.Secrets, w.secrets...)
	}
	return r
}

// OutsideNotInspected is the Problem of a mount whose host directory is
// outside the configuration directory when InspectOptions.Outside is
// unset.
const OutsideNotInspected = "not inspected: the host directory is outside the configuration directory, and plan reads nothing outside it (a checkout could name any directory and have its file names printed); sbx apply inspects it"

func firstN(paths []string, n int) ([]string, int) {
	if len(paths) > n {
		return paths[:n], len(paths) - n
	}
	return append([]string{}, paths...), 0
}

// openHostDir opens a mount's host directory for the walk, or says why
// it is not inspected.
func openHostDir(configDir, host string, outside bool) (*os.Root, string) {
	describe := func(err error) string {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return fmt.Sprintf("host directory %q does not exist", host)
		case err != nil && strings.Contains(err.Error(), "path escapes from parent"):
			// os.Root's error for a path that resolves out of it; it
			// has no exported sentinel. The link's target is not named:
			// on CI it would be the runner's file system.
			return fmt.Sprintf("host directory %q leads outside the configuration directory through a symbolic link, so it was not inspected; if that is meant, name the directory it leads to in the spec", host)
		case err != nil:
			return fmt.Sprintf("host directory %q cannot be opened: %v", host, err)
		}
		return fmt.Sprintf("host %q is not a directory", host)
	}
	if outside {
		dir := host
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(configDir, host)
		}
		// Opened as a directory first, without waiting: os.OpenRoot on
		// a named pipe would block.
		f, err := os.OpenFile(dir, dirFlags, 0)
		if err != nil {
			return nil, describeNotDir(err, describe)
		}
		f.Close()
		root, err := os.OpenRoot(dir)
		if err != nil {
			return nil, describe(err)
		}
		return root, ""
	}
	cfgRoot, err := os.OpenRoot(configDir)
	if err != nil {
		return nil, fmt.Sprintf("the configuration directory cannot be opened: %v", err)
	}
	defer cfgRoot.Close()
	f, err := cfgRoot.OpenFile(host, dirFlags, 0)
	if err != nil {
		return nil, describeNotDir(err, describe)
	}
	f.Close()
	root, err := cfgRoot.OpenRoot(host)
	if err != nil {
		return nil, describe(err)
	}
	return root, ""
}

func describeNotDir(err error, describe func(error) string) string {
	if errors.Is(err, syscall.ENOTDIR) {
		return describe(nil)
	}
	return describe(err)
}

// pathClass is what a mount's rules make of a path, as far as the plan
// is concerned.
type pathClass int

const (
	classVisible pathClass = iota // plain or read-only: the guest sees the host's file
	classHidden
	classTmpfs // the guest sees private scratch space, none of the host
)

// pathRules are a mount's compiled rules (policy/match's, compileRules).
type pathRules interface {
	class(rel string) pathClass
	// hiddenBy returns the hide patterns matching rel itself.
	hiddenBy(rel string) []string
}

// walker walks one mount's host directory breadth first, so that when a
// bound stops it the shallow paths, where credentials usually sit, have
// been seen.
type walker struct {
	ctx     context.Context
	root    *os.Root
	rules   pathRules
	max     int
	timeout time.Duration

	n       int
	stopped string
	hidden  map[string][]string // hide pattern -> displayed paths
	secrets []SecretFile
}

type walkDir struct {
	rel string
	// inSecret is set under a directory already reported as looking
	// like a secret, so that its files are not reported one by one.
	inSecret bool
}

// walk goes through the tree until it ends or a bound stops it; the
// entries already read when that happens are still classified, since
// they cost nothing more to report.
func (w *walker) walk() {
	queue := []walkDir{{}}
	for len(queue) > 0 && w.stopped == "" {
		d := queue[0]
		queue = queue[1:]
		entries := w.readDir(d.rel)
		for _, e := range entries {
			rel := e.Name()
			if d.rel != "" {
				rel = d.rel + "/" + rel
			}
			isDir := e.Type().IsDir() // never a link: Type does not follow one
			switch w.rules.class(rel) {
			case classHidden:
				for _, p := range w.rules.hiddenBy(rel) {
					w.hidden[p] = append(w.hidden[p], display(rel, isDir))
				}
				continue
			case classTmpfs:
				// The guest gets empty scratch space here.
				continue
			}
			inSecret := d.inSecret
			if !inSecret {
				if kind := w.secretKind(rel, e); kind != "" {
					w.secrets = append(w.secrets, SecretFile{Path: display(rel, isDir), Kind: kind})
					inSecret = isDir
				}
			}
			if isDir && w.stopped == "" {
				queue = append(queue, walkDir{rel: rel, inSecret: inSecret})
			}
		}
	}
}

// readDir reads the directory rel, counting its entries against the
// bound, and returns them sorted by name.
func (w *walker) readDir(rel string) []fs.DirEntry {
	name := rel
	if name == "" {
		name = "."
	}
	f, err := w.root.OpenFile(name, dirFlags, 0)
	if err != nil {
		// Gone or replaced since it was listed: nothing to report in it.
		return nil
	}
	defer f.Close()
	var out []fs.DirEntry
	for {
		if w.expired() {
			break
		}
		batch := min(256, w.max-w.n)
		if batch <= 0 {
			w.stopped = fmt.Sprintf("the walk stopped after %d entries, its limit", w.max)
			break
		}
		es, err := f.ReadDir(batch)
		w.n += len(es)
		out = append(out, es...)
		if err != nil || len(es) == 0 {
			break
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

func (w *walker) expired() bool {
	if w.ctx.Err() == nil {
		return false
	}
	if w.stopped == "" {
		w.stopped = fmt.Sprintf("the walk stopped after %v, its time limit", w.timeout)
	}
	return true
}

func display(rel string, isDir bool) string {
	s := termtext.Line(rel)
	if isDir {
		s += "/"
	}
	return s
}

// secretLook is one kind of file that looks like a secret: the pattern
// (in the hide rules' language) its path matches, whether it is a
// directory or a file, and for some a test of the file's first bytes.
type secretLook struct {
	pattern string
	dir     bool
	kind    string
	check   func(w *walker, rel string, e fs.DirEntry) bool
}

var secretLooks = []secretLook{
	{pattern: ".env*", kind: "an environment file"},
	{pattern: "*.pem", kind: "a PEM file (a key or a certificate)"},
	{pattern: "id_*", kind: "an SSH private key", check: (*walker).isPrivateKey},
	{pattern: ".npmrc", kind: "an npm configuration (registry tokens)"},
	{pattern: ".netrc", kind: "a netrc (login credentials)"},
	{pattern: "**/.git/config", kind: "a git configuration with credentials in a URL", check: (*walker).hasURLCredentials},
	{pattern: "**/.aws/credentials", kind: "AWS credentials"},
	{pattern: "**/.config/gcloud", dir: true, kind: "Google Cloud credentials"},
	{pattern: "**/.azure", dir: true, kind: "Azure credentials"},
	{pattern: "**/.docker/config.json", kind: "Docker registry credentials"},
	{pattern: "**/.kube/config", kind: "Kubernetes credentials"},
}

// secretMatcher compiles the patterns of secretLooks as the hide rules
// of a mount, once, so that the file server's matcher decides which
// paths they name.
var secretMatcher = sync.OnceValues(func() (pathRules, error) {
	m := policy.Mount{}
	for _, l := range secretLooks {
		m.Hide = append(m.Hide, l.pattern)
	}
	return compileRules(m)
})

// secretKind says what the entry rel looks like, or "".
func (w *walker) secretKind(rel string, e fs.DirEntry) string {
	secrets, _ := secretMatcher() // compiled before the walk began
	matched := secrets.hiddenBy(rel)
	if len(matched) == 0 {
		return ""
	}
	isDir := e.Type().IsDir()
	if !isDir && !e.Type().IsRegular() {
		// A link shows the guest nothing but what it leads to inside
		// the mount, which is checked under its own name; a pipe or a
		// device holds no stored secret.
		return ""
	}
	for _, l := range secretLooks {
		if l.dir != isDir || !contains(matched, l.pattern) {
			continue
		}
		if l.check != nil && !l.check(w, rel, e) {
			continue
		}
		return l.kind
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// sshKeyNames are the names ssh-keygen gives private keys; they count
// whatever they hold. Another id_* file counts when it starts like a
// private key, so that id_test.go is not one.
var sshKeyNames = map[string]bool{
	"id_rsa": true, "id_dsa": true, "id_ecdsa": true, "id_ed25519": true,
	"id_ecdsa_sk": true, "id_ed25519_sk": true, "id_xmss": true,
}

func (w *walker) isPrivateKey(rel string, e fs.DirEntry) bool {
	name := e.Name()
	if strings.HasSuffix(name, ".pub") {
		return false
	}
	if sshKeyNames[name] {
		return true
	}
	head := w.readHead(rel, e, 4096)
	return bytes.Contains(head, []byte("PRIVATE KEY-----"))
}

// urlCredentials matches a URL with a password ("scheme://user:pass@")
// or an http(s) URL with any user part ("https://token@"), the forms git
// remotes carry credentials in. ssh://git@host is neither.
var urlCredentials = regexp.MustCompile(`(?i)\bhttps?://[^\s/@]+@|\b[a-z][a-z0-9+.-]*://[^\s/@:]*:[^\s/@]+@`)

func (w *walker) hasURLCredentials(rel string, e fs.DirEntry) bool {
	return urlCredentials.Match(w.readHead(rel, e, 64<<10))
}

// readHead returns at most n bytes from the start of the regular file
// rel, or nothing if it is not one (a link, a pipe, a device) or changed
// since it was listed. The open does not wait and goes through the
// mount's root, so it cannot reach outside it.
func (w *walker) readHead(rel string, e fs.DirEntry, n int64) []byte {
	if !e.Type().IsRegular() || w.expired() {
		return nil
	}
	listed, err := e.Info()
	if err != nil {
		return nil
	}
	f, err := w.root.OpenFile(rel, readFlags, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || !os.SameFile(listed, st) {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(f, n))
	return b
}
