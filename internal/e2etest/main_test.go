package e2etest

import (
	"context"
	"fmt"
	"log"
	"os"
	"testing"

	"github.com/sbx-dev/sbx/internal/machine/machinetest"
	"github.com/sbx-dev/sbx/internal/machine/qemu/qemutest"
)

// dir is the configuration directory of the hermetic sandbox "box" (see
// package machinetest) whose kernel and busybox packages the tests' specs
// use, and environ the environment their Options receive.
var (
	dir     string
	environ []string
)

func TestMain(m *testing.M) {
	// The suite boots real VMs: without QEMU fail, or run nothing when
	// SBX_SKIP_VM_TESTS=1, saying so.
	if _, skip, err := qemutest.Check(nil, nil); err != nil {
		fmt.Fprintln(os.Stderr, "package e2etest:", err)
		os.Exit(1)
	} else if skip != "" {
		fmt.Fprintln(os.Stderr, "package e2etest: all tests", skip)
		os.Exit(0)
	}
	work, err := os.MkdirTemp("", "sbx-e2etest-")
	if err != nil {
		log.Fatal(err)
	}
	f, err := machinetest.New(context.Background(), work)
	if err != nil {
		os.RemoveAll(work)
		log.Fatal(err)
	}
	dir, environ = f.Dir, f.Environ
	code := m.Run()
	os.RemoveAll(work)
	os.Exit(code)
}
