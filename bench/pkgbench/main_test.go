package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/build/debrepo"
	"github.com/sbx-dev/sbx/internal/build/kernel/kerneltest"
	"github.com/sbx-dev/sbx/lang"
)

// TestTinyRun runs the whole benchmark for one round on a small image
// (hello, with the Essential and required packages an empty root gets):
// both sides must build a disk holding /usr/bin/hello, and the table must
// have every row.
func TestTinyRun(t *testing.T) {
	srcs, err := debrepo.HostSources("/")
	if err != nil {
		t.Fatal(err)
	}
	if len(srcs) == 0 {
		t.Skip("the host has no apt sources")
	}
	kdeb := kerneltest.DebianKernelDeb(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var out, log bytes.Buffer
	args := []string{"-work", t.TempDir(), "-rounds", "1", "-packages", "hello", "-check", "/usr/bin/hello", "-size", "512MiB", "-kernel", kdeb}
	if code := run(ctx, args, &out, &log); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, log.String(), out.String())
	}
	t.Logf("\n%s", out.String())
	for _, want := range []string{"| resolve | ", "| build | ", "| total | ", "| total, CPU | ", "`dpkg-deb -x` of each", "/usr/bin/hello is a regular file; standard", "/usr/bin/hello is a regular file.\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in the output:\n%s", want, out.String())
		}
	}
}

// TestSpec checks that the spec the benchmark writes loads, with the
// packages, size and kernel given.
func TestSpec(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "sbx.hcl"), []byte(spec([]string{"git", "ca-certificates"}, "1GiB", "file:./kernel.deb")), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := lang.Load(dir, lang.Options{})
	if diags.HasErrors() {
		t.Fatalf("the spec does not load: %s", diags.Error())
	}
	img := cfg.Images["bench"]
	if img == nil || img.Size != 1<<30 || img.Kernel == nil || img.Kernel.Source.Raw != "file:./kernel.deb" {
		t.Fatalf("image %+v", img)
	}
	if got := strings.Join(img.Packages.Requests, ","); got != "git,ca-certificates" && got != "ca-certificates,git" {
		t.Errorf("packages %q", got)
	}
}

// TestParseSimulate reads apt-get --simulate's Inst lines, and only
// those.
func TestParseSimulate(t *testing.T) {
	out := []byte(`NOTE: This is only a simulation!
Inst libc6 (2.36-9+deb12u14 Debian:12.15/oldstable [amd64]) []
Inst git (1:2.39.5-0+deb12u2 Debian-Security:12/oldstable-security [amd64])
Conf libc6 (2.36-9+deb12u14 Debian:12.15/oldstable [amd64])
`)
	got := strings.Join(parseSimulate(out), " ")
	if want := "git=1:2.39.5-0+deb12u2 libc6=2.36-9+deb12u14"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestFileType checks the disk check: a file in an ext4 image is found
// with its type, a missing one is an error.
func TestFileType(t *testing.T) {
	if _, err := exec.LookPath("mke2fs"); err != nil {
		t.Fatal("mke2fs is not on PATH (Debian package e2fsprogs)")
	}
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(filepath.Join(root, "usr/bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "usr/bin/tool"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	raw := filepath.Join(dir, "disk.raw")
	if out, err := exec.Command("mke2fs", "-q", "-F", "-t", "ext4", "-d", root, raw, "8M").CombinedOutput(); err != nil {
		t.Fatalf("mke2fs: %v\n%s", err, out)
	}
	ctx := context.Background()
	if typ, err := fileType(ctx, raw, "/usr/bin/tool"); err != nil || typ != "regular" {
		t.Errorf("/usr/bin/tool: %q, %v", typ, err)
	}
	if typ, err := fileType(ctx, raw, "/usr/bin/git"); err == nil {
		t.Errorf("a missing file was found, of type %q", typ)
	}
}
