package agentbin

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sbx-dev/sbx/internal/build/cache"
	"github.com/sbx-dev/sbx/platform"
)

// EnvVar names the environment variable Find looks at first: the agent
// binary itself, or a directory holding Name(platform).
const EnvVar = "SBX_GUEST_AGENT"

// Package is the agent's import path.
const Package = "github.com/sbx-dev/sbx/cmd/sbx-guest"

// Name is the agent binary's file name for platform p, such as
// "sbx-guest-linux-amd64".
func Name(p platform.Platform) string {
	return "sbx-guest-" + p.OS + "-" + p.Architecture
}

// BuildCommand is the shell command that builds the agent for p from a
// source checkout, for error messages and documentation.
func BuildCommand(p platform.Platform) string {
	env := "CGO_ENABLED=0 GOOS=" + p.OS + " GOARCH=" + p.Architecture
	if v := goarm(p); v != "" {
		env += " GOARM=" + v
	}
	if p.Architecture == "amd64" {
		env += " GOAMD64=v1"
	}
	return env + " go build -trimpath -buildvcs=false -ldflags='-s -w -buildid=' -o " + Name(p) + " ./cmd/sbx-guest"
}

// Find returns the path of the agent binary for platform p: the file
// $SBX_GUEST_AGENT names, or Name(p) in the directory it names; else
// Name(p), then "sbx-guest", beside the running executable; else one
// built from sbx's own source into the cache (see Search.Build). The
// binary found is checked with Check. When there is none and none can be
// built the error says how to build one.
func Find(p platform.Platform) (string, error) {
	s := Search{Env: os.Getenv(EnvVar)}
	if exe, err := os.Executable(); err == nil {
		s.ExeDir = filepath.Dir(exe)
	}
	return s.Find(p)
}

// Search is where Find looks; its first fields are what Find reads from
// the environment.
type Search struct {
	// Env is the value of $SBX_GUEST_AGENT: a file or a directory, or "".
	Env string
	// ExeDir is the directory of the running executable, or "".
	ExeDir string
	// CacheDir is the cache root whose "agent" directory keeps the agents
	// Find builds; "" means cache.DefaultRoot.
	CacheDir string
	// Build builds the agent for p when Find finds none, under dir (the
	// cache root's "agent" directory), and returns its path; nil means
	// SourceBuilder's Builder.Cached. An error wrapping ErrCannotBuild makes
	// Find report the agent as not found, saying why it cannot be built.
	Build func(ctx context.Context, p platform.Platform, dir string) (string, error)
	// NoBuild makes Find only look, never build.
	NoBuild bool
}

// Find looks for the agent for p as the package-level Find does.
func (s Search) Find(p platform.Platform) (string, error) {
	return s.FindContext(context.Background(), p)
}

// FindContext is Find with a context that bounds a build.
func (s Search) FindContext(ctx context.Context, p platform.Platform) (string, error) {
	if s.Env != "" {
		fi, err := os.Stat(s.Env)
		if err != nil {
			return "", fmt.Errorf("guest agent: $%s=%s: %w", EnvVar, s.Env, err)
		}
		cand := s.Env
		if fi.IsDir() {
			cand = filepath.Join(s.Env, Name(p))
			if _, err := os.Stat(cand); err != nil {
				return "", fmt.Errorf("guest agent: $%s names directory %s, which has no %s; build it with: %s",
					EnvVar, s.Env, Name(p), BuildCommand(p))
			}
		}
		if err := Check(cand, p); err != nil {
			return "", fmt.Errorf("guest agent: $%s: %w", EnvVar, err)
		}
		return cand, nil
	}
	var notes []string
	if s.ExeDir != "" {
		named := filepath.Join(s.ExeDir, Name(p))
		switch err := Check(named, p); {
		case err == nil:
			return named, nil
		case !errors.Is(err, fs.ErrNotExist):
			return "", fmt.Errorf("guest agent: %w", err)
		}
		plain := filepath.Join(s.ExeDir, "sbx-guest")
		switch err := Check(plain, p); {
		case err == nil:
			return plain, nil
		case !errors.Is(err, fs.ErrNotExist):
			notes = append(notes, err.Error())
		}
	}
	where := "$" + EnvVar + " is not set"
	if s.ExeDir != "" {
		where += fmt.Sprintf(" and %s has neither %s nor sbx-guest", s.ExeDir, Name(p))
	}
	if len(notes) > 0 {
		where += " for " + p.String() + " (" + strings.Join(notes, "; ") + ")"
	}
	if !s.NoBuild {
		path, err := s.build(ctx, p)
		if err == nil {
			return path, nil
		}
		if !errors.Is(err, ErrCannotBuild) {
			return "", fmt.Errorf("guest agent for %s: %s, and building it failed: %w", p, where, err)
		}
		where += ", and " + err.Error()
	}
	return "", fmt.Errorf("guest agent for %s not found: %s. Build it from the sbx source with\n\t%s\nand put it beside sbx or point $%s at it",
		p, where, BuildCommand(p), EnvVar)
}

// build builds the agent for p into the cache's "agent" directory.
func (s Search) build(ctx context.Context, p platform.Platform) (string, error) {
	root := s.CacheDir
	if root == "" {
		var err error
		if root, err = cache.DefaultRoot(); err != nil {
			return "", err
		}
	}
	build := s.Build
	if build == nil {
		b, err := SourceBuilder()
		if err != nil {
			return "", err
		}
		build = b.Cached
	}
	return build(ctx, p, filepath.Join(root, "agent"))
}

// machine is the ELF identity of a platform's executables.
type machine struct {
	class elf.Class
	data  elf.Data
	mach  elf.Machine
}

var machines = map[string]machine{
	"amd64":   {elf.ELFCLASS64, elf.ELFDATA2LSB, elf.EM_X86_64},
	"arm64":   {elf.ELFCLASS64, elf.ELFDATA2LSB, elf.EM_AARCH64},
	"arm":     {elf.ELFCLASS32, elf.ELFDATA2LSB, elf.EM_ARM},
	"386":     {elf.ELFCLASS32, elf.ELFDATA2LSB, elf.EM_386},
	"riscv64": {elf.ELFCLASS64, elf.ELFDATA2LSB, elf.EM_RISCV},
	"ppc64le": {elf.ELFCLASS64, elf.ELFDATA2LSB, elf.EM_PPC64},
	"s390x":   {elf.ELFCLASS64, elf.ELFDATA2MSB, elf.EM_S390},
}

// Check reports whether the file at path is a static ELF executable for
// platform p: the right class, byte order and machine, and no program
// interpreter (a dynamic executable cannot run from the initramfs, which
// holds no libraries). Errors name the file; a missing file is an error
// satisfying errors.Is(err, fs.ErrNotExist).
func Check(path string, p platform.Platform) error {
	want, ok := machines[p.Architecture]
	if p.OS != "linux" || !ok {
		return fmt.Errorf("%s: no guest agent for platform %s (guests are linux on %s)", path, p, archList())
	}
	f, err := elf.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return fmt.Errorf("%s is not an ELF executable: %w", path, err)
	}
	defer f.Close()
	if f.Class != want.class || f.Data != want.data || f.Machine != want.mach {
		return fmt.Errorf("%s is built for %v (%v, %v), not for %s", path, f.Machine, f.Class, f.Data, p)
	}
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("%s is an ELF %v, not an executable", path, f.Type)
	}
	if f.OSABI != elf.ELFOSABI_NONE && f.OSABI != elf.ELFOSABI_LINUX {
		return fmt.Errorf("%s is built for OS ABI %v, not Linux", path, f.OSABI)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked (it names a program interpreter); the initramfs has no libraries, so build it with CGO_ENABLED=0: %s",
				path, BuildCommand(p))
		}
	}
	return nil
}

func archList() string {
	return "amd64, arm64, arm, 386, riscv64, ppc64le or s390x"
}

// goarm is GOARM for an arm platform's variant ("v7" → "7").
func goarm(p platform.Platform) string {
	if p.Architecture != "arm" || p.Variant == "" {
		return ""
	}
	return strings.TrimPrefix(p.Variant, "v")
}
