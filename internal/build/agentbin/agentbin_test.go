package agentbin_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/build/agentbin"
	"github.com/sbx-dev/sbx/platform"
)

var (
	amd64 = platform.Platform{OS: "linux", Architecture: "amd64"}
	arm64 = platform.Platform{OS: "linux", Architecture: "arm64"}
)

// built holds agents built once for the package's tests.
var built struct {
	once sync.Once
	dir  string
	err  error
}

func builtAgent(t *testing.T, p platform.Platform) string {
	t.Helper()
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "agentbin-test")
		if built.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		for _, p := range []platform.Platform{amd64, arm64} {
			if _, err := agentbin.Build(ctx, p, built.dir); err != nil {
				built.err = err
				return
			}
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return filepath.Join(built.dir, agentbin.Name(p))
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

func TestBuildReproducible(t *testing.T) {
	first := builtAgent(t, amd64)
	dir := t.TempDir()
	second, err := agentbin.Build(context.Background(), amd64, dir)
	if err != nil {
		t.Fatal(err)
	}
	if second != filepath.Join(dir, "sbx-guest-linux-amd64") {
		t.Errorf("Build returned %s", second)
	}
	a, _ := os.ReadFile(first)
	b, _ := os.ReadFile(second)
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Fatalf("two builds differ: %d bytes sha256 %x vs %d bytes sha256 %x", len(a), sha256.Sum256(a), len(b), sha256.Sum256(b))
	}
	t.Logf("sbx-guest-linux-amd64: %d bytes, sha256 %x", len(a), sha256.Sum256(a))
	if err := agentbin.Check(second, amd64); err != nil {
		t.Error(err)
	}
	// No temporary files are left beside it.
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("build directory holds %d entries, want 1", len(entries))
	}
	// It is the agent: run here, not as PID 1, it refuses.
	out, err := exec.Command(second).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), "runs only as PID 1") {
		t.Errorf("running the agent on the host: %v, %q", err, out)
	}
}

func TestBuildCross(t *testing.T) {
	p := builtAgent(t, arm64)
	if err := agentbin.Check(p, arm64); err != nil {
		t.Error(err)
	}
	err := agentbin.Check(p, amd64)
	if err == nil || !strings.Contains(err.Error(), "is built for EM_AARCH64 (ELFCLASS64, ELFDATA2LSB), not for linux/amd64") {
		t.Errorf("an arm64 agent checked for amd64: %v", err)
	}
}

func TestBuildErrors(t *testing.T) {
	if _, err := agentbin.Build(context.Background(), platform.Platform{OS: "linux", Architecture: "mips"}, t.TempDir()); err == nil ||
		!strings.Contains(err.Error(), "no guest agent for platform linux/mips") {
		t.Errorf("mips: %v", err)
	}
	b := agentbin.Builder{Dir: t.TempDir()} // not a module
	if _, err := b.Build(context.Background(), amd64, t.TempDir()); err == nil || !strings.Contains(err.Error(), "building github.com/sbx-dev/sbx/cmd/sbx-guest for linux/amd64 in ") {
		t.Errorf("outside a module: %v", err)
	}
	b = agentbin.Builder{Go: "/nonexistent/go"}
	if _, err := b.Build(context.Background(), amd64, t.TempDir()); err == nil {
		t.Error("a missing go tool built something")
	}
}

// elfFile writes a minimal ELF executable for machine m.
func elfFile(t *testing.T, dir, name string, m elf.Machine, dynamic bool) string {
	t.Helper()
	progs := []elf.Prog64{{Type: uint32(elf.PT_LOAD), Flags: uint32(elf.PF_R | elf.PF_X), Filesz: 0x100, Memsz: 0x100, Align: 0x1000}}
	if dynamic {
		progs = append(progs, elf.Prog64{Type: uint32(elf.PT_INTERP), Flags: uint32(elf.PF_R), Off: 0xb0, Filesz: 28, Memsz: 28, Align: 1})
	}
	hdr := elf.Header64{Type: uint16(elf.ET_EXEC), Machine: uint16(m), Version: uint32(elf.EV_CURRENT), Phoff: 64, Ehsize: 64, Phentsize: 56, Phnum: uint16(len(progs))}
	copy(hdr.Ident[:], elf.ELFMAG)
	hdr.Ident[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	hdr.Ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	hdr.Ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, hdr)
	binary.Write(&b, binary.LittleEndian, progs)
	b.Write(make([]byte, 0x100))
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b.Bytes(), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	static := elfFile(t, dir, "static", elf.EM_X86_64, false)
	if err := agentbin.Check(static, amd64); err != nil {
		t.Errorf("static amd64: %v", err)
	}
	dynamic := elfFile(t, dir, "dynamic", elf.EM_X86_64, true)
	if err := agentbin.Check(dynamic, amd64); err == nil || !strings.Contains(err.Error(), dynamic+" is dynamically linked") ||
		!strings.Contains(err.Error(), "CGO_ENABLED=0 GOOS=linux GOARCH=amd64 GOAMD64=v1 go build -trimpath") {
		t.Errorf("dynamic: %v", err)
	}
	script := filepath.Join(dir, "script")
	os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755)
	if err := agentbin.Check(script, amd64); err == nil || !strings.Contains(err.Error(), script+" is not an ELF executable") {
		t.Errorf("script: %v", err)
	}
	if err := agentbin.Check(filepath.Join(dir, "missing"), amd64); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
	if err := agentbin.Check(static, platform.Platform{OS: "darwin", Architecture: "amd64"}); err == nil || !strings.Contains(err.Error(), "no guest agent for platform darwin/amd64") {
		t.Errorf("darwin: %v", err)
	}
}

func TestSearch(t *testing.T) {
	agent := builtAgent(t, amd64)
	armAgent := builtAgent(t, arm64)
	link := func(t *testing.T, src, dir, name string) string {
		t.Helper()
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}

	t.Run("env file", func(t *testing.T) {
		exeDir := t.TempDir()
		link(t, agent, exeDir, "sbx-guest-linux-amd64")
		got, err := agentbin.Search{Env: agent, ExeDir: exeDir}.Find(amd64)
		if err != nil || got != agent {
			t.Errorf("Find = %s, %v; want the $SBX_GUEST_AGENT file first", got, err)
		}
		// A wrong explicit choice is an error, not skipped.
		_, err = agentbin.Search{Env: armAgent, ExeDir: exeDir}.Find(amd64)
		if err == nil || !strings.Contains(err.Error(), "guest agent: $SBX_GUEST_AGENT: "+armAgent+" is built for EM_AARCH64") {
			t.Errorf("wrong arch in $SBX_GUEST_AGENT: %v", err)
		}
		_, err = agentbin.Search{Env: filepath.Join(exeDir, "nope")}.Find(amd64)
		if err == nil || !strings.Contains(err.Error(), "$SBX_GUEST_AGENT="+filepath.Join(exeDir, "nope")) {
			t.Errorf("missing $SBX_GUEST_AGENT: %v", err)
		}
	})

	t.Run("env dir", func(t *testing.T) {
		got, err := agentbin.Search{Env: built.dir}.Find(arm64)
		if err != nil || got != armAgent {
			t.Errorf("Find = %s, %v; want %s", got, err, armAgent)
		}
		empty := t.TempDir()
		_, err = agentbin.Search{Env: empty}.Find(amd64)
		if err == nil || !strings.Contains(err.Error(), "names directory "+empty+", which has no sbx-guest-linux-amd64; build it with: CGO_ENABLED=0") {
			t.Errorf("empty $SBX_GUEST_AGENT dir: %v", err)
		}
	})

	t.Run("beside the executable", func(t *testing.T) {
		exeDir := t.TempDir()
		plain := link(t, agent, exeDir, "sbx-guest")
		got, err := agentbin.Search{ExeDir: exeDir}.Find(amd64)
		if err != nil || got != plain {
			t.Errorf("Find = %s, %v; want the plain sbx-guest", got, err)
		}
		named := link(t, agent, exeDir, "sbx-guest-linux-amd64")
		if got, err := (agentbin.Search{ExeDir: exeDir}).Find(amd64); err != nil || got != named {
			t.Errorf("Find = %s, %v; want the platform's name before the plain one", got, err)
		}
		// The plain one is for amd64: not the arm64 agent.
		_, err = agentbin.Search{ExeDir: exeDir, NoBuild: true}.Find(arm64)
		if err == nil || !strings.Contains(err.Error(), "guest agent for linux/arm64 not found") ||
			!strings.Contains(err.Error(), plain+" is built for EM_X86_64") {
			t.Errorf("arm64 beside an amd64 sbx-guest: %v", err)
		}
		// A platform-named file that is wrong is an error.
		link(t, armAgent, exeDir, "sbx-guest-linux-amd64")
		if _, err := (agentbin.Search{ExeDir: exeDir}).Find(amd64); err == nil || !strings.Contains(err.Error(), "is built for EM_AARCH64") {
			t.Errorf("an arm64 binary named for amd64: %v", err)
		}
	})

	t.Run("nowhere", func(t *testing.T) {
		exeDir := t.TempDir()
		_, err := agentbin.Search{ExeDir: exeDir, NoBuild: true}.Find(amd64)
		want := "guest agent for linux/amd64 not found: $SBX_GUEST_AGENT is not set and " + exeDir +
			" has neither sbx-guest-linux-amd64 nor sbx-guest. Build it from the sbx source with\n\t" +
			"CGO_ENABLED=0 GOOS=linux GOARCH=amd64 GOAMD64=v1 go build -trimpath -buildvcs=false -ldflags='-s -w -buildid=' -o sbx-guest-linux-amd64 ./cmd/sbx-guest\n" +
			"and put it beside sbx or point $SBX_GUEST_AGENT at it"
		if err == nil || err.Error() != want {
			t.Errorf("got:\n%v\nwant:\n%s", err, want)
		}
	})

	t.Run("nowhere, and no source to build from", func(t *testing.T) {
		exeDir := t.TempDir()
		noSource := func(context.Context, platform.Platform, string) (string, error) {
			return "", fmt.Errorf("%w: the go tool is not on PATH", agentbin.ErrCannotBuild)
		}
		_, err := agentbin.Search{ExeDir: exeDir, CacheDir: t.TempDir(), Build: noSource}.Find(amd64)
		want := "guest agent for linux/amd64 not found: $SBX_GUEST_AGENT is not set and " + exeDir +
			" has neither sbx-guest-linux-amd64 nor sbx-guest, and the guest agent cannot be built here: the go tool is not on PATH. Build it from the sbx source with\n\t"
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("got:\n%v\nwant it to begin:\n%s", err, want)
		}
		failing := func(context.Context, platform.Platform, string) (string, error) {
			return "", errors.New("exit status 1")
		}
		_, err = agentbin.Search{ExeDir: exeDir, CacheDir: t.TempDir(), Build: failing}.Find(amd64)
		if err == nil || !strings.HasSuffix(err.Error(), "nor sbx-guest, and building it failed: exit status 1") {
			t.Errorf("a failed build: %v", err)
		}
	})

	t.Run("Find reads the environment", func(t *testing.T) {
		t.Setenv(agentbin.EnvVar, agent)
		if got, err := agentbin.Find(amd64); err != nil || got != agent {
			t.Errorf("Find = %s, %v", got, err)
		}
	})
}

func TestBuildCommand(t *testing.T) {
	for p, want := range map[platform.Platform]string{
		arm64: "CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go build -trimpath -buildvcs=false -ldflags='-s -w -buildid=' -o sbx-guest-linux-arm64 ./cmd/sbx-guest",
		{OS: "linux", Architecture: "arm", Variant: "v7"}: "CGO_ENABLED=0 GOOS=linux GOARCH=arm GOARM=7 go build -trimpath -buildvcs=false -ldflags='-s -w -buildid=' -o sbx-guest-linux-arm ./cmd/sbx-guest",
	} {
		if got := agentbin.BuildCommand(p); got != want {
			t.Errorf("BuildCommand(%s) = %q\nwant %q", p, got, want)
		}
	}
}
