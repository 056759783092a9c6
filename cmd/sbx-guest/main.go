// Command sbx-guest is the sbx guest agent, run by the kernel as /init,
// PID 1, from the initramfs. All it does is in package guest; see there.
//
// Run anywhere else it refuses: as PID 1 it mounts file systems, loads
// kernel modules and powers the machine off. The one exception is the
// agent starting itself as a workspace mount's relay process
// (vfsmount.RelayArg).
package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sbx-dev/sbx/internal/guest"
	"github.com/sbx-dev/sbx/internal/guest/initsys"
	"github.com/sbx-dev/sbx/internal/guest/vfsmount"
)

func main() {
	start := time.Now()
	// The agent starts itself again as each workspace mount's relay
	// process (package guest/vfsmount).
	if len(os.Args) > 1 && os.Args[1] == vfsmount.RelayArg {
		os.Exit(vfsmount.RunRelay())
	}
	os.Exit(run(os.Getpid(), os.Stdout, os.Stderr, start))
}

func run(pid int, stdout, stderr io.Writer, start time.Time) int {
	if pid != 1 {
		fmt.Fprintln(stderr, "sbx-guest: this is the sbx guest agent; it runs only as PID 1 (/init) inside an sbx guest")
		return 2
	}
	guest.Init(guest.Options{Root: "/", Sys: initsys.Linux(), Console: stdout, Start: start, Reap: true})
	// Init returns only when powering off failed; it printed why. PID 1
	// exiting panics the kernel, which the command line (panic=-1) turns
	// into a reset.
	return 1
}
