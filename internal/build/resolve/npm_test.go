package resolve

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/build/digest"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/lang"
)

var linuxAMD64 = lang.Platform{OS: "linux", Architecture: "amd64"}

// isolatedEnv is an environment with an empty home and no npm on PATH, so
// nothing of the machine's own npm configuration leaks into a test.
func isolatedEnv(t *testing.T, extra ...string) []string {
	t.Helper()
	return append([]string{"HOME=" + t.TempDir(), "PATH=" + t.TempDir()}, extra...)
}

func npmSource(spec string) *lang.Source {
	raw := strings.TrimPrefix(spec, "npm:")
	i := strings.LastIndex(raw, "@")
	name, version := raw, ""
	if i > 0 {
		name, version = raw[:i], raw[i+1:]
	}
	return &lang.Source{Kind: lang.SourceNPM, Raw: "npm:" + raw, Ref: name, Version: version}
}

func TestNPMExactScopedVersion(t *testing.T) {
	reg := newFakeNPM(t, "/npm/")
	reg.publish("@acme/tool", "1.2.3", &npmVersion{})
	reg.publish("@acme/tool", "1.2.4", &npmVersion{})
	want := reg.packages["@acme/tool"]["1.2.3"].tgz

	s := New(Options{Environ: isolatedEnv(t, "NPM_CONFIG_REGISTRY="+reg.registry()), HTTPClient: tlsClient(t, reg.srv)})
	src := npmSource("npm:@acme/tool@1.2.3")
	pin, err := s.Resolve(context.Background(), src, linuxAMD64)
	if err != nil {
		t.Fatal(err)
	}
	wantPin := lockfiles.Pin{Source: src.Raw, Kind: "npm", Version: "1.2.3", Integrity: sri512(want), SHA256: sha256Hex(want)}
	if *pin != wantPin {
		t.Fatalf("pin = %+v\nwant %+v", *pin, wantPin)
	}
	paths, _ := reg.log.snapshot()
	wantPaths := []string{"GET /npm/@acme%2ftool", "GET /npm/-/tarballs/@acme%2ftool/1.2.3.tgz"}
	if strings.Join(paths, "\n") != strings.Join(wantPaths, "\n") {
		t.Errorf("requests = %q, want %q", paths, wantPaths)
	}
	for _, f := range []string{pin.Digest, pin.Manifest, pin.Filename, pin.Version, pin.Integrity, pin.SHA256} {
		if strings.Contains(f, reg.host()) || strings.Contains(f, "tgz") {
			t.Errorf("pin records a location: %+v", *pin)
		}
	}
}

func TestNPMRangesAndTags(t *testing.T) {
	reg := newFakeNPM(t, "/")
	for _, v := range []string{"1.0.0", "1.2.0", "1.2.5", "1.3.0-beta.1", "2.0.0", "0.0.3", "0.2.9"} {
		reg.publish("tool", v, &npmVersion{})
	}
	reg.tags["tool"]["latest"] = "1.2.5"
	reg.tags["tool"]["next"] = "1.3.0-beta.1"
	s := New(Options{Environ: isolatedEnv(t, "npm_config_registry="+reg.registry()), HTTPClient: tlsClient(t, reg.srv)})

	for spec, want := range map[string]string{
		"1.2.0":          "1.2.0",
		"^1.0.0":         "1.2.5", // latest satisfies the range, so npm takes it
		"~1.2.0":         "1.2.5",
		">=1.3.0":        "2.0.0", // latest does not: the highest match
		"1.x":            "1.2.5",
		"2":              "2.0.0",
		"*":              "1.2.5",
		"":               "1.2.5",
		"latest":         "1.2.5",
		"next":           "1.3.0-beta.1",
		"^0.2.0":         "0.2.9",
		"^0.0.3":         "0.0.3",
		"<1.2.0 || >1.9": "2.0.0",
		"1.0.0 - 1.2.0":  "1.2.0",
		"^1.3.0-beta.0":  "1.3.0-beta.1",
	} {
		src := npmSource("npm:tool@" + spec)
		src.Version = spec
		pin, err := s.Resolve(context.Background(), src, linuxAMD64)
		if err != nil {
			t.Errorf("%q: %v", spec, err)
			continue
		}
		if pin.Version != want {
			t.Errorf("%q resolved to %s, want %s", spec, pin.Version, want)
		}
		if pin.SHA256 != sha256Hex(reg.packages["tool"][want].tgz) {
			t.Errorf("%q: sha256 %s is not that of %s", spec, pin.SHA256, want)
		}
	}
	for spec, msg := range map[string]string{
		"^3.0.0": "no version matches",
		"9.9.9":  "does not exist",
		"beta":   "neither a version, a range nor a dist-tag",
	} {
		src := npmSource("npm:tool@" + spec)
		_, err := s.Resolve(context.Background(), src, linuxAMD64)
		if err == nil || !strings.Contains(err.Error(), msg) || !strings.Contains(err.Error(), "npm:tool@"+spec) {
			t.Errorf("%q: err = %v, want one naming the source and saying %q", spec, err, msg)
		}
	}
	_, err := s.Resolve(context.Background(), npmSource("npm:missing@1.0.0"), linuxAMD64)
	if err == nil || !strings.Contains(err.Error(), "package not found") || !strings.Contains(err.Error(), "NPM_CONFIG_REGISTRY") && !strings.Contains(err.Error(), "npm_config_registry") {
		t.Errorf("missing package: err = %v", err)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestNPMConfigPrecedence(t *testing.T) {
	project, user, env, scoped := newFakeNPM(t, "/p/"), newFakeNPM(t, "/u/"), newFakeNPM(t, "/e/"), newFakeNPM(t, "/s/")
	for _, r := range []*fakeNPM{project, user, env, scoped} {
		r.publish("plain", "1.0.0", &npmVersion{})
		r.publish("@acme/tool", "1.0.0", &npmVersion{})
	}
	client := tlsClient(t, project.srv, user.srv, env.srv, scoped.srv)
	home := t.TempDir()
	dir := t.TempDir()
	writeFile(t, filepath.Join(home, ".npmrc"), "; user config\nregistry="+user.registry()+"\n@acme:registry = \""+scoped.registry()+"\"\n")

	cases := []struct {
		name       string
		projectRC  bool
		environ    []string
		pkg        string
		wantServer *fakeNPM
	}{
		{"user config", false, nil, "plain", user},
		{"project over user", true, nil, "plain", project},
		{"environment over project", true, []string{"NPM_CONFIG_REGISTRY=" + env.registry()}, "plain", env},
		{"scope registry", true, []string{"NPM_CONFIG_REGISTRY=" + env.registry()}, "@acme/tool", scoped},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			os.Remove(filepath.Join(dir, ".npmrc"))
			if c.projectRC {
				writeFile(t, filepath.Join(dir, ".npmrc"), "registry="+project.registry()+"\n")
			}
			before := map[*fakeNPM]int{}
			for _, r := range []*fakeNPM{project, user, env, scoped} {
				before[r] = r.log.count()
			}
			environ := append([]string{"HOME=" + home, "PATH=" + t.TempDir()}, c.environ...)
			s := New(Options{Dir: dir, Environ: environ, HTTPClient: client})
			pin, err := s.Resolve(context.Background(), npmSource("npm:"+c.pkg+"@1.0.0"), linuxAMD64)
			if err != nil {
				t.Fatal(err)
			}
			if pin.SHA256 != sha256Hex(c.wantServer.packages[c.pkg]["1.0.0"].tgz) {
				t.Errorf("pinned another registry's tarball")
			}
			for _, r := range []*fakeNPM{project, user, env, scoped} {
				got := r.log.count() - before[r]
				if r == c.wantServer && got != 2 || r != c.wantServer && got != 0 {
					t.Errorf("registry %s got %d requests", r.prefix, got)
				}
			}
		})
	}

	// NPM_CONFIG_USERCONFIG replaces ~/.npmrc.
	other := t.TempDir()
	writeFile(t, filepath.Join(other, "npmrc"), "registry="+env.registry()+"\n")
	s := New(Options{Dir: t.TempDir(), Environ: []string{"HOME=" + home, "PATH=" + t.TempDir(), "NPM_CONFIG_USERCONFIG=" + filepath.Join(other, "npmrc")}, HTTPClient: client})
	before := env.log.count()
	if _, err := s.Resolve(context.Background(), npmSource("npm:plain@1.0.0"), linuxAMD64); err != nil {
		t.Fatal(err)
	}
	if env.log.count() != before+2 {
		t.Errorf("NPM_CONFIG_USERCONFIG was not used")
	}
}

// TestNPMAuthToken takes the token through a ${VAR} in the project
// .npmrc, which the user allows with SBX_NPMRC_ENV.
func TestNPMAuthToken(t *testing.T) {
	reg := newFakeNPM(t, "/private/npm/")
	reg.token = "s3cret-npm-token"
	reg.publish("@corp/cli", "4.0.0", &npmVersion{})
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, ".npmrc"),
		"@corp:registry="+reg.registry()+"\n//"+reg.host()+"/private/:_authToken=${NPM_TOKEN}\n")
	client := tlsClient(t, reg.srv)

	s := New(Options{Dir: dir, Environ: isolatedEnv(t, "NPM_TOKEN="+reg.token, "SBX_NPMRC_ENV=NPM_TOKEN"), HTTPClient: client})
	pin, err := s.Resolve(context.Background(), npmSource("npm:@corp/cli@4.0.0"), linuxAMD64)
	if err != nil {
		t.Fatal(err)
	}
	if pin.Version != "4.0.0" {
		t.Errorf("version = %s", pin.Version)
	}
	_, auth := reg.log.snapshot()
	for i, a := range auth {
		if a != "Bearer "+reg.token {
			t.Errorf("request %d sent Authorization %q", i, a)
		}
	}

	// A wrong token is refused, and the error does not repeat it.
	s = New(Options{Dir: dir, Environ: isolatedEnv(t, "NPM_TOKEN=wrong-token-value", "SBX_NPMRC_ENV=NPM_TOKEN"), HTTPClient: client})
	_, err = s.Resolve(context.Background(), npmSource("npm:@corp/cli@4.0.0"), linuxAMD64)
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("err = %v, want 401", err)
	}
	if strings.Contains(err.Error(), "wrong-token-value") {
		t.Errorf("error leaks the token: %v", err)
	}

	// An unset variable in .npmrc is an error naming the variable.
	s = New(Options{Dir: dir, Environ: isolatedEnv(t, "SBX_NPMRC_ENV=NPM_TOKEN"), HTTPClient: client})
	_, err = s.Resolve(context.Background(), npmSource("npm:@corp/cli@4.0.0"), linuxAMD64)
	if err == nil || !strings.Contains(err.Error(), "NPM_TOKEN") || !strings.Contains(err.Error(), ".npmrc:2") {
		t.Errorf("err = %v, want the unset variable and file:line", err)
	}
}

func TestNPMTamperedTarball(t *testing.T) {
	reg := newFakeNPM(t, "/")
	good := makeTgz(t, "tool", "1.0.0", []byte("good binary"))
	evil := makeTgz(t, "tool", "1.0.0", []byte("evil binary"))
	reg.publish("tool", "1.0.0", &npmVersion{tgz: good, served: evil})
	s := New(Options{Environ: isolatedEnv(t, "NPM_CONFIG_REGISTRY="+reg.registry()), HTTPClient: tlsClient(t, reg.srv)})
	_, err := s.Resolve(context.Background(), npmSource("npm:tool@1.0.0"), linuxAMD64)
	var mm *digest.MismatchError
	if !errors.As(err, &mm) {
		t.Fatalf("err = %v, want a MismatchError", err)
	}
	for _, h := range []string{sri512(good), sri512(evil)} {
		if !strings.Contains(err.Error(), h) {
			t.Errorf("error %q does not name %s", err, h)
		}
	}

	// With only a sha1 shasum published, the shasum is checked.
	reg.publish("old", "0.1.0", &npmVersion{tgz: good, served: evil, noIntegrity: true})
	_, err = s.Resolve(context.Background(), npmSource("npm:old@0.1.0"), linuxAMD64)
	if !errors.As(err, &mm) || mm.Algo != "sha1" || mm.Want != sha1Hex(good) || mm.Got != sha1Hex(evil) {
		t.Fatalf("err = %v, want a sha1 mismatch", err)
	}
}

func TestNPMShasumOnlyRecordsSHA512(t *testing.T) {
	reg := newFakeNPM(t, "/")
	reg.publish("old", "0.1.0", &npmVersion{noIntegrity: true})
	s := New(Options{Environ: isolatedEnv(t, "NPM_CONFIG_REGISTRY="+reg.registry()), HTTPClient: tlsClient(t, reg.srv)})
	pin, err := s.Resolve(context.Background(), npmSource("npm:old@0.1.0"), linuxAMD64)
	if err != nil {
		t.Fatal(err)
	}
	if tgz := reg.packages["old"]["0.1.0"].tgz; pin.Integrity != sri512(tgz) {
		t.Errorf("integrity = %s, want %s", pin.Integrity, sri512(tgz))
	}
}

func TestNPMDefaultRegistryFromNPM(t *testing.T) {
	reg := newFakeNPM(t, "/")
	reg.publish("tool", "1.0.0", &npmVersion{})
	bin := t.TempDir()
	writeFile(t, filepath.Join(bin, "npm"), "#!/bin/sh\n[ \"$*\" = \"config get registry\" ] || exit 3\necho "+reg.registry()+"\n")
	if err := os.Chmod(filepath.Join(bin, "npm"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := New(Options{Environ: []string{"HOME=" + t.TempDir(), "PATH=" + bin}, HTTPClient: tlsClient(t, reg.srv)})
	pin, err := s.Resolve(context.Background(), npmSource("npm:tool@1.0.0"), linuxAMD64)
	if err != nil {
		t.Fatal(err)
	}
	if pin.SHA256 != sha256Hex(reg.packages["tool"]["1.0.0"].tgz) {
		t.Errorf("sha256 = %s", pin.SHA256)
	}

	// Without npm and without configuration the error says what to set.
	s = New(Options{Environ: isolatedEnv(t), HTTPClient: tlsClient(t, reg.srv)})
	_, err = s.Resolve(context.Background(), npmSource("npm:tool@1.0.0"), linuxAMD64)
	if err == nil || !strings.Contains(err.Error(), "NPM_CONFIG_REGISTRY") {
		t.Errorf("err = %v, want a hint to set NPM_CONFIG_REGISTRY", err)
	}
}

func TestNPMInvalidName(t *testing.T) {
	s := New(Options{Environ: isolatedEnv(t)})
	for _, name := range []string{"", "@scope", "@/x", "a b", "../x", "a/b", "x?y"} {
		src := &lang.Source{Kind: lang.SourceNPM, Raw: "npm:" + name + "@1.0.0", Ref: name, Version: "1.0.0"}
		if _, err := s.Resolve(context.Background(), src, linuxAMD64); err == nil || !strings.Contains(err.Error(), "invalid npm package name") {
			t.Errorf("%q: err = %v", name, err)
		}
	}
}
