package secretsrc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const value = "sk-live-Zq8rT2vX9wQ4"

func resolve(t *testing.T, source string, opts Options) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, err := Resolve(ctx, source, opts)
	if err != nil {
		var e *Error
		if !errors.As(err, &e) || e.Source != source {
			t.Errorf("%s: error %v is not an *Error naming the source", source, err)
		}
		if strings.Contains(err.Error(), value) || strings.Contains(err.Error(), "Zq8rT2vX9wQ4") {
			t.Errorf("%s: error text carries the value: %v", source, err)
		}
	}
	return v, err
}

func wantValue(t *testing.T, source string, opts Options, want string) {
	t.Helper()
	v, err := resolve(t, source, opts)
	if err != nil {
		t.Fatalf("%s: %v", source, err)
	}
	if string(v) != want {
		t.Fatalf("%s: got %q, want %q", source, v, want)
	}
}

func wantError(t *testing.T, source string, opts Options, parts ...string) error {
	t.Helper()
	v, err := resolve(t, source, opts)
	if err == nil {
		t.Fatalf("%s: got value %q, want an error", source, v)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("%s: error %q lacks %q", source, err, p)
		}
	}
	return err
}

func TestEnv(t *testing.T) {
	env := []string{"A=1", "TOKEN=" + value, "EMPTY=", "TOKEN2=old", "TOKEN2=new\n", "BAD=a\nb" + value}
	wantValue(t, "env:TOKEN", Options{Environ: env}, value)
	wantValue(t, "env:TOKEN2", Options{Environ: env}, "new")
	wantError(t, "env:MISSING", Options{Environ: env}, "env:MISSING", "MISSING is not set")
	if err := wantError(t, "env:EMPTY", Options{Environ: env}, "empty"); !errors.Is(err, ErrEmpty) {
		t.Errorf("empty: %v is not ErrEmpty", err)
	}
	wantError(t, "env:BAD", Options{Environ: env}, "line break")
	t.Setenv("SBX_TEST_SECRET", value)
	wantValue(t, "env:SBX_TEST_SECRET", Options{}, value)
}

func TestFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	abs := write("token", value+"\n", 0o600)
	write("crlf", value+"\r\n", 0o600)
	write("empty", "\n", 0o600)
	write("multi", value+"\nsecond line\n", 0o600)
	write("big", value+strings.Repeat("x", MaxSize), 0o600)
	if err := os.Symlink("token", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	opts := Options{Dir: dir}
	wantValue(t, "file:token", opts, value)
	wantValue(t, "file:"+abs, Options{Dir: "/nonexistent"}, value)
	wantValue(t, "file:crlf", opts, value)
	wantValue(t, "file:link", opts, value) // the user's own file through a link is the user's choice
	home := t.TempDir()
	t.Setenv("HOME", home)
	if err := os.WriteFile(filepath.Join(home, ".tok"), []byte(value), 0o600); err != nil {
		t.Fatal(err)
	}
	wantValue(t, "file:~/.tok", opts, value)

	wantError(t, "file:missing", opts, "file:missing", "no such file")
	wantError(t, "file:empty", opts, "empty")
	wantError(t, "file:multi", opts, "line break")
	wantError(t, "file:big", opts, "larger than")
	wantError(t, "file:.", opts, "not a regular file")
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "dev")); err != nil {
		t.Fatal(err)
	}
	wantError(t, "file:dev", opts, "not a regular file")
}

// A FIFO planted where a secret file is expected must not hang the
// sandbox's start.
func TestFileFIFORefusedWithoutHanging(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := Resolve(context.Background(), "file:fifo", Options{Dir: dir})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("err %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reading a FIFO hung")
	}
}

func TestFileOfAnotherUserRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a file owned by another user")
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "theirs")
	if err := os.WriteFile(p, []byte(value), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, 12345, 12345); err != nil {
		t.Fatal(err)
	}
	wantError(t, "file:theirs", Options{Dir: dir}, "not owned by this user")
	// Nor through a link the checkout planted.
	if err := os.Symlink(p, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	wantError(t, "file:link", Options{Dir: dir}, "not owned by this user")
}

func TestCommand(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tok"), []byte(value), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := Options{Dir: dir, Environ: []string{"PATH=/usr/bin:/bin", "X=" + value}}
	wantValue(t, "command:printf '%s\\n' \"$X\"", opts, value)
	wantValue(t, "command:cat tok", opts, value) // runs in Dir
	wantValue(t, "command:read v || true; printf %s \"${v:-noinput}\"", opts, "noinput")

	wantError(t, "command:exit 3", opts, "command:exit 3", "exit status 3")
	wantError(t, "command:echo 'no credentials: run login' >&2; exit 1", opts, "exit status 1", "no credentials: run login")
	wantError(t, "command:true", opts, "empty")
	wantError(t, "command:head -c 70000 /dev/zero | tr '\\0' x", opts, "longer than")
	// A helper that prints the value and then fails, or prints it on its
	// standard error, leaves no trace of it in the error.
	wantError(t, "command:printf '%s\\n' \"$X\"; exit 2", opts, "exit status 2")
	wantError(t, "command:echo \"$X\"; echo \"token was $X\" >&2; exit 2", opts, "exit status 2", "[redacted]")
	// Standard error is quoted short and escaped.
	err := wantError(t, "command:printf '\\033[2J%0500d' 0 >&2; exit 1", opts, "exit status 1", `\x1b[2J`)
	if len(err.Error()) > 400 || strings.Contains(err.Error(), "\x1b") {
		t.Errorf("stderr excerpt not bounded or escaped: %q", err)
	}
}

func pidAlive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	// A zombie waiting for its reaper is dead for our purpose.
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// A hanging helper is killed at the timeout, the child it started too.
func TestCommandTimeoutKillsGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	start := time.Now()
	wantError(t, "command:sleep 60 & echo $! > child.pid; sleep 60", Options{Dir: dir, Timeout: 300 * time.Millisecond}, "timed out after 300ms")
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("returned after %v", d)
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for pidAlive(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("child %d still running after the timeout", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestCommandCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := Resolve(ctx, "command:sleep 60", Options{Dir: t.TempDir()})
	if !errors.Is(err, context.Canceled) || time.Since(start) > 3*time.Second {
		t.Fatalf("err %v after %v", err, time.Since(start))
	}
}

func TestBadSources(t *testing.T) {
	for _, s := range []string{"", "TOKEN", "env:", "vault:x", "file", "https://x"} {
		wantError(t, s, Options{})
	}
}

func TestPlaceholder(t *testing.T) {
	re := regexp.MustCompile(`^sbx_ph_[A-Za-z0-9_]*[0-9a-f]{32}$`)
	seen := map[string]bool{}
	for _, name := range []string{"ANTHROPIC_API_KEY", "gh-token", "", "x.y/z\n\x00é", strings.Repeat("N", 100)} {
		for range 3 {
			p, err := Placeholder(name)
			if err != nil {
				t.Fatal(err)
			}
			if !re.MatchString(p) {
				t.Errorf("Placeholder(%q) = %q", name, p)
			}
			if seen[p] {
				t.Errorf("repeated placeholder %q", p)
			}
			seen[p] = true
			if len(p) > 7+24+1+32 {
				t.Errorf("placeholder %q too long", p)
			}
		}
	}
	if p, _ := Placeholder("ANTHROPIC_API_KEY"); !strings.HasPrefix(p, "sbx_ph_ANTHROPIC_API_KEY_") {
		t.Errorf("placeholder %q does not say which secret", p)
	}
}

// TestHasPlaceholder: every placeholder Placeholder makes for a name is
// found in any text around it, and nothing that is not one, nor one made
// for another name.
func TestHasPlaceholder(t *testing.T) {
	for _, name := range []string{"api_key", "gh-token", "", strings.Repeat("N", 100)} {
		p, err := Placeholder(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{p, "Bearer " + p, "x" + p + "y", "sbx_ph_" + p} {
			if !HasPlaceholder(s, name) {
				t.Errorf("HasPlaceholder(%q, %q) is false", s, name)
			}
		}
		if HasPlaceholder(p[:len(p)-1], name) || HasPlaceholder(strings.ToUpper(p), name) {
			t.Errorf("a cut or upper-cased %q is taken for a placeholder of %q", p, name)
		}
	}
	other, _ := Placeholder("other")
	if HasPlaceholder(other, "api_key") || HasPlaceholder("sbx_ph_api_key_", "api_key") || HasPlaceholder("", "api_key") {
		t.Error("text without a placeholder of api_key is taken for one")
	}
}
