package initsystest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sbx-dev/sbx/internal/guest/initsys"
)

// Recorder is an initsys.Sys that records each call as a line such as
// "mount devtmpfs /dev devtmpfs nosuid mode=0755", with paths under Root
// written as guest paths ("/dev"), and returns Fail's error for it.
type Recorder struct {
	// Root is the directory standing for the guest's root.
	Root string
	// Fail, when set, is asked about every call line; a non-nil error
	// is returned from the call (and recorded after " -> ").
	Fail func(call string) error
	// Hook, when set, runs with every call line before Fail, for a
	// test to act at that moment (such as panicking).
	Hook func(call string)

	mu    sync.Mutex
	calls []string
}

var _ initsys.Sys = (*Recorder)(nil)

// Calls returns the calls so far.
func (r *Recorder) Calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

func (r *Recorder) guestPath(p string) string {
	if p == "" {
		return p
	}
	rel, err := filepath.Rel(r.Root, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return p
	}
	return "/" + strings.TrimPrefix(filepath.ToSlash(rel), ".")
}

func (r *Recorder) call(line string) error {
	if r.Hook != nil {
		r.Hook(line)
	}
	var err error
	if r.Fail != nil {
		err = r.Fail(line)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.calls = append(r.calls, line+" -> "+err.Error())
	} else {
		r.calls = append(r.calls, line)
	}
	return err
}

func (r *Recorder) Mount(source, target, fstype, data string, flags initsys.MountFlags) error {
	line := fmt.Sprintf("mount %s %s %s %v", orDash(r.guestPath(source)), r.guestPath(target), orDash(fstype), flags)
	if data != "" {
		line += " " + data
	}
	return r.call(line)
}

func (r *Recorder) Unmount(target string, detach bool) error {
	line := "umount " + r.guestPath(target)
	if detach {
		line += " detach"
	}
	return r.call(line)
}

func (r *Recorder) LoadModule(f *os.File, params string) error {
	line := "load " + r.guestPath(f.Name())
	if params != "" {
		line += " " + params
	}
	return r.call(line)
}

func (r *Recorder) SwitchRoot(newRoot string) error {
	return r.call("switchroot " + r.guestPath(newRoot))
}

func (r *Recorder) Sethostname(name string) error { return r.call("sethostname " + name) }

func (r *Recorder) Sync() { r.call("sync") }

func (r *Recorder) PowerOff() error { return r.call("poweroff") }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// MakeRoot makes a temporary directory standing for a guest's root,
// holding files (slash-separated path → contents; a path ending in "/"
// is a directory), and returns its path.
func MakeRoot(t testing.TB, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}
