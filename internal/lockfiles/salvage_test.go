package lockfiles

import (
	"bytes"
	"strings"
	"testing"
)

// conflict joins two versions of a lock file the way git leaves a
// conflicting merge: the lines they share, then each differing run
// between markers. Both versions must have the same number of lines
// around the runs that differ, which holds for the single-pin edits
// these tests make.
func conflict(t *testing.T, ours, theirs []byte, diff3 bool) []byte {
	t.Helper()
	a := strings.SplitAfter(string(ours), "\n")
	b := strings.SplitAfter(string(theirs), "\n")
	// Common prefix and suffix.
	p := 0
	for p < len(a) && p < len(b) && a[p] == b[p] {
		p++
	}
	s := 0
	for s < len(a)-p && s < len(b)-p && a[len(a)-1-s] == b[len(b)-1-s] {
		s++
	}
	if p == len(a) && p == len(b) {
		t.Fatal("the versions do not differ")
	}
	var out strings.Builder
	out.WriteString(strings.Join(a[:p], ""))
	out.WriteString("<<<<<<< HEAD\n")
	out.WriteString(strings.Join(a[p:len(a)-s], ""))
	if diff3 {
		out.WriteString("||||||| base\n  # the common ancestor, which is not read\n")
	}
	out.WriteString("=======\n")
	out.WriteString(strings.Join(b[p:len(b)-s], ""))
	out.WriteString(">>>>>>> topic\n")
	out.WriteString(strings.Join(a[len(a)-s:], ""))
	return []byte(out.String())
}

func TestParseConflictSaysSbxLock(t *testing.T) {
	ours := sample()
	theirs := sample()
	theirs.Images["agent"].Inputs["base"].Digest = digestC
	src := conflict(t, Marshal(ours), Marshal(theirs), false)
	_, diags := Parse(src, FileName)
	if !diags.HasErrors() {
		t.Fatal("a lock with conflict markers parses")
	}
	if len(diags) != 1 || !strings.Contains(diags[0].Summary, "merge conflicts") || !strings.Contains(diags[0].Summary, "run sbx lock") {
		t.Errorf("diagnostics do not say that sbx lock rebuilds the conflicted lock: %v", diags)
	}
	if diags[0].Subject == nil || diags[0].Subject.Start.Line != HasConflictMarkers(src) {
		t.Errorf("diagnostic does not point at the first marker (line %d): %v", HasConflictMarkers(src), diags[0].Subject)
	}

	// Any other error ends with the same remedy.
	broken := bytes.Replace(Marshal(ours), []byte(`kind     = "oci"`), []byte(`kind     = oci`), 1)
	_, diags = Parse(broken, FileName)
	if !diags.HasErrors() || !strings.Contains(diags[len(diags)-1].Summary, "run sbx lock to rebuild it") {
		t.Errorf("the errors of a broken lock do not end with the remedy: %v", diags)
	}
}

func TestSalvageConflict(t *testing.T) {
	for _, diff3 := range []bool{false, true} {
		ours := sample()
		theirs := sample()
		// Both sides moved the base (a conflict), and the other side
		// added a pin and changed the hash.
		ours.Images["agent"].Inputs["base"].Digest = digestA
		theirs.Images["agent"].Inputs["base"].Digest = digestC
		theirs.Images["agent"].Inputs["artifact.zz"] = &Pin{Source: "file:./zz", Kind: "file", SHA256: hexD}
		theirs.Images["agent"].InputHash = digestB
		src := conflict(t, Marshal(ours), Marshal(theirs), diff3)
		if HasConflictMarkers(src) == 0 {
			t.Fatal("no markers in the test input")
		}

		s := Salvage(src, FileName)
		if s.MarkerLine == 0 {
			t.Error("Salvage does not report the markers")
		}
		got := s.Lock.Images["agent"]
		if got == nil {
			t.Fatalf("image agent lost: %+v", s)
		}
		if len(s.Conflicts) != 1 || s.Conflicts[0].Key != "base" || len(s.Conflicts[0].Candidates) != 2 {
			t.Fatalf("conflicts = %+v, want base with two candidates", s.Conflicts)
		}
		if c := s.Conflicts[0].Candidates; c[0].Pin.Digest != digestA || c[1].Pin.Digest != digestC || c[0].Platform != "linux/amd64" {
			t.Errorf("candidates in the wrong order or without their platform: %+v %+v", c[0], c[1])
		}
		if _, ok := got.Inputs["base"]; ok {
			t.Error("a conflicting pin is in the salvaged lock")
		}
		if p := got.Inputs["artifact.zz"]; p == nil || p.SHA256 != hexD {
			t.Errorf("the pin only one side added is lost: %+v", p)
		}
		if p := got.Inputs["artifact.claude"]; !p.Equal(sample().Images["agent"].Inputs["artifact.claude"]) {
			t.Errorf("a pin both sides share is lost: %+v", p)
		}
		if got.InputHash != "" || len(got.Outputs) != 0 {
			t.Errorf("input hash %q and outputs %v kept although the sides disagree", got.InputHash, got.Outputs)
		}
		if !s.Lock.Images["bare"].Equal(sample().Images["bare"]) {
			t.Errorf("untouched image changed: %+v", s.Lock.Images["bare"])
		}
		if len(s.Dropped) != 0 {
			t.Errorf("dropped %v", s.Dropped)
		}
	}
}

func TestSalvageBrokenBlocks(t *testing.T) {
	src := Marshal(sample())
	// Break one pin's syntax and another's hash, and cut the file short
	// inside the last image.
	src = bytes.Replace(src, []byte(`kind   = "url"
    sha256 = "`+hexD), []byte(`kind   = url url
    sha256 = "`+hexD), 1)
	src = bytes.Replace(src, []byte(`sha256 = "`+hexE+`"
  }

  input "artifact.tool"`), []byte(`sha256 = "not-a-hash"
  }

  input "artifact.tool"`), 1)
	src = append(src, []byte("image \"cut\" {\n  platform = \"linux/amd64\"\n  input \"base\" {\n")...)

	s := Salvage(src, FileName)
	got := s.Lock.Images["agent"]
	if got == nil {
		t.Fatalf("image agent lost; dropped %v", s.Dropped)
	}
	want := sample().Images["agent"]
	for key, p := range want.Inputs {
		switch key {
		case "artifact.moltnet", "artifact.odd":
			if got.Inputs[key] != nil {
				t.Errorf("broken pin %s kept: %+v", key, got.Inputs[key])
			}
		default:
			if !got.Inputs[key].Equal(p) {
				t.Errorf("readable pin %s lost: %+v", key, got.Inputs[key])
			}
		}
	}
	if got.Platform != "linux/amd64" {
		t.Errorf("platform %q", got.Platform)
	}
	if s.Lock.Images["bare"] == nil {
		t.Error("image bare lost")
	}
	dropped := strings.Join(s.Dropped, "\n")
	for _, want := range []string{"artifact.moltnet", "artifact.odd"} {
		if !strings.Contains(dropped, want) {
			t.Errorf("Dropped does not name %s:\n%s", want, dropped)
		}
	}
	if len(s.Conflicts) != 0 || s.MarkerLine != 0 {
		t.Errorf("conflicts %v, marker line %d in a file without markers", s.Conflicts, s.MarkerLine)
	}
}
