package supervisor

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sbx-dev/sbx/atomicfile"
	"github.com/sbx-dev/sbx/machine"
)

// ConsoleFile is the serial console of the supervisor's last machine,
// kept in its directory once the machine has ended (the machine's own
// directory goes with it).
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
// changed last, or "".
func liveConsole(dir string) string {
	if st, err := ReadStatus(dir); err == nil && st.MachineDir != "" {
		p := filepath.Join(st.MachineDir, machine.ConsoleFile)
		if _, err := os.Stat(p); err == nil {
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
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "sbx-") {
			continue
		}
		p := filepath.Join(dir, e.Name(), machine.ConsoleFile)
		fi, err := os.Stat(p)
		if err == nil && fi.ModTime().UnixNano() > bestTime {
			best, bestTime = p, fi.ModTime().UnixNano()
		}
	}
	return best
}

// saveConsole keeps the console of the last machine in dir as
// dir/console.log, before the machine's directory is removed.
func saveConsole(dir string) {
	src := liveConsole(dir)
	if src == "" {
		return
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return
	}
	atomicfile.WriteBytes(filepath.Join(dir, ConsoleFile), b, 0o600)
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
// QEMU's own output, which say why it ended.
func machineTails(m *machine.Machine) string {
	qemuLog, _ := os.ReadFile(filepath.Join(m.Dir(), machine.QEMULogFile))
	return fmt.Sprintf("the console's last lines:\n%s\nQEMU's last lines:\n%s", consoleTail(m.Console(), 15), consoleTail(qemuLog, 10))
}
