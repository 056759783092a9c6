package egress

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestFormOverrideScanner: a _method field is found however the body is
// split into reads, and the read that would complete it fails; ordinary
// form bodies pass through unchanged.
func TestFormOverrideScanner(t *testing.T) {
	part := func(disp, v string) string {
		return "--b\r\nContent-Disposition: form-data; " + disp + "\r\n\r\n" + v + "\r\n"
	}
	for body, want := range map[string]bool{
		"_method=DELETE":                           true,
		"a=1&_method=DELETE":                       true,
		"a=1;_method=DELETE":                       true,
		"a=1&_method":                              false, // empty: overrides nothing
		"a=1&_method&b=2":                          true,
		"a=1&_METHOD=x":                            true,
		"a=1&%5Fmethod=x":                          true,
		"a=1&%255Fmethod=x":                        true,
		"a=1&+_method=x":                           true,
		"a=1&.method=x":                            true,
		"a=1&_method[]=x":                          true,
		strings.Repeat("+", 20000) + "_method=x":   true,
		part(`name="_method"`, "DELETE"):           true,
		part(`NAME="_Method"`, "DELETE"):           true,
		part(`name=_method`, "DELETE"):             true,
		part(`name*=UTF-8''%5Fmethod`, "DELETE"):   true,
		part(`name="_method`, "DELETE"):            true, // does not parse, mentions method
		"a=1&b=2":                                  false,
		"a=_method":                                false,
		"a=1&x_method=2":                           false,
		"":                                         false,
		strings.Repeat("x", 20000) + "=1":          false,
		part(`name="a"; filename="_method"`, "x"):  false,
		part(`name="f"`, "Content-Type: _method"):  false,
		part(`name="f"`, strings.Repeat("y", 1e5)): false,
	} {
		for _, split := range []bool{false, true} {
			var src io.Reader = strings.NewReader(body)
			if split {
				src = iotest.OneByteReader(src)
			}
			s := newFormOverrideScanner(io.NopCloser(src), "refused by egress.x")
			got, err := io.ReadAll(s)
			var fo *formOverrideError
			switch {
			case want && !errors.As(err, &fo):
				t.Errorf("%.60q (split %v): read %d bytes, err %v; want a refusal", body, split, len(got), err)
			case want && len(got) >= len(body):
				t.Errorf("%.60q (split %v): the whole body passed before the refusal", body, split)
			case !want && (err != nil || string(got) != body):
				t.Errorf("%.60q (split %v): err %v, %d of %d bytes", body, split, err, len(got), len(body))
			}
		}
	}
}

// scanAll reads body through a formOverrideScanner in reads of at most
// chunk bytes and reports whether it was refused.
func scanAll(body string, chunk int) bool {
	var src io.Reader = strings.NewReader(body)
	if chunk > 0 {
		src = &chunkReader{r: src, n: chunk}
	}
	_, err := io.ReadAll(newFormOverrideScanner(io.NopCloser(src), "x"))
	var fo *formOverrideError
	return errors.As(err, &fo)
}

type chunkReader struct {
	r io.Reader
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(p) > c.n {
		p = p[:c.n]
	}
	return c.r.Read(p)
}

// FuzzFormOverrideScanner: the decision does not depend on how the body
// is split into reads, and a body that passes holds no URL-encoded field
// that a server reads as _method.
func FuzzFormOverrideScanner(f *testing.F) {
	for _, s := range []string{"a=1&_method=DELETE", "%5Fmethod=x", "a=1;_METHOD=x", "x=_method", "+_method=1&",
		"--b\r\nContent-Disposition: form-data; name=\"_method\"\r\n\r\nDELETE\r\n--b--\r\n", "a&b&c"} {
		f.Add(s, uint8(1))
		f.Add(s, uint8(7))
	}
	f.Fuzz(func(t *testing.T, body string, chunk uint8) {
		whole := scanAll(body, 0)
		if split := scanAll(body, int(chunk%16)+1); split != whole {
			t.Fatalf("%q: refused %v whole, %v in reads of %d", body, whole, split, chunk%16+1)
		}
		if whole {
			return
		}
		fields := strings.FieldsFunc(body, func(r rune) bool { return r == '&' || r == ';' })
		for i, kv := range fields {
			name, _, hasValue := strings.Cut(kv, "=")
			last := i == len(fields)-1 && !strings.HasSuffix(body, kv+"&") && !strings.HasSuffix(body, kv+";")
			if len(name) < maxFieldName && (hasValue || !last) && isMethodParam(name) {
				t.Fatalf("%q passed, but its field %q reads as _method", body, name)
			}
		}
	})
}
