package command

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sbx-dev/sbx/internal/atomicfile"

	udiff "github.com/aymanbagabas/go-udiff"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/lang"
)

const fmtUsage = `
Usage: sbx fmt [options] [TARGET...]

  Rewrite spec files (*.hcl) in the canonical format. A TARGET is a file, a
  directory (its *.hcl files; with -recursive, also those below it) or "-"
  to format standard input to standard output. No TARGET means the current
  directory. The lock file (sbx.lock.hcl) is machine-written and skipped.

  Files with syntax errors are reported and left untouched.

Options:

  -check              Write nothing; exit with status 3 if any file is not
                      formatted (and list it), 0 if all are. Implies
                      -write=false.
  -diff               Print a unified diff of each change.
  -list=false         Do not print the names of files that change.
  -write=false        Do not rewrite files (default true).
  -recursive          Also format files in subdirectories.
  -no-color           Print diagnostics without colour.

Exit status: 0 done (or, with -check, nothing to change), 1 an error,
3 -check found files that need formatting.
`

type fmtArgs struct {
	targets   []string
	check     bool
	diff      bool
	list      bool
	write     bool
	recursive bool
	noColor   bool
}

func runFmt(_ context.Context, env *Env, args []string) int {
	a := fmtArgs{list: true, write: true}
	flags := newFlagSet("fmt")
	flags.BoolVar(&a.check, "check", false, "")
	flags.BoolVar(&a.diff, "diff", false, "")
	flags.BoolVar(&a.list, "list", true, "")
	flags.BoolVar(&a.write, "write", true, "")
	flags.BoolVar(&a.recursive, "recursive", false, "")
	flags.BoolVar(&a.noColor, "no-color", false, "")
	pos, code, ok := parseArgs(env, flags, fmtUsage, args)
	if !ok {
		return code
	}
	a.targets = pos
	if len(a.targets) == 0 {
		a.targets = []string{"."}
	}
	if a.check {
		a.write = false
	}
	v := newView(env, a.noColor)

	if len(a.targets) == 1 && a.targets[0] == "-" {
		return fmtStdin(env, v, a)
	}

	files, err := fmtFiles(a.targets, a.recursive)
	if err != nil {
		v.errorf("%v", err)
		return ExitError
	}
	failed, changed := false, false
	for _, name := range files {
		c, err := fmtFile(env, v, a, name)
		if err != nil {
			failed = true
			continue
		}
		changed = changed || c
	}
	switch {
	case failed:
		return ExitError
	case a.check && changed:
		return ExitUnformatted
	}
	return ExitOK
}

// fmtFiles expands targets into the files to format, sorted, without
// duplicates. Files named explicitly are formatted whatever their
// extension; directories contribute their *.hcl files except the lock file.
func fmtFiles(targets []string, recursive bool) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, t := range targets {
		if t == "-" {
			return nil, fmt.Errorf(`"-" (standard input) cannot be combined with other targets`)
		}
		info, err := os.Stat(t)
		if err != nil {
			return nil, fmt.Errorf("fmt target %s: %w", t, unwrapPathError(err))
		}
		if !info.IsDir() {
			add(t)
			continue
		}
		var found []string
		err = filepath.WalkDir(t, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if p != t && (!recursive || strings.HasPrefix(d.Name(), ".")) {
					return filepath.SkipDir
				}
				return nil
			}
			if filepath.Ext(p) == ".hcl" && d.Name() != lockfiles.FileName && d.Type().IsRegular() {
				found = append(found, p)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("fmt target %s: %w", t, err)
		}
		sort.Strings(found)
		for _, p := range found {
			add(p)
		}
	}
	return out, nil
}

// fmtFile formats one file and reports whether it changed (or, with
// -write=false, would change). Errors are printed before returning.
func fmtFile(env *Env, v *view, a fmtArgs, name string) (bool, error) {
	// Through lang's reader, as Load reads spec files: a named pipe, a
	// device or a link out of the file's directory is refused, and the
	// file is size-capped. fmt runs on checkouts too.
	src, err := lang.ReadFile(filepath.Dir(name), filepath.Base(name))
	if err != nil {
		v.errorf("Cannot read a spec file: %v", err)
		return false, err
	}
	out, err := formatSource(v, name, src)
	if err != nil {
		return false, err
	}
	if bytes.Equal(src, out) {
		return false, nil
	}
	if a.list {
		fmt.Fprintln(env.Stdout, name)
	}
	if a.diff {
		fmt.Fprint(env.Stdout, udiff.Unified("a/"+filepath.ToSlash(name), "b/"+filepath.ToSlash(name), string(src), string(out)))
	}
	if a.write {
		if err := writeFileAtomic(name, out); err != nil {
			v.errorf("Cannot write %s: %v", name, err)
			return true, err
		}
	}
	return true, nil
}

func fmtStdin(env *Env, v *view, a fmtArgs) int {
	src, err := io.ReadAll(env.Stdin)
	if err != nil {
		v.errorf("Cannot read standard input: %v", err)
		return ExitError
	}
	out, err := formatSource(v, "<stdin>", src)
	if err != nil {
		return ExitError
	}
	changed := !bytes.Equal(src, out)
	switch {
	case a.diff:
		if changed {
			fmt.Fprint(env.Stdout, udiff.Unified("a/<stdin>", "b/<stdin>", string(src), string(out)))
		}
	case !a.check:
		env.Stdout.Write(out)
	}
	if a.check && changed {
		return ExitUnformatted
	}
	return ExitOK
}

// formatSource checks that src parses (formatting broken syntax would
// reshuffle it unpredictably) and returns it formatted.
func formatSource(v *view, name string, src []byte) ([]byte, error) {
	f, diags := hclsyntax.ParseConfig(src, name, hcl.Pos{Line: 1, Column: 1})
	if diags.HasErrors() {
		v.diagnostics(map[string]*hcl.File{name: f}, diags)
		return nil, diags
	}
	return lang.Format(src), nil
}

// writeFileAtomic replaces name with data through a temporary file in the
// same directory, keeping the file's permissions.
func writeFileAtomic(name string, data []byte) (err error) {
	perm := fs.FileMode(0o644)
	if info, err := os.Stat(name); err == nil {
		perm = info.Mode().Perm()
	}
	return atomicfile.WriteBytes(name, data, perm)
}

// unwrapPathError drops the *fs.PathError wrapper when the caller already
// names the path.
func unwrapPathError(err error) error {
	if pe, ok := err.(*fs.PathError); ok {
		return pe.Err
	}
	return err
}
