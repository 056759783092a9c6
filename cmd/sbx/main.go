// Command sbx compiles declarative sandbox specs: it validates and formats
// them, pins their inputs into sbx.lock.hcl, and plans changes against
// what was applied or against another revision. See package command for
// the verbs and README.md for a walkthrough.
package main

import (
	"io"
	"os"

	"github.com/sbx-dev/sbx/internal/command"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return command.Run(args, &command.Env{
		Stdin:   stdin,
		Stdout:  stdout,
		Stderr:  stderr,
		Environ: os.Environ(),
	})
}
