package lockfiles

import (
	"bytes"
	"fmt"
	"regexp"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/sbx-dev/sbx/addrs"
)

// Salvaged is what Salvage could read of a lock file that Parse refuses.
type Salvaged struct {
	// Lock holds every image entry and pin that could be read and that
	// both sides of any merge conflict agree on (or that only one side
	// has). An image's InputHash and Outputs are kept only where the
	// sides agree; `sbx lock` recomputes the hash anyway.
	Lock *Lock
	// Conflicts are the inputs the two sides of a merge conflict pin
	// differently, left out of Lock for the caller to settle against
	// the configuration.
	Conflicts []Conflict
	// Dropped says, one line each, what could not be read and was left
	// out (an unreadable block or pin, with its line).
	Dropped []string
	// MarkerLine is the line of the first git conflict marker, or 0
	// when the file has none.
	MarkerLine int
}

// Conflict is an input of an image that the two sides of a merge
// conflict pin differently.
type Conflict struct {
	Image, Key string
	// Candidates are the differing pins, the first side's first.
	Candidates []Candidate
}

// Candidate is one side's pin of a conflicting input, with the platform
// that side locks the image for (a pin holds only for its platform).
type Candidate struct {
	Platform string
	Pin      *Pin
}

// Salvage reads what it can of a lock file that Parse refuses — one left
// with git conflict markers by a merge, edited by hand or cut short — so
// that `sbx lock` can rebuild it keeping every pin that can still be
// read. It never fails; what it cannot read it reports in Dropped.
//
// Git conflict markers (lines starting with <<<<<<<, |||||||, ======= and
// >>>>>>>) split the file into two versions: the lines outside the
// conflicts with the first side of each conflict, and the same with the
// second side; a diff3 base section is left out of both. Each version is
// read leniently: the file whole if it parses, or else each top-level
// image block on its own and, within an image block that does not parse,
// each input block on its own. A pin that fails any check Parse makes
// (except canonical form) is dropped; an image whose platform cannot be
// read is dropped whole, since a pin holds only for its platform.
//
// The versions are then merged input by input: a pin both versions read
// the same (with the same platform), or that only one version has, is
// kept; an input the versions pin differently is a Conflict.
func Salvage(src []byte, filename string) *Salvaged {
	s := &Salvaged{Lock: &Lock{Images: map[string]*Image{}}}
	sides, marker := splitConflicts(src)
	s.MarkerLine = marker
	var read []map[string]*Image
	seenDrop := map[string]bool{}
	for _, side := range sides {
		imgs, dropped := salvageSide(side, filename)
		read = append(read, imgs)
		for _, d := range dropped {
			if !seenDrop[d] {
				seenDrop[d] = true
				s.Dropped = append(s.Dropped, d)
			}
		}
	}
	s.merge(read)
	return s
}

// conflictMarker matches the lines git writes around a merge conflict.
var conflictMarker = regexp.MustCompile(`^(<{7}|\|{7}|={7}|>{7})(\s|$)`)

// HasConflictMarkers returns the line of the first git conflict marker in
// src, or 0 when there is none.
func HasConflictMarkers(src []byte) int {
	for i, line := range bytes.SplitAfter(src, []byte("\n")) {
		if conflictMarker.Match(line) {
			return i + 1
		}
	}
	return 0
}

// splitConflicts returns the two versions of src that a merge conflict
// holds, with the line of its first marker; a src without markers is
// returned alone. Marker lines, and the lines a version does not hold,
// are blanked rather than removed, so every line keeps its number.
func splitConflicts(src []byte) ([][]byte, int) {
	lines := bytes.SplitAfter(src, []byte("\n"))
	first := 0
	const (
		outside = iota
		ours
		base
		theirs
	)
	var a, b bytes.Buffer
	state := outside
	blank := func(line []byte) []byte {
		if bytes.HasSuffix(line, []byte("\n")) {
			return []byte("\n")
		}
		return nil
	}
	for i, line := range lines {
		if m := conflictMarker.FindSubmatch(line); m != nil {
			if first == 0 {
				first = i + 1
			}
			switch m[1][0] {
			case '<':
				state = ours
			case '|':
				state = base
			case '=':
				state = theirs
			case '>':
				state = outside
			}
			a.Write(blank(line))
			b.Write(blank(line))
			continue
		}
		switch state {
		case outside:
			a.Write(line)
			b.Write(line)
		case ours:
			a.Write(line)
			b.Write(blank(line))
		case base:
			a.Write(blank(line))
			b.Write(blank(line))
		case theirs:
			a.Write(blank(line))
			b.Write(line)
		}
	}
	if first == 0 {
		return [][]byte{src}, 0
	}
	return [][]byte{a.Bytes(), b.Bytes()}, first
}

// salvageSide reads the image entries of one version of a lock file.
func salvageSide(src []byte, filename string) (map[string]*Image, []string) {
	imgs := map[string]*Image{}
	var dropped []string
	file, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if !diags.HasErrors() {
		body := file.Body.(*hclsyntax.Body)
		for _, attr := range sortedAttrs(body) {
			dropped = append(dropped, fmt.Sprintf("line %d: argument %q (a lock file holds only image blocks)", attr.NameRange.Start.Line, attr.Name))
		}
		for _, blk := range body.Blocks {
			dropped = append(dropped, salvageImage(imgs, blk)...)
		}
		return imgs, dropped
	}
	for _, c := range chunks(src, topLevelStart, topLevelEnd) {
		file, diags := hclsyntax.ParseConfig(c.src, filename, c.pos)
		if !diags.HasErrors() {
			for _, blk := range file.Body.(*hclsyntax.Body).Blocks {
				dropped = append(dropped, salvageImage(imgs, blk)...)
			}
			continue
		}
		dropped = append(dropped, salvageBrokenImage(imgs, c, filename)...)
	}
	return imgs, dropped
}

// salvageImage reads the image block blk into imgs leniently and returns
// what it dropped.
func salvageImage(imgs map[string]*Image, blk *hclsyntax.Block) []string {
	line := blk.TypeRange.Start.Line
	if blk.Type != "image" || len(blk.Labels) != 1 || !addrs.ValidName(blk.Labels[0]) {
		return []string{fmt.Sprintf("line %d: a %q block that is not an image entry", line, blk.Type)}
	}
	name := blk.Labels[0]
	if _, dup := imgs[name]; dup {
		return []string{fmt.Sprintf("line %d: a second entry for image %q", line, name)}
	}
	img := &Image{Name: name, Inputs: map[string]*Pin{}, Outputs: map[string]string{}}
	var dropped []string
	for _, attr := range sortedAttrs(blk.Body) {
		var d decoder
		switch attr.Name {
		case "platform":
			if v, ok := d.str(attr); ok && checkPlatform(v) == nil {
				img.Platform = v
			}
		case "input_hash":
			if v, ok := d.str(attr); ok && checkDigest(v) == nil {
				img.InputHash = v
			}
		case "outputs":
			d.outputs(attr, img.Outputs)
			if d.diags.HasErrors() {
				clear(img.Outputs)
			}
		}
	}
	if img.Platform == "" {
		return []string{fmt.Sprintf("line %d: image %q, whose platform cannot be read", line, name)}
	}
	for _, in := range blk.Body.Blocks {
		dropped = append(dropped, salvagePin(img, in)...)
	}
	imgs[name] = img
	return dropped
}

// salvagePin reads the input block in into img if it passes every check
// Parse makes, and otherwise returns what it dropped.
func salvagePin(img *Image, in *hclsyntax.Block) []string {
	line := in.TypeRange.Start.Line
	if in.Type != "input" || len(in.Labels) != 1 || checkInputKey(in.Labels[0]) != nil {
		return []string{fmt.Sprintf("line %d: a %q block of image %q that is not an input pin", line, in.Type, img.Name)}
	}
	key := in.Labels[0]
	if _, dup := img.Inputs[key]; dup {
		return []string{fmt.Sprintf("line %d: a second pin of input %q of image %q", line, key, img.Name)}
	}
	var d decoder
	p := d.pin(img.Name, key, in)
	if d.diags.HasErrors() {
		return []string{fmt.Sprintf("line %d: the pin of input %q of image %q (%s)", line, key, img.Name, d.diags[0].Detail)}
	}
	img.Inputs[key] = p
	return nil
}

// salvageBrokenImage reads what it can of an image block that does not
// parse: its platform and input_hash lines and each input block on its
// own.
func salvageBrokenImage(imgs map[string]*Image, c chunk, filename string) []string {
	head := headerRE.FindSubmatch(c.src)
	if head == nil || !addrs.ValidName(string(head[1])) {
		return []string{fmt.Sprintf("line %d: text that is not an image entry", c.pos.Line)}
	}
	name := string(head[1])
	if _, dup := imgs[name]; dup {
		return []string{fmt.Sprintf("line %d: a second entry for image %q", c.pos.Line, name)}
	}
	img := &Image{Name: name, Inputs: map[string]*Pin{}, Outputs: map[string]string{}}
	var inputs []chunk
	for _, sub := range chunks(c.src, inputStart, inputEnd) {
		sub.pos.Line += c.pos.Line - 1
		if inputStart.Match(sub.src) {
			inputs = append(inputs, sub)
			continue
		}
		for i, line := range bytes.SplitAfter(sub.src, []byte("\n")) {
			m := attrRE.FindSubmatch(line)
			if m == nil {
				continue
			}
			file, diags := hclsyntax.ParseConfig(bytes.TrimSpace(line), filename, hcl.Pos{Line: sub.pos.Line + i, Column: 1})
			if diags.HasErrors() {
				continue
			}
			attr := file.Body.(*hclsyntax.Body).Attributes[string(m[1])]
			var d decoder
			v, ok := d.str(attr)
			switch {
			case !ok:
			case attr.Name == "platform" && checkPlatform(v) == nil:
				img.Platform = v
			case attr.Name == "input_hash" && checkDigest(v) == nil:
				img.InputHash = v
			}
		}
	}
	if img.Platform == "" {
		return []string{fmt.Sprintf("line %d: image %q, whose platform cannot be read", c.pos.Line, name)}
	}
	var dropped []string
	for _, in := range inputs {
		file, diags := hclsyntax.ParseConfig(in.src, filename, in.pos)
		body, ok := file.Body.(*hclsyntax.Body)
		if diags.HasErrors() || !ok || len(body.Blocks) != 1 {
			what := "an input block"
			if m := inputLabelRE.FindSubmatch(in.src); m != nil {
				what = fmt.Sprintf("input %q", m[1])
			}
			dropped = append(dropped, fmt.Sprintf("line %d: %s of image %q, which cannot be parsed", in.pos.Line, what, name))
			continue
		}
		dropped = append(dropped, salvagePin(img, body.Blocks[0])...)
	}
	imgs[name] = img
	return dropped
}

var (
	topLevelStart = regexp.MustCompile(`^image\b`)
	topLevelEnd   = regexp.MustCompile(`^}\s*$`)
	inputStart    = regexp.MustCompile(`^\s+input\b`)
	inputEnd      = regexp.MustCompile(`^\s+}\s*$`)
	headerRE      = regexp.MustCompile(`^image\s+"([^"\n]*)"`)
	inputLabelRE  = regexp.MustCompile(`^\s+input\s+"([^"\n]*)"`)
	attrRE        = regexp.MustCompile(`^\s*(platform|input_hash)\s*=`)
)

// chunk is a run of lines of a file, with the position of its first byte.
type chunk struct {
	src []byte
	pos hcl.Pos
}

// chunks splits src into runs of lines: each line that start matches
// begins a run that ends after the next line end matches (or before the
// next start); the lines between such runs form runs of their own.
func chunks(src []byte, start, end *regexp.Regexp) []chunk {
	var out []chunk
	var cur []byte
	curPos := hcl.Pos{Line: 1, Column: 1}
	inBlock := false
	flush := func() {
		if len(bytes.TrimSpace(cur)) > 0 {
			out = append(out, chunk{src: cur, pos: curPos})
		}
		cur = nil
	}
	offset := 0
	for i, line := range bytes.SplitAfter(src, []byte("\n")) {
		if start.Match(line) {
			flush()
			curPos = hcl.Pos{Line: i + 1, Column: 1, Byte: offset}
			inBlock = true
		} else if len(cur) == 0 {
			curPos = hcl.Pos{Line: i + 1, Column: 1, Byte: offset}
		}
		cur = append(cur, line...)
		offset += len(line)
		if inBlock && end.Match(line) {
			flush()
			inBlock = false
		}
	}
	flush()
	return out
}

// merge combines the image entries read from each version of the file.
func (s *Salvaged) merge(sides []map[string]*Image) {
	names := map[string]bool{}
	for _, side := range sides {
		for n := range side {
			names[n] = true
		}
	}
	for _, name := range sortedKeys(names) {
		var present []*Image
		for _, side := range sides {
			if img := side[name]; img != nil {
				present = append(present, img)
			}
		}
		out := &Image{Name: name, Platform: present[0].Platform, Inputs: map[string]*Pin{}, Outputs: map[string]string{}}
		agree := true
		for _, img := range present[1:] {
			if img.Platform != out.Platform {
				out.Platform = ""
			}
			if img.InputHash != present[0].InputHash || !sameOutputs(img.Outputs, present[0].Outputs) {
				agree = false
			}
		}
		if agree && out.Platform != "" {
			out.InputHash = present[0].InputHash
			for k, v := range present[0].Outputs {
				out.Outputs[k] = v
			}
		}
		keys := map[string]bool{}
		for _, img := range present {
			for k := range img.Inputs {
				keys[k] = true
			}
		}
		for _, key := range sortedKeys(keys) {
			var cands []Candidate
			for _, img := range present {
				p := img.Inputs[key]
				if p == nil {
					continue
				}
				c := Candidate{Platform: img.Platform, Pin: p}
				dup := false
				for _, o := range cands {
					dup = dup || (o.Platform == c.Platform && o.Pin.Equal(c.Pin))
				}
				if !dup {
					cands = append(cands, c)
				}
			}
			if len(cands) == 1 && cands[0].Platform == out.Platform {
				out.Inputs[key] = cands[0].Pin
				continue
			}
			s.Conflicts = append(s.Conflicts, Conflict{Image: name, Key: key, Candidates: cands})
		}
		s.Lock.Images[name] = out
	}
}

func sameOutputs(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || v != w {
			return false
		}
	}
	return true
}
