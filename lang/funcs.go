package lang

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// maxFileSize bounds what file() and filesha256() read: specs inline small
// files, and large inputs belong in artifact sources.
const maxFileSize = 16 << 20

// functions returns the functions available in expressions: the cty
// standard library under the names Terraform uses, plus file access
// confined to the configuration directory and a few hashing and encoding
// functions. None of them reads the environment or the network.
func (l *loader) functions() map[string]function.Function {
	if l.funcs == nil {
		l.funcs = l.newFunctions()
	}
	return l.funcs
}

func (l *loader) newFunctions() map[string]function.Function {
	return map[string]function.Function{
		"abs":             stdlib.AbsoluteFunc,
		"ceil":            stdlib.CeilFunc,
		"chomp":           stdlib.ChompFunc,
		"chunklist":       stdlib.ChunklistFunc,
		"coalesce":        coalesceFunc,
		"coalescelist":    stdlib.CoalesceListFunc,
		"compact":         stdlib.CompactFunc,
		"concat":          stdlib.ConcatFunc,
		"contains":        stdlib.ContainsFunc,
		"csvdecode":       stdlib.CSVDecodeFunc,
		"distinct":        stdlib.DistinctFunc,
		"element":         stdlib.ElementFunc,
		"flatten":         stdlib.FlattenFunc,
		"floor":           stdlib.FloorFunc,
		"format":          stdlib.FormatFunc,
		"formatlist":      stdlib.FormatListFunc,
		"indent":          stdlib.IndentFunc,
		"index":           stdlib.IndexFunc,
		"join":            stdlib.JoinFunc,
		"jsondecode":      stdlib.JSONDecodeFunc,
		"jsonencode":      stdlib.JSONEncodeFunc,
		"keys":            stdlib.KeysFunc,
		"length":          stdlib.LengthFunc,
		"log":             stdlib.LogFunc,
		"lookup":          stdlib.LookupFunc,
		"lower":           stdlib.LowerFunc,
		"max":             stdlib.MaxFunc,
		"merge":           stdlib.MergeFunc,
		"min":             stdlib.MinFunc,
		"parseint":        stdlib.ParseIntFunc,
		"pow":             stdlib.PowFunc,
		"range":           stdlib.RangeFunc,
		"regex":           stdlib.RegexFunc,
		"regexall":        stdlib.RegexAllFunc,
		"regex_replace":   stdlib.RegexReplaceFunc,
		"replace":         stdlib.ReplaceFunc,
		"reverse":         stdlib.ReverseListFunc,
		"setintersection": stdlib.SetIntersectionFunc,
		"setproduct":      stdlib.SetProductFunc,
		"setsubtract":     stdlib.SetSubtractFunc,
		"setunion":        stdlib.SetUnionFunc,
		"signum":          stdlib.SignumFunc,
		"slice":           stdlib.SliceFunc,
		"sort":            stdlib.SortFunc,
		"split":           stdlib.SplitFunc,
		"strlen":          stdlib.StrlenFunc,
		"strrev":          stdlib.ReverseFunc,
		"substr":          stdlib.SubstrFunc,
		"title":           stdlib.TitleFunc,
		"trim":            stdlib.TrimFunc,
		"trimprefix":      stdlib.TrimPrefixFunc,
		"trimspace":       stdlib.TrimSpaceFunc,
		"trimsuffix":      stdlib.TrimSuffixFunc,
		"upper":           stdlib.UpperFunc,
		"values":          stdlib.ValuesFunc,
		"zipmap":          stdlib.ZipmapFunc,

		"tobool":   stdlib.MakeToFunc(cty.Bool),
		"tolist":   stdlib.MakeToFunc(cty.List(cty.DynamicPseudoType)),
		"tomap":    stdlib.MakeToFunc(cty.Map(cty.DynamicPseudoType)),
		"tonumber": stdlib.MakeToFunc(cty.Number),
		"toset":    stdlib.MakeToFunc(cty.Set(cty.DynamicPseudoType)),
		"tostring": stdlib.MakeToFunc(cty.String),

		"try": tryfunc.TryFunc,
		"can": tryfunc.CanFunc,

		"startswith":   stringPredicate(strings.HasPrefix),
		"endswith":     stringPredicate(strings.HasSuffix),
		"sha256":       stringFunc(func(s string) (string, error) { return sha256Hex([]byte(s)), nil }),
		"base64encode": stringFunc(func(s string) (string, error) { return base64.StdEncoding.EncodeToString([]byte(s)), nil }),
		"base64decode": stringFunc(base64Decode),
		"file":         l.fileFunc(false),
		"filesha256":   l.fileFunc(true),
		"fileexists":   l.fileExistsFunc(),
	}
}

// coalesceFunc is coalesce as Terraform defines it: the first argument
// that is neither null nor an empty string.
var coalesceFunc = function.New(&function.Spec{
	VarParam: &function.Parameter{
		Name:             "vals",
		Type:             cty.DynamicPseudoType,
		AllowUnknown:     true,
		AllowDynamicType: true,
		AllowNull:        true,
	},
	Type: func(args []cty.Value) (cty.Type, error) {
		return stdlib.CoalesceFunc.ReturnType(argTypes(args))
	},
	Impl: func(args []cty.Value, retType cty.Type) (cty.Value, error) {
		var kept []cty.Value
		for _, a := range args {
			if a.IsKnown() && !a.IsNull() && a.Type() == cty.String && a.AsString() == "" {
				continue
			}
			kept = append(kept, a)
		}
		if len(kept) == 0 {
			return cty.NilVal, fmt.Errorf("no non-null, non-empty-string arguments")
		}
		v, err := stdlib.CoalesceFunc.Call(kept)
		if err != nil {
			return cty.NilVal, err
		}
		return convert.Convert(v, retType)
	},
})

func argTypes(args []cty.Value) []cty.Type {
	tys := make([]cty.Type, len(args))
	for i, a := range args {
		tys[i] = a.Type()
	}
	return tys
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func base64Decode(s string) (string, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return "", fmt.Errorf("invalid base64 data: %v", err)
	}
	if !utf8.Valid(b) {
		return "", fmt.Errorf("the decoded data is not valid UTF-8")
	}
	return string(b), nil
}

// stringFunc makes a function of one string to one string.
func stringFunc(f func(string) (string, error)) function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{{Name: "str", Type: cty.String}},
		Type:   function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			s, err := f(args[0].AsString())
			if err != nil {
				return cty.UnknownVal(cty.String), err
			}
			return cty.StringVal(s), nil
		},
	})
}

func stringPredicate(f func(s, affix string) bool) function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{{Name: "str", Type: cty.String}, {Name: "affix", Type: cty.String}},
		Type:   function.StaticReturnType(cty.Bool),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			return cty.BoolVal(f(args[0].AsString(), args[1].AsString())), nil
		},
	})
}

// fileFunc makes file(path), or filesha256(path) when hash is set. Paths
// are relative to the configuration directory and may not leave it, so a
// configuration stays self-contained: absolute paths, ".." out of the
// directory and symbolic links pointing outside are refused.
func (l *loader) fileFunc(hash bool) function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{{Name: "path", Type: cty.String}},
		Type:   function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			b, err := l.readConfigFile(args[0].AsString())
			if err != nil {
				return cty.UnknownVal(cty.String), err
			}
			if hash {
				return cty.StringVal(sha256Hex(b)), nil
			}
			if !utf8.Valid(b) {
				return cty.UnknownVal(cty.String), fmt.Errorf("%s is not valid UTF-8 text; use an artifact with a file: source for binary files", args[0].AsString())
			}
			return cty.StringVal(string(b)), nil
		},
	})
}

func (l *loader) fileExistsFunc() function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{{Name: "path", Type: cty.String}},
		Type:   function.StaticReturnType(cty.Bool),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			p, err := l.configPath(args[0].AsString())
			if err != nil {
				return cty.UnknownVal(cty.Bool), err
			}
			fi, err := l.root.Stat(p)
			if err != nil {
				return cty.False, nil
			}
			return cty.BoolVal(fi.Mode().IsRegular()), nil
		},
	})
}

func (l *loader) configPath(p string) (string, error) {
	if l.root == nil {
		return "", fmt.Errorf("the configuration directory %s cannot be opened", l.dir)
	}
	if p == "" {
		return "", fmt.Errorf("empty path")
	}
	if filepath.IsAbs(p) {
		return "", fmt.Errorf("path %q is absolute; files are named relative to the configuration directory", p)
	}
	c := filepath.Clean(p)
	if c == ".." || strings.HasPrefix(c, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("path %q leads outside the configuration directory", p)
	}
	return c, nil
}

func (l *loader) readConfigFile(p string) ([]byte, error) {
	cp, err := l.configPath(p)
	if err != nil {
		return nil, err
	}
	f, err := l.root.OpenFile(cp, readOnlyFlags, 0)
	if err != nil {
		return nil, fmt.Errorf("cannot read %q in the configuration directory: %v", p, pathErrText(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("cannot read %q: %v", p, pathErrText(err))
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%q is not a regular file", p)
	}
	if fi.Size() > maxFileSize {
		return nil, fmt.Errorf("%q is larger than %s; use an artifact for large files", p, FormatSize(maxFileSize))
	}
	b, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read %q: %v", p, pathErrText(err))
	}
	if len(b) > maxFileSize {
		return nil, fmt.Errorf("%q is larger than %s; use an artifact for large files", p, FormatSize(maxFileSize))
	}
	return b, nil
}

// pathErrText drops the operation and path from a *fs.PathError, which the
// message already names, and explains an escape from the directory.
func pathErrText(err error) error {
	if pe, ok := err.(*fs.PathError); ok {
		err = pe.Err
	}
	if strings.Contains(err.Error(), "escapes from parent") {
		return fmt.Errorf("it leads outside the configuration directory (through a symbolic link)")
	}
	return err
}
