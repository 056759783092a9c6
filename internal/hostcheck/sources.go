package hostcheck

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/sbx-dev/sbx/internal/build/debrepo"
	"github.com/sbx-dev/sbx/lang"
)

// toolTimeout bounds each local program a check runs.
const toolTimeout = 20 * time.Second

// runTool runs a program found in opts' PATH with opts' environment and
// returns its standard output.
func runTool(ctx context.Context, opts *Options, dir, bin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, toolTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = opts.Environ
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("`%s %s` failed: %v: %s", bin, strings.Join(args, " "), err, firstLine(stderr.String()))
	}
	return string(out), nil
}

// checkApt checks what deb: sources need: apt-get and apt-cache, package
// indexes from at least one source, and, for the packages of images of
// the host's architecture, that apt offers them (and the version the
// spec names, if it names one) — deb: sources and the package sets that
// come from the host's apt sources (hostAptPackages) alike.
func checkApt(ctx context.Context, opts *Options, pm PackageManager) Result {
	r := Result{Name: "apt"}
	path := opts.getenv("PATH")
	var missing []string
	aptCache := ""
	for _, tool := range []string{"apt-get", "apt-cache"} {
		p, ok := lookPath(tool, path)
		if !ok {
			missing = append(missing, tool)
		} else if tool == "apt-cache" {
			aptCache = p
		}
	}
	if len(missing) > 0 {
		r.Status = Fail
		r.Detail = fmt.Sprintf("deb: sources need %s, not found in PATH (%s)", strings.Join(missing, " and "), displayPath(path))
		if pm == Apt {
			r.Fix = sudo() + "apt-get install apt"
		} else {
			r.Fix = "deb: sources are fetched with apt from its configured Debian sources: run sbx on a Debian or Ubuntu host (or container) for them"
		}
		return r
	}
	out, err := runTool(ctx, opts, "", aptCache, "policy")
	if err != nil {
		r.Status = Fail
		r.Detail = err.Error()
		r.Fix = sudo() + "apt-get update"
		return r
	}
	if n := aptSources(out); n == 0 {
		r.Status = Fail
		r.Detail = "apt has no package indexes (apt-cache policy lists only the installed packages), so deb: sources cannot be found"
		r.Fix = sudo() + "apt-get update"
		return r
	}

	// The packages apt is asked for on this host: those of images of the
	// host's architecture (others need a foreign architecture added).
	want := map[string][]string{} // package → exact versions the spec names ("" for none)
	for _, s := range sources(opts.Config) {
		if s.src.Kind != lang.SourceDeb || s.platform.Architecture != runtime.GOARCH || s.src.Ref == "" {
			continue
		}
		// Only an exact version is looked for here; relations are
		// matched against what apt offers by sbx lock.
		exact := ""
		if rels := s.src.DebRelations(); len(rels) == 1 && rels[0].Op == "=" {
			exact = rels[0].Version
		}
		if !slices.Contains(want[s.src.Ref], exact) {
			want[s.src.Ref] = append(want[s.src.Ref], exact)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(opts.Config.Images)) {
		img := opts.Config.Images[name]
		if !hostAptPackages(img) {
			continue
		}
		for _, raw := range img.Packages.Requests {
			req, err := debrepo.ParseRequest(raw)
			if err != nil {
				continue // the lock reports it, with its position
			}
			exact := ""
			if req.Relation != nil && req.Relation.Operator == "=" {
				exact = req.Relation.Number
			}
			if !slices.Contains(want[req.Name], exact) {
				want[req.Name] = append(want[req.Name], exact)
			}
		}
	}
	if len(want) == 0 {
		r.Status = OK
		r.Detail = "apt-get and apt-cache found; apt has package indexes"
		return r
	}
	names := slices.Sorted(maps.Keys(want))
	out, err = runTool(ctx, opts, "", aptCache, append([]string{"policy"}, names...)...)
	if err != nil {
		r.Status = Fail
		r.Detail = err.Error()
		r.Fix = sudo() + "apt-get update"
		return r
	}
	known := parsePolicy(out)
	var problems []string
	for _, n := range names {
		p, ok := known[n]
		if !ok || p.candidate == "" {
			problems = append(problems, fmt.Sprintf("apt knows no package %s", n))
			continue
		}
		for _, v := range want[n] {
			if v != "" && !slices.Contains(p.versions, v) {
				problems = append(problems, fmt.Sprintf("apt offers %s %s, not %s", n, strings.Join(p.versions, ", "), v))
			}
		}
	}
	if len(problems) > 0 {
		r.Status = Fail
		r.Detail = strings.Join(problems, "; ")
		r.Fix = sudo() + "apt-get update; if a version is still missing, the mirrors dropped it: change it in the spec to one apt-cache policy PACKAGE shows"
		return r
	}
	r.Status = OK
	r.Detail = fmt.Sprintf("apt-get and apt-cache found; apt offers the %s the configuration names", count(len(names), "package"))
	return r
}

// hostAptPackages reports whether img's package set comes from the
// host's apt sources and is checked with apt-cache here: an image of the
// host's architecture with packages, no repositories of its own and no
// base image (whose own repositories an Alpine base would use instead).
func hostAptPackages(img *lang.Image) bool {
	return len(img.Packages.Requests) > 0 && len(img.Packages.Repositories) == 0 &&
		img.Base == nil && img.Platform.Architecture == runtime.GOARCH
}

// aptSources counts the package files of "apt-cache policy" beyond dpkg's
// status file: lines " PRIORITY LOCATION" under "Package files:".
func aptSources(out string) int {
	n := 0
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) >= 2 && isDigits(f[0]) && !strings.HasSuffix(f[1], "/dpkg/status") {
			n++
		}
	}
	return n
}

type aptPolicy struct {
	candidate string
	versions  []string
}

// parsePolicy reads "apt-cache policy NAME..." output: for each package,
// its candidate and the versions of its version table.
func parsePolicy(out string) map[string]aptPolicy {
	res := map[string]aptPolicy{}
	cur := ""
	inTable := false
	for line := range strings.Lines(out) {
		line = strings.TrimRight(line, "\n")
		trimmed := strings.TrimSpace(line)
		indent := len(line) - len(strings.TrimLeft(line, " "))
		switch {
		case trimmed == "":
		case indent == 0 && strings.HasSuffix(trimmed, ":"):
			cur = strings.TrimSuffix(trimmed, ":")
			res[cur] = aptPolicy{}
			inTable = false
		case cur == "":
		case strings.HasPrefix(trimmed, "Candidate:"):
			p := res[cur]
			if c := strings.TrimSpace(strings.TrimPrefix(trimmed, "Candidate:")); c != "(none)" {
				p.candidate = c
			}
			res[cur] = p
		case trimmed == "Version table:":
			inTable = true
		case inTable && indent < 8:
			f := strings.Fields(strings.TrimPrefix(trimmed, "*** "))
			if len(f) > 0 {
				p := res[cur]
				p.versions = append(p.versions, f[0])
				res[cur] = p
			}
		}
	}
	return res
}

func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// checkNPM checks what npm: sources need when no .npmrc or NPM_CONFIG_
// variable names a registry: npm itself, whose "npm config get registry"
// sbx asks, as package npmreg does, in the user's home directory (else
// "/"): not in the configuration's directory, whose .npmrc is a
// checkout's file that npm would read with none of sbx's rules.
func checkNPM(ctx context.Context, opts *Options, pm PackageManager) Result {
	r := Result{Name: "npm"}
	path := opts.getenv("PATH")
	bin, ok := lookPath("npm", path)
	if !ok {
		r.Status = Warn
		r.Detail = fmt.Sprintf("npm not found in PATH (%s): npm: sources then need a registry named by NPM_CONFIG_REGISTRY or registry= in an .npmrc, as sbx asks npm only for its default", displayPath(path))
		if c, ok := pm.install("npm"); ok {
			r.Fix = c
		} else {
			r.Fix = "install npm, or set NPM_CONFIG_REGISTRY to the registry's URL"
		}
		return r
	}
	dir := "/"
	if home := opts.getenv("HOME"); filepath.IsAbs(home) {
		dir = home
	}
	out, err := runTool(ctx, opts, dir, bin, "config", "get", "registry")
	if err != nil {
		r.Status = Fail
		r.Detail = err.Error()
		r.Fix = "npm config set registry URL (the registry npm: sources are fetched from)"
		return r
	}
	reg := strings.TrimSpace(out)
	u, err := url.Parse(reg)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		r.Status = Fail
		r.Detail = fmt.Sprintf("`npm config get registry` printed %q, not a registry URL", firstLine(reg))
		r.Fix = "npm config set registry URL (the registry npm: sources are fetched from)"
		return r
	}
	u.User = nil // never show credentials
	r.Status = OK
	r.Detail = fmt.Sprintf("%s found; npm's registry is %s (not contacted)", bin, u.Redacted())
	return r
}

// checkOCI resolves the credentials for every registry the
// configuration's OCI references name, with the keychain sbx pulls with:
// a credential helper that is missing or fails is found here rather than
// in the middle of a lock. No registry is contacted.
func checkOCI(ctx context.Context, opts *Options) Result {
	r := Result{Name: "oci"}
	kc := opts.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	regs := map[string]bool{}
	for _, s := range sources(opts.Config) {
		if s.src.Kind != lang.SourceOCI {
			continue
		}
		ref, err := name.ParseReference(s.src.Ref)
		if err != nil {
			continue // lang reports it
		}
		regs[ref.Context().RegistryStr()] = true
	}
	var anon, creds, problems []string
	for _, reg := range slices.Sorted(maps.Keys(regs)) {
		res, err := name.NewRegistry(reg)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", reg, err))
			continue
		}
		a, err := authn.Resolve(ctx, kc, res)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s: %v", reg, err))
		case a == authn.Anonymous:
			anon = append(anon, reg)
		default:
			creds = append(creds, reg)
		}
	}
	if len(problems) > 0 {
		r.Status = Fail
		r.Detail = "looking up registry credentials failed: " + strings.Join(problems, "; ")
		r.Fix = "install the credential helper the docker config (~/.docker/config.json, $DOCKER_CONFIG) names in credsStore or credHelpers, or remove it from there"
		return r
	}
	var parts []string
	if len(creds) > 0 {
		parts = append(parts, "credentials for "+strings.Join(creds, ", "))
	}
	if len(anon) > 0 {
		parts = append(parts, "anonymous pulls from "+strings.Join(anon, ", "))
	}
	r.Status = OK
	r.Detail = strings.Join(parts, "; ") + " (registries not contacted)"
	return r
}
