package sandbox

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/sandbox/sandboxnet"
)

// runHere runs a guest command on this host, as this user, for the
// script's own behaviour; the guest agent runs the same argv.
func runHere(ctx context.Context, c guestconn.Cmd) (*guestconn.ExitStatus, error) {
	cmd := exec.CommandContext(ctx, c.Args[0], c.Args[1:]...)
	cmd.Dir, cmd.Stdin, cmd.Stderr = c.Dir, c.Stdin, c.Stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return &guestconn.ExitStatus{Code: ee.ExitCode()}, nil
	}
	if err != nil {
		return nil, err
	}
	return &guestconn.ExitStatus{}, nil
}

// TestCredentialFileScript: the writer makes missing directories with
// no access for group and others, gives the file the block's mode,
// replaces an existing file whole and leaves no temporary file.
func TestCredentialFileScript(t *testing.T) {
	home := t.TempDir()
	path := filepath.Join(home, ".codex", "auth.json")
	for _, data := range []string{`{"tokens":{"refresh_token":"sbx_ph_first"}}`, `{"tokens":{"refresh_token":"sbx_ph_second"}}`} {
		err := deliverCredentialFiles(context.Background(), runHere, []sandboxnet.CredentialFile{
			{Secret: "codex", Path: path, Mode: 0o400, Owner: "agent", Data: []byte(data)},
		})
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != data {
			t.Fatalf("the file: %q, %v; want %q", got, err, data)
		}
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o400 {
			t.Errorf("the file's mode: %v, %v; want 0400", fi.Mode().Perm(), err)
		}
	}
	fi, err := os.Stat(filepath.Dir(path))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the directory made: %v, %v; want 0700", fi.Mode().Perm(), err)
	}
	ents, _ := os.ReadDir(filepath.Dir(path))
	if len(ents) != 1 {
		t.Errorf("the directory holds %d entries; want the file alone", len(ents))
	}
	err = deliverCredentialFiles(context.Background(), runHere, []sandboxnet.CredentialFile{
		{Secret: "codex", Path: filepath.Join(path, "not-a-dir", "auth.json"), Mode: 0o600, Owner: "agent", Data: []byte("x")},
	})
	if err == nil {
		t.Error("a path under a file was written")
	}
}
