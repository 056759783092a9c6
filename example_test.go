package sbx_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"os"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx"
	"github.com/sbx-dev/sbx/internal/machine/machinetest"
	"github.com/sbx-dev/sbx/internal/machine/qemu/qemutest"
)

// dir is the configuration directory of the example: a hermetic sandbox
// "box" (see package machinetest) whose environment Options receive.
var (
	dir     string
	environ []string
)

func TestMain(m *testing.M) {
	// The example boots a real VM, and an example cannot skip: without
	// QEMU fail, or run nothing when SBX_SKIP_VM_TESTS=1, saying so.
	if _, skip, err := qemutest.Check(nil, nil); err != nil {
		fmt.Fprintln(os.Stderr, "package sbx:", err)
		os.Exit(1)
	} else if skip != "" {
		fmt.Fprintln(os.Stderr, "package sbx: all tests", skip)
		os.Exit(0)
	}
	work, err := os.MkdirTemp("", "sbx-example-")
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

// An eval runner loads the specs, starts the sandbox, runs a command in
// it and stops it.
func Example() {
	ctx := context.Background()
	cfg, err := sbx.Load(dir, sbx.Options{Environ: environ})
	if err != nil {
		log.Fatal(err)
	}
	sb, err := sbx.Start(ctx, cfg, "box", sbx.StartOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Stop(context.Background())

	var out bytes.Buffer
	st, err := sb.Exec(ctx, sbx.Cmd{
		Args:   []string{"sh", "-c", `id -un; wc -c; echo "$TASK"; exit 3`},
		Env:    []string{"TASK=task-1"},
		Stdin:  strings.NewReader("generated code\n"),
		Stdout: &out,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(out.String())
	fmt.Println("exit", st.Code)
	// Output:
	// agent
	// 15
	// task-1
	// exit 3
}
