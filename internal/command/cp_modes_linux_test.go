package command

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/sbx-dev/sbx/internal/proto/agentproto"
)

// TestCpOutNeverGroupOrOtherWritable: sbx cp out of a guest that
// announces a world-writable file, run by a user whose umask lets group
// write through (002, a common default), gives a host file that is
// neither group- nor other-writable, as the workspace's file server
// does for a guest's chmod: another local user must not be able to
// change what the guest handed over.
func TestCpOutNeverGroupOrOtherWritable(t *testing.T) {
	old := syscall.Umask(0o002)
	defer syscall.Umask(old)

	content := []byte("#!/bin/sh\necho hi\n")
	configDir, environ := hostileSandbox(t, func(g *agentproto.Conn, f agentproto.Frame) {
		if f.Type != agentproto.TypeFileGet {
			return
		}
		g.WriteJSON(agentproto.TypeFileInfo, f.Stream, &agentproto.FileInfo{Size: int64(len(content)), Mode: 0o6777})
		g.WriteData(f.Stream, agentproto.ChanStdout, content)
		g.WriteJSON(agentproto.TypeResult, f.Stream, &agentproto.Result{})
	})
	out := filepath.Join(t.TempDir(), "script")
	code, _, errOut := runBounded(t, environ, "cp", configDir, "box:/bin/script", out)
	if code != ExitOK {
		t.Fatalf("cp: code %d, stderr %q", code, errOut)
	}
	fi, err := os.Lstat(out)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode(); got != 0o755 {
		t.Errorf("host file mode %v; want -rwxr-xr-x (the guest's 06777 without set-ID bits and group and other write, whatever the umask)", got)
	}
}
