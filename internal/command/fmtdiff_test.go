package command

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestFmtDiffLineNumbers checks that every hunk of fmt -diff points at
// its lines on both sides: the old side's lines (context and removed)
// are in the file at the old start, the new side's (context and added)
// in the formatted file at the new start. A file with three blocks far
// apart gives three hunks, each joining two changed lines around one
// that is not (go-udiff before v0.4.2 left such lines out of the later
// hunks' new starts).
func TestFmtDiffLineNumbers(t *testing.T) {
	var src strings.Builder
	for i, name := range []string{"a", "b", "c"} {
		fmt.Fprintf(&src, "image %q {\n    platform = \"linux/amd64\"\n  # unchanged\n    base = \"alpine:3.23\"\n}\n", name)
		for j := range 10 + 5*i {
			fmt.Fprintf(&src, "# note %d.%d\n", i, j)
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "main.hcl")
	writeFile(t, path, src.String())
	f := &fixture{t: t}
	diff := f.mustRun(ExitUnformatted, "fmt", "-check", "-diff", dir).stdout
	f.mustRun(ExitOK, "fmt", dir)
	oldLines := strings.Split(src.String(), "\n")
	newLines := strings.Split(string(readFile(t, path)), "\n")

	hunks := strings.Split(diff, "\n@@ ")[1:]
	if len(hunks) != 3 {
		t.Fatalf("fmt -diff printed %d hunks, want 3:\n%s", len(hunks), diff)
	}
	for _, h := range hunks {
		header, body, _ := strings.Cut(h, "\n")
		var oldStart, oldCount, newStart, newCount int
		if _, err := fmt.Sscanf(header, "-%d,%d +%d,%d @@", &oldStart, &oldCount, &newStart, &newCount); err != nil {
			t.Fatalf("hunk header %q: %v", header, err)
		}
		var oldSide, newSide []string
		for _, l := range strings.Split(strings.TrimSuffix(body, "\n"), "\n") {
			switch {
			case strings.HasPrefix(l, " "):
				oldSide, newSide = append(oldSide, l[1:]), append(newSide, l[1:])
			case strings.HasPrefix(l, "-"):
				oldSide = append(oldSide, l[1:])
			case strings.HasPrefix(l, "+"):
				newSide = append(newSide, l[1:])
			}
		}
		for _, side := range []struct {
			name         string
			file, lines  []string
			start, count int
		}{{"old", oldLines, oldSide, oldStart, oldCount}, {"new", newLines, newSide, newStart, newCount}} {
			if len(side.lines) != side.count || side.start < 1 || side.start-1+side.count > len(side.file) {
				t.Errorf("hunk %q: %d %s lines, out of the file's %d lines", header, len(side.lines), side.name, len(side.file))
				continue
			}
			if got := side.file[side.start-1 : side.start-1+side.count]; strings.Join(got, "\n") != strings.Join(side.lines, "\n") {
				t.Errorf("hunk %q: the %s file's lines %d-%d are\n%s\nnot the hunk's\n%s", header, side.name,
					side.start, side.start+side.count-1, strings.Join(got, "\n"), strings.Join(side.lines, "\n"))
			}
		}
	}
}
