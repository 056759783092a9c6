package archtest

import (
	"reflect"
	"testing"

	"github.com/sbx-dev/sbx"
	"github.com/sbx-dev/sbx/internal/fanout"
	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/pipeline"
)

// TestMirroredTypes checks that each of the Go API's own types keeps the
// fields of the internal type it is converted from, with the same
// names, kinds and JSON tags: an eval's index (written by package fanout)
// decodes into sbx.EvalRun, and a field added on one side only would be
// dropped at the boundary without a word.
func TestMirroredTypes(t *testing.T) {
	for _, tc := range []struct {
		api, internal any
	}{
		{sbx.Cmd{}, guestconn.Cmd{}},
		{sbx.PTY{}, guestconn.PTY{}},
		{sbx.ExitStatus{}, guestconn.ExitStatus{}},
		{sbx.Owner{}, guestconn.Owner{}},
		{sbx.FileInfo{}, guestconn.FileInfo{}},
		{sbx.StartOptions{}, pipeline.StartOptions{}},
		{sbx.EvalRun{}, fanout.Run{}},
		{sbx.EvalChange{}, fanout.Change{}},
		{sbx.EvalMount{}, fanout.EvalMount{}},
		{sbx.EvalCopyStats{}, fanout.CopyStats{}},
		{sbx.EvalResult{}, fanout.Result{}},
	} {
		a, in := reflect.TypeOf(tc.api), reflect.TypeOf(tc.internal)
		if d := fieldsDiffer(a, in); d != "" {
			t.Errorf("%v and %v differ: %s", a, in, d)
		}
	}
}

// fieldsDiffer compares the exported fields of two struct types: their
// order, names, JSON tags and kinds.
func fieldsDiffer(a, b reflect.Type) string {
	exported := func(t reflect.Type) []reflect.StructField {
		var out []reflect.StructField
		for f := range t.Fields() {
			if f.IsExported() {
				out = append(out, f)
			}
		}
		return out
	}
	fa, fb := exported(a), exported(b)
	for i := range max(len(fa), len(fb)) {
		switch {
		case i >= len(fa):
			return "the API type lacks " + fb[i].Name
		case i >= len(fb):
			return "the internal type lacks " + fa[i].Name
		case fa[i].Name != fb[i].Name:
			return "field " + fa[i].Name + " where the internal type has " + fb[i].Name
		case fa[i].Tag.Get("json") != fb[i].Tag.Get("json"):
			return "field " + fa[i].Name + " has JSON tag " + fa[i].Tag.Get("json") + ", the internal one " + fb[i].Tag.Get("json")
		case fa[i].Type.Kind() != fb[i].Type.Kind():
			return "field " + fa[i].Name + " is a " + fa[i].Type.Kind().String() + ", the internal one a " + fb[i].Type.Kind().String()
		}
	}
	return ""
}
