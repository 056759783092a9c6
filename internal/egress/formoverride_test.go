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
