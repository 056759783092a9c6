package supervisor

import (
	"path/filepath"
	"strings"

	"github.com/sbx-dev/sbx/internal/machine"
)

// procRole is which of a sandbox's processes a process id is claimed to
// be: the supervisor Spawn started, or the QEMU its machine launched.
type procRole int

const (
	roleSupervisor procRole = iota
	roleQEMU
)

func (r procRole) String() string {
	if r == roleQEMU {
		return "QEMU"
	}
	return "supervisor"
}

// isSandboxArgv reports whether args, a process's argument vector, is
// exactly the one sbx gives the process of role for the supervisor
// directory dir (absolute and clean). A process id recorded in state or a
// status file is only a hint; this is the proof, with the process's user
// (see findProcess).
//
// A supervisor's is "<binary> supervise DIR" (Spawn's default command):
// three arguments, the last two exactly Verb and dir.
//
// QEMU's holds its monitor socket in a machine directory directly inside
// dir (machine.Start makes DIR/sbx-<digits>; internal/machine/qemu writes
// "-chardev socket,id=qmp,path=PATH,server=on,wait=off", commas in PATH
// doubled): one argument must be exactly that, for PATH
// DIR/sbx-<digits>/qmp.sock. A path that merely starts with dir, or names
// another file in it, does not count.
func isSandboxArgv(args []string, dir string, role procRole) bool {
	if role == roleSupervisor {
		return len(args) == 3 && args[1] == Verb && args[2] == dir
	}
	for i := 1; i+1 < len(args); i++ {
		if args[i] != "-chardev" {
			continue
		}
		v, ok := strings.CutPrefix(args[i+1], qmpChardevPrefix)
		if !ok {
			continue
		}
		v, ok = strings.CutSuffix(v, qmpChardevSuffix)
		if !ok {
			continue
		}
		path := strings.ReplaceAll(v, ",,", ",")
		if strings.ReplaceAll(path, ",", ",,") != v {
			continue // a single comma: another option, not part of the path
		}
		mdir, file := filepath.Split(path)
		mdir = strings.TrimSuffix(mdir, "/")
		if file == machine.QMPSocket && filepath.Dir(mdir) == dir && isMachineDirName(filepath.Base(mdir)) &&
			filepath.Clean(path) == path {
			return true
		}
	}
	return false
}

// The QMP chardev argument of qemu.Command (internal/machine/qemu), around the socket's
// path.
const (
	qmpChardevPrefix = "socket,id=qmp,path="
	qmpChardevSuffix = ",server=on,wait=off"
)

// isMachineDirName reports whether name is one machine.Start gives the
// machine directories it makes in a supervisor directory: "sbx-" and
// digits (os.MkdirTemp's random part).
func isMachineDirName(name string) bool {
	digits, ok := strings.CutPrefix(name, "sbx-")
	if !ok || digits == "" || len(digits) > 20 {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
