package lockfiles

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/sbx-dev/sbx/internal/atomicfile"

	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/sbx-dev/sbx/addrs"
	"github.com/zclconf/go-cty/cty"
)

// header opens every lock file.
const header = `# This file is maintained automatically by "sbx lock".
# Manual edits may be lost in future updates.
`

// pinAttrs is the fixed order of a pin's attributes in the file.
var pinAttrs = []string{"source", "kind", "digest", "manifest", "version", "integrity", "architecture", "sha256", "size", "filename"}

// field returns a pointer to the Pin field written as attribute name.
func (p *Pin) field(name string) *string {
	switch name {
	case "source":
		return &p.Source
	case "kind":
		return &p.Kind
	case "digest":
		return &p.Digest
	case "manifest":
		return &p.Manifest
	case "version":
		return &p.Version
	case "integrity":
		return &p.Integrity
	case "sha256":
		return &p.SHA256
	case "filename":
		return &p.Filename
	case "architecture":
		return &p.Architecture
	case "size":
		return &p.Size
	}
	return nil
}

// Marshal renders l in canonical form: the header comment, images sorted by
// name, each with platform and input_hash, its inputs sorted by key and its
// outputs; attributes in a fixed order, empty values omitted, `=` aligned
// the way hclwrite.Format aligns them. Equal locks marshal to equal bytes,
// and Parse(Marshal(l)) yields a lock Equal to l when l is valid (Write
// checks that before it touches the disk). A nil or empty lock renders as
// the header alone.
func Marshal(l *Lock) []byte {
	var b bytes.Buffer
	b.WriteString(header)
	if l != nil {
		for _, name := range sortedKeys(l.Images) {
			img := l.Images[name]
			if img == nil {
				continue
			}
			b.WriteString("\n")
			writeImage(&b, name, img)
		}
	}
	return hclwrite.Format(b.Bytes())
}

func writeImage(b *bytes.Buffer, name string, img *Image) {
	fmt.Fprintf(b, "image %s {\n", quote(name))
	wroteAttr := false
	for _, a := range [][2]string{{"platform", img.Platform}, {"input_hash", img.InputHash}, {"provision_hash", img.ProvisionHash}} {
		if a[1] != "" {
			fmt.Fprintf(b, "%s = %s\n", a[0], quote(a[1]))
			wroteAttr = true
		}
	}
	first := !wroteAttr
	for _, key := range sortedKeys(img.Inputs) {
		pin := img.Inputs[key]
		if pin == nil {
			continue
		}
		if !first {
			b.WriteString("\n")
		}
		first = false
		fmt.Fprintf(b, "input %s {\n", quote(key))
		for _, attr := range pinAttrs {
			if v := *pin.field(attr); v != "" {
				fmt.Fprintf(b, "%s = %s\n", attr, quote(v))
			}
		}
		b.WriteString("}\n")
	}
	if len(img.Outputs) > 0 {
		if !first {
			b.WriteString("\n")
		}
		b.WriteString("outputs = {\n")
		for _, k := range sortedKeys(img.Outputs) {
			fmt.Fprintf(b, "%s = %s\n", objectKey(k), quote(img.Outputs[k]))
		}
		b.WriteString("}\n")
	}
	b.WriteString("}\n")
}

// quote renders s as an HCL quoted string literal, escaping template
// introducers so the value reads back verbatim.
func quote(s string) string {
	return string(hclwrite.TokensForValue(cty.StringVal(s)).Bytes())
}

// objectKey renders an object key: bare when it is an identifier (as every
// valid output name is), quoted otherwise.
func objectKey(k string) string {
	if addrs.ValidName(k) {
		return k
	}
	return quote(k)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Write renders l canonically and replaces the file at path atomically: the
// bytes go to a temporary file in the same directory, which is synced and
// then renamed over path, so a reader sees either the old file or the new
// one and a failed write leaves the old file as it was. The file's mode is
// 0644.
//
// Before writing, Write checks that the rendered bytes parse back to a lock
// equal to l, so it never writes a file Read would reject: invalid names,
// malformed hashes or unknown source kinds are errors here.
func Write(path string, l *Lock) error {
	data, err := marshalChecked(path, l)
	if err != nil {
		return err
	}
	return atomicfile.WriteBytes(path, data, 0o644)
}

// marshalChecked renders l and verifies that it reads back unchanged.
func marshalChecked(path string, l *Lock) ([]byte, error) {
	if l != nil {
		for name, img := range l.Images {
			if img == nil {
				return nil, fmt.Errorf("writing %s: image %q has no lock entry (nil)", path, name)
			}
			if img.Name != name {
				return nil, fmt.Errorf("writing %s: image %q is filed under the name %q", path, img.Name, name)
			}
			for key, pin := range img.Inputs {
				if pin == nil {
					return nil, fmt.Errorf("writing %s: image.%s: input %q has no pin (nil)", path, name, key)
				}
			}
		}
	}
	data := Marshal(l)
	back, diags := Parse(data, path)
	if diags.HasErrors() {
		return nil, fmt.Errorf("writing %s: the lock is not valid: %s", path, diags.Error())
	}
	if !back.Equal(l) {
		return nil, fmt.Errorf("writing %s: the lock does not read back unchanged (a value has characters the file cannot hold)", path)
	}
	return data, nil
}
