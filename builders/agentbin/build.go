package agentbin

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/mod/modfile"

	"github.com/sbx-dev/sbx/lang"
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
}

// Build builds the agent for p into outDir with the zero Builder.
func Build(ctx context.Context, p lang.Platform, outDir string) (string, error) {
	return Builder{}.Build(ctx, p, outDir)
}

// Build builds the agent for platform p as outDir/Name(p) and returns its
// path. The build is static and reproducible (see BuildCommand); the
// binary is written beside its final name and renamed into place, and
// checked with Check.
func (b Builder) Build(ctx context.Context, p lang.Platform, outDir string) (string, error) {
	if _, ok := machines[p.Architecture]; p.OS != "linux" || !ok {
		return "", fmt.Errorf("agentbin: no guest agent for platform %s (guests are linux on %s)", p, archList())
	}
	goTool := b.Go
	if goTool == "" {
		var err error
		if goTool, err = exec.LookPath("go"); err != nil {
			return "", fmt.Errorf("agentbin: building the guest agent needs the go tool: %w", err)
		}
	}
	dir := b.Dir
	if dir == "" {
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
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture)
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
	root := filepath.Dir(filepath.Dir(filepath.Dir(file)))
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || modfile.ModulePath(data) != modulePath {
		return ""
	}
	return root
}
