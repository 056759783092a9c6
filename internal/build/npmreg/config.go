package npmreg

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sbx-dev/sbx/internal/hostenv"
	"github.com/sbx-dev/sbx/lang"
)

// config is the part of npm's configuration that says where packages
// come from and how to authenticate: registries and per-registry
// credentials, layered the way npm layers them (environment over the
// project .npmrc over the user .npmrc).
type config struct {
	// values holds the merged keys. Registry-scoped keys keep npm's
	// "nerf dart" form, "//host/path/:_authToken".
	values map[string]string
	// origin says which file or variable each key came from, for messages.
	origin map[string]string
}

// ProjectEnvVar is the environment variable that names, separated by
// commas or spaces, the variables a project .npmrc may expand with
// ${NAME}. Unset, it may expand none.
const ProjectEnvVar = "SBX_NPMRC_ENV"

// loadConfig reads npm configuration from environ and the .npmrc files
// npm would read for a project in dir.
//
// The files are whose they are. The user's .npmrc (~/.npmrc, or the
// file npm_config_userconfig names) and the npm_config_* variables are
// the user's, read as npm reads them, ${VAR} references and all. The
// project .npmrc in dir comes with the checkout, which may be anybody's:
// it is read only through lang.ReadFile (inside dir, a regular file, no
// named pipe or device, size-capped), and it may expand only the
// variables ProjectEnvVar names. A reference to any other is an error
// naming the file, line and variable: the project chooses the registry,
// and a value expanded into its credentials would be sent there.
func loadConfig(dir string, environ []string) (*config, error) {
	env := hostenv.Map(environ)
	c := &config{values: map[string]string{}, origin: map[string]string{}}

	userrc := envLookupFold(env, "npm_config_userconfig")
	if userrc == "" && env["HOME"] != "" {
		userrc = filepath.Join(env["HOME"], ".npmrc")
	}
	if userrc != "" {
		b, err := os.ReadFile(userrc)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("npm config: %w", err)
		}
		if err == nil {
			if err := c.parse(userrc, b, userLookup(env)); err != nil {
				return nil, err
			}
		}
	}
	if dir != "" {
		b, err := lang.ReadFile(dir, ".npmrc")
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("npm config: %w", err)
		}
		if err == nil {
			if err := c.parse(filepath.Join(dir, ".npmrc"), b, projectLookup(env)); err != nil {
				return nil, err
			}
		}
	}
	// npm_config_foo_bar (any case) sets foo-bar; underscores after the
	// first character become dashes, as in npm.
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	// Sorted, so that of NPM_CONFIG_X and npm_config_x the lower-case one
	// wins every time.
	sort.Strings(keys)
	for _, k := range keys {
		v := env[k]
		if len(k) <= len("npm_config_") || !strings.EqualFold(k[:len("npm_config_")], "npm_config_") {
			continue
		}
		key := k[len("npm_config_"):]
		key = key[:1] + strings.ReplaceAll(key[1:], "_", "-")
		key = strings.ToLower(key)
		c.values[key] = v
		c.origin[key] = "environment variable " + k
	}
	return c, nil
}

// lookupFunc returns the value a ${NAME} reference expands to and whether
// it is set; an error refuses the reference.
type lookupFunc func(name string) (string, bool, error)

// userLookup expands any variable of env, as npm does in the user's
// own configuration.
func userLookup(env map[string]string) lookupFunc {
	return func(name string) (string, bool, error) {
		v, ok := env[name]
		return v, ok, nil
	}
}

// projectLookup expands only the variables env's ProjectEnvVar names.
func projectLookup(env map[string]string) lookupFunc {
	allowed := map[string]bool{}
	for _, n := range strings.FieldsFunc(env[ProjectEnvVar], func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
		allowed[n] = true
	}
	return func(name string) (string, bool, error) {
		if !allowed[name] {
			return "", false, fmt.Errorf("it refers to environment variable %s, which a project's .npmrc may use only when %s names it (the project chooses the registry its credentials go to); set %s=%s to allow it", name, ProjectEnvVar, ProjectEnvVar, name)
		}
		v, ok := env[name]
		return v, ok, nil
	}
}

// parse merges the bytes b of the .npmrc file path.
func (c *config) parse(path string, b []byte, lookup lookupFunc) error {
	sc := bufio.NewScanner(bytes.NewReader(b))
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' || text[0] == ';' || text[0] == '[' {
			continue
		}
		key, val, ok := strings.Cut(text, "=")
		if !ok {
			continue // npm treats a bare key as "true"; no key used here is boolean
		}
		key = strings.TrimSpace(key)
		val = strings.TrimSpace(val)
		if len(val) >= 2 && (val[0] == '"' && val[len(val)-1] == '"' || val[0] == '\'' && val[len(val)-1] == '\'') {
			val = val[1 : len(val)-1]
		}
		key, err := expandEnv(key, lookup)
		if err != nil {
			return fmt.Errorf("%s:%d: %w", path, line, err)
		}
		val, err = expandEnv(val, lookup)
		if err != nil {
			return fmt.Errorf("%s:%d: %w", path, line, err)
		}
		c.values[key] = val
		c.origin[key] = fmt.Sprintf("%s:%d", path, line)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// expandEnv replaces ${NAME} with the variable's value as npm does;
// ${NAME?} expands to "" when unset, and \${ is a literal "${". A plain
// ${NAME} that is unset is an error naming the variable, since the
// alternative is silently sending an empty token. So is a reference
// lookup refuses.
func expandEnv(s string, lookup lookupFunc) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		if i > 0 && s[i-1] == '\\' {
			b.WriteString(s[:i-1] + "${")
			s = s[i+2:]
			continue
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		name := s[i+2 : i+j]
		optional := strings.HasSuffix(name, "?")
		name = strings.TrimSuffix(name, "?")
		v, ok, err := lookup(name)
		if err != nil {
			return "", err
		}
		if !ok && !optional {
			return "", fmt.Errorf("environment variable %s is not set", name)
		}
		b.WriteString(s[:i] + v)
		s = s[i+j+1:]
	}
}

// registryFor returns the registry URL for a package name (with its
// trailing slash) and the key it came from; ok is false when nothing is
// configured.
func (c *config) registryFor(pkg string) (reg, key string, ok bool) {
	if strings.HasPrefix(pkg, "@") {
		scope, _, _ := strings.Cut(pkg, "/")
		if v := c.values[scope+":registry"]; v != "" {
			return withSlash(v), scope + ":registry", true
		}
	}
	if v := c.values["registry"]; v != "" {
		return withSlash(v), "registry", true
	}
	return "", "", false
}

func withSlash(s string) string {
	if strings.HasSuffix(s, "/") {
		return s
	}
	return s + "/"
}

// authHeader returns the Authorization header npm would send to u: the
// credentials under the longest "//host/path/" prefix of u that has any,
// as a bearer token (_authToken) or basic auth (_auth, or username and
// base64 _password).
func (c *config) authHeader(u *url.URL) (string, error) {
	key := "//" + u.Host + u.EscapedPath()
	if i := strings.LastIndexByte(key, '/'); i >= 1 {
		key = key[:i+1]
	}
	for len(key) > len("//") {
		if v := c.values[key+":_authToken"]; v != "" {
			return "Bearer " + v, nil
		}
		if v := c.values[key+":_auth"]; v != "" {
			return "Basic " + v, nil
		}
		if user := c.values[key+":username"]; user != "" {
			pw, err := base64.StdEncoding.DecodeString(c.values[key+":_password"])
			if err != nil {
				// Never quote the value: it is a secret.
				return "", fmt.Errorf("npm config %s: _password is not base64", c.origin[key+":_password"])
			}
			return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+string(pw))), nil
		}
		// Drop the last path segment: "//h/a/b/" → "//h/a/".
		trimmed := strings.TrimSuffix(key, "/")
		i := strings.LastIndexByte(trimmed, '/')
		if i < 2 {
			break
		}
		key = trimmed[:i+1]
	}
	return "", nil
}

// defaultRegistry asks the user's own npm for its registry, which is
// what npm falls back to when no configuration names one. The npm program
// is looked up on the PATH of environ and run in the user's home
// directory (else "/"), not in the project: npm would read the project's
// .npmrc itself, with none of loadConfig's rules.
func defaultRegistry(ctx context.Context, environ []string) (string, error) {
	hint := "set NPM_CONFIG_REGISTRY or add registry=URL to .npmrc"
	bin, err := lookPathIn("npm", hostenv.Get(environ, "PATH"))
	if err != nil {
		return "", fmt.Errorf("no npm registry is configured and npm is not installed to ask for its default: %s", hint)
	}
	cmd := exec.CommandContext(ctx, bin, "config", "get", "registry")
	cmd.Dir = "/"
	if home := hostenv.Get(environ, "HOME"); filepath.IsAbs(home) {
		cmd.Dir = home
	}
	cmd.Env = environ
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("no npm registry is configured and `npm config get registry` failed (%v: %s): %s",
			err, strings.TrimSpace(stderr.String()), hint)
	}
	reg := strings.TrimSpace(string(out))
	u, err := url.Parse(reg)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", fmt.Errorf("`npm config get registry` printed %q, not a registry URL: %s", reg, hint)
	}
	return withSlash(reg), nil
}

// lookPathIn finds an executable in a PATH-style list.
func lookPathIn(file, path string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, file)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in PATH", file)
}

// envLookupFold returns the value of the variable whose name equals name
// ignoring case, as npm reads npm_config_* variables.
func envLookupFold(env map[string]string, name string) string {
	found, val := "", ""
	for k, v := range env {
		// Prefer the name that sorts last (lower case) for a stable answer.
		if strings.EqualFold(k, name) && k > found {
			found, val = k, v
		}
	}
	return val
}
