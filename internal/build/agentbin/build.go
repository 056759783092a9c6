package agentbin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"

	"github.com/sbx-dev/sbx/platform"
)

// modulePath is the module that holds the agent's source.
const modulePath = "github.com/sbx-dev/sbx"

// Builder builds the agent with the go tool.
type Builder struct {
	// Go is the go tool; "" means "go" on $PATH.
	Go string
	// Dir is a directory of a Go module that is, or requires, the sbx
	// module; the build runs there. "" means the sbx source tree this
	// package was compiled from, when it is still there, and otherwise
	// the current directory.
	Dir string
	// Version, when set, is a version of the sbx module to build the
	// agent from instead of Dir: the go command downloads it through its
	// own configuration ($GOPROXY, checked against $GOSUMDB) into the
	// module cache, and builds there, with sbx as the main module, as in
	// a source tree of that version.
	Version string
}

// ErrCannotBuild is wrapped by the errors of SourceBuilder and
// Builder.Cached that say the agent cannot be built on this machine at
// all: there is no sbx source to build it from, or no go tool.
var ErrCannotBuild = errors.New("the guest agent cannot be built here")

// SourceBuilder returns a Builder for the sbx source this program was
// built from: the source tree this package was compiled from, when it is
// still there (a program built with go build, go run or go test without
// -trimpath); else the sbx module version the program was built from
// (go install github.com/sbx-dev/sbx/cmd/sbx@VERSION, or a program that
// requires sbx), when that is a version the module proxy can serve. When
// there is neither the error wraps ErrCannotBuild.
func SourceBuilder() (Builder, error) {
	if dir := sourceDir(); dir != "" {
		return Builder{Dir: dir}, nil
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Builder{}, fmt.Errorf("%w: this program has no build information", ErrCannotBuild)
	}
	return builderFor(bi)
}

// builderFor is SourceBuilder's choice for a program built without its
// source path, from its build information.
func builderFor(bi *debug.BuildInfo) (Builder, error) {
	mod := &bi.Main
	if mod.Path != modulePath {
		mod = nil
		for _, d := range bi.Deps {
			if d.Path == modulePath && d.Replace == nil {
				mod = d
			}
		}
		if mod == nil {
			return Builder{}, fmt.Errorf("%w: this program (%s) was built without its source path and does not name a version of %s", ErrCannotBuild, bi.Main.Path, modulePath)
		}
	}
	if !semver.IsValid(mod.Version) || semver.Build(mod.Version) != "" {
		return Builder{}, fmt.Errorf("%w: sbx was built with -trimpath from a source tree (version %s), not from a released version of %s",
			ErrCannotBuild, mod.Version, modulePath)
	}
	return Builder{Version: mod.Version}, nil
}

// Cached builds the agent for p under dir, a cache directory, and returns
// its path. An agent of a module Version is built once per Go release and
// kept; one from a source tree is built again every time (the go
// command's build cache makes that quick), since the tree may have
// changed. A missing go tool is an error wrapping ErrCannotBuild.
func (b Builder) Cached(ctx context.Context, p platform.Platform, dir string) (string, error) {
	goTool, err := b.goTool()
	if err != nil {
		return "", err
	}
	b.Go = goTool
	if b.Version == "" {
		src := b.Dir
		if src == "" {
			src = sourceDir()
		}
		sum := sha256.Sum256([]byte(src))
		return b.Build(ctx, p, filepath.Join(dir, "src-"+hex.EncodeToString(sum[:8])))
	}
	out, err := exec.CommandContext(ctx, goTool, "env", "GOVERSION").Output()
	if err != nil {
		return "", fmt.Errorf("agentbin: %s env GOVERSION: %w", goTool, err)
	}
	keyed := filepath.Join(dir, b.Version, strings.TrimSpace(string(out)))
	if path := filepath.Join(keyed, Name(p)); Check(path, p) == nil {
		return path, nil
	}
	return b.Build(ctx, p, keyed)
}

func (b Builder) goTool() (string, error) {
	if b.Go != "" {
		return b.Go, nil
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("%w: the go tool is not on PATH", ErrCannotBuild)
	}
	return goTool, nil
}

// download fetches b.Version of the sbx module into the module cache and
// returns its directory there.
func (b Builder) download(ctx context.Context, goTool string) (string, error) {
	empty, err := os.MkdirTemp("", "sbx-agent-download-")
	if err != nil {
		return "", fmt.Errorf("agentbin: %w", err)
	}
	defer os.RemoveAll(empty)
	query := modulePath + "@" + b.Version
	cmd := exec.CommandContext(ctx, goTool, "mod", "download", "-json", query)
	cmd.Dir = empty // outside any module
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(stdout.Bytes(), &m); err != nil || runErr != nil || m.Error != "" || m.Dir == "" {
		msg := strings.TrimSpace(m.Error + "\n" + stderr.String())
		return "", fmt.Errorf("agentbin: downloading %s with the go command: %v: %s", query, runErr, msg)
	}
	return m.Dir, nil
}

// Build builds the agent for p into outDir with the zero Builder.
func Build(ctx context.Context, p platform.Platform, outDir string) (string, error) {
	return Builder{}.Build(ctx, p, outDir)
}

// Build builds the agent for platform p as outDir/Name(p) and returns its
// path. The build is static and reproducible (see BuildCommand); the
// binary is written beside its final name and renamed into place, and
// checked with Check.
func (b Builder) Build(ctx context.Context, p platform.Platform, outDir string) (string, error) {
	if _, ok := machines[p.Architecture]; p.OS != "linux" || !ok {
		return "", fmt.Errorf("agentbin: no guest agent for platform %s (guests are linux on %s)", p, archList())
	}
	goTool, err := b.goTool()
	if err != nil {
		return "", fmt.Errorf("agentbin: %w", err)
	}
	dir := b.Dir
	var env []string
	if b.Version != "" {
		if dir, err = b.download(ctx, goTool); err != nil {
			return "", err
		}
		// The module's own go.mod and go.sum, nothing of the caller's.
		env = []string{"GOWORK=off", "GOFLAGS=-mod=readonly"}
	} else if dir == "" {
		dir = sourceDir()
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return "", fmt.Errorf("agentbin: %w", err)
	}
	out := filepath.Join(outDir, Name(p))
	tmp, err := os.CreateTemp(outDir, "."+Name(p)+".tmp*")
	if err != nil {
		return "", fmt.Errorf("agentbin: %w", err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name())

	cmd := exec.CommandContext(ctx, goTool, "build", "-trimpath", "-buildvcs=false",
		"-ldflags=-s -w -buildid=", "-o", tmp.Name(), Package)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), env...), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture)
	if v := goarm(p); v != "" {
		cmd.Env = append(cmd.Env, "GOARM="+v)
	}
	if p.Architecture == "amd64" {
		// The baseline instruction set: TCG's default CPU has no AVX.
		cmd.Env = append(cmd.Env, "GOAMD64=v1")
	}
	var stderr bytes.Buffer
	cmd.Stdout = &stderr
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if dir == "" {
			dir = "the current directory"
		}
		return "", fmt.Errorf("agentbin: building %s for %s in %s: %w\n%s", Package, p, dir, err, msg)
	}
	if err := Check(tmp.Name(), p); err != nil {
		return "", fmt.Errorf("agentbin: the build's output: %w", err)
	}
	if err := os.Chmod(tmp.Name(), 0o755); err != nil {
		return "", fmt.Errorf("agentbin: %w", err)
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return "", fmt.Errorf("agentbin: %w", err)
	}
	return out, nil
}

// sourceDir is the root of the sbx source tree this file was compiled
// from, if it is still there, and otherwise "" (the current directory,
// which must then be in a module requiring sbx).
func sourceDir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return "" // built with -trimpath
	}
	// The module root is the nearest directory above this file whose
	// go.mod declares sbx's module.
	for dir := filepath.Dir(file); ; {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			if modfile.ModulePath(data) == modulePath {
				return dir
			}
			return ""
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}
