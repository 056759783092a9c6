package supervisor

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sbx-dev/sbx/internal/machine"
	"github.com/sbx-dev/sbx/internal/machine/consolelog"
)

// ConsoleFile is the serial console of the supervisor's last machine,
// kept in its directory once the machine has ended (the machine's own
// directory goes with it); ConsoleFile+".1" (consolelog.Rotated), when
// there is one, holds what came before. Each holds at most
// consolelog.DefaultMax bytes.
const ConsoleFile = "console.log"

// ConsolePath returns the console log of the sandbox of dir: the running
// machine's, else the one kept when the last machine ended. The second
// result says whether it is the running machine's.
func ConsolePath(dir string) (string, bool) {
	if live := liveConsole(dir); live != "" {
		return live, true
	}
	return filepath.Join(dir, ConsoleFile), false
}

// liveConsole returns the console log of the machine directory in dir
// changed last, or "". Only a directory directly in dir named as package
// machine names them ("sbx-…"), not a symbolic link, counts, whatever
// the status says.
func liveConsole(dir string) string {
	if st, err := ReadStatus(dir); err == nil && st.MachineDir != "" {
		if p, ok := machineConsole(dir, st.MachineDir); ok {
			return p
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	var best string
	var bestTime int64
	for _, e := range ents {
		p, ok := machineConsole(dir, filepath.Join(dir, e.Name()))
		if !ok {
			continue
		}
		if fi, err := os.Lstat(p); err == nil && fi.ModTime().UnixNano() > bestTime {
			best, bestTime = p, fi.ModTime().UnixNano()
		}
	}
	return best
}

// machineConsole returns the console log of the machine directory mdir
// of the supervisor directory dir, if mdir is one and has a console log
// that is a regular file.
func machineConsole(dir, mdir string) (string, bool) {
	if filepath.Dir(filepath.Clean(mdir)) != filepath.Clean(dir) || !strings.HasPrefix(filepath.Base(mdir), "sbx-") {
		return "", false
	}
	if fi, err := os.Lstat(mdir); err != nil || !fi.IsDir() {
		return "", false
	}
	p := filepath.Join(mdir, machine.ConsoleFile)
	if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
		return "", false
	}
	return p, true
}

// saveConsole keeps the console of the last machine in dir as
// dir/console.log (and console.log.1), before the machine's directory is
// removed: the files are moved, not read, and of one larger than
// consolelog.DefaultMax only that much of its end is kept.
func saveConsole(dir string) {
	if src := liveConsole(dir); src != "" {
		consolelog.Move(src, filepath.Join(dir, ConsoleFile), consolelog.DefaultMax)
	}
}

// consoleTail returns the last n lines of a console, indented.
func consoleTail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + strings.Join(lines, "\n    ")
}

// machineTails quotes the ends of an ended machine's console and of
// QEMU's own output, which say why it ended. Neither is read whole.
func machineTails(m *machine.Machine) string {
	var qemuLog bytes.Buffer
	consolelog.CopyTail(&qemuLog, filepath.Join(m.Dir(), machine.QEMULogFile), 8<<10)
	return fmt.Sprintf("the console's last lines:\n%s\nQEMU's last lines:\n%s", consoleTail(m.Console(), 15), consoleTail(qemuLog.Bytes(), 10))
}
