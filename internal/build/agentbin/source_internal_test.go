package agentbin

import (
	"errors"
	"runtime/debug"
	"strings"
	"testing"
)

func TestBuilderFor(t *testing.T) {
	sbx := func(v string) debug.Module { return debug.Module{Path: modulePath, Version: v} }
	for _, c := range []struct {
		name    string
		bi      debug.BuildInfo
		version string
		err     string
	}{
		{name: "released sbx", bi: debug.BuildInfo{Main: sbx("v1.2.3")}, version: "v1.2.3"},
		{name: "pseudo-version", bi: debug.BuildInfo{Main: sbx("v0.0.0-20261201055300-8b5f0ba0c0de")}, version: "v0.0.0-20261201055300-8b5f0ba0c0de"},
		{name: "modified checkout", bi: debug.BuildInfo{Main: sbx("v0.0.0-20261201055300-8b5f0ba0c0de+dirty")},
			err: "the guest agent cannot be built here: sbx was built with -trimpath from a source tree (version v0.0.0-20261201055300-8b5f0ba0c0de+dirty)"},
		{name: "devel", bi: debug.BuildInfo{Main: sbx("(devel)")}, err: "not from a released version of github.com/sbx-dev/sbx"},
		{name: "a program requiring sbx", bi: debug.BuildInfo{Main: debug.Module{Path: "example.com/evals", Version: "(devel)"},
			Deps: []*debug.Module{{Path: "golang.org/x/sys", Version: "v0.50.0"}, {Path: modulePath, Version: "v1.4.0"}}}, version: "v1.4.0"},
		{name: "a program replacing sbx", bi: debug.BuildInfo{Main: debug.Module{Path: "example.com/evals", Version: "(devel)"},
			Deps: []*debug.Module{{Path: modulePath, Version: "v1.4.0", Replace: &debug.Module{Path: "../sbx"}}}},
			err: "this program (example.com/evals) was built without its source path and does not name a version of github.com/sbx-dev/sbx"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := builderFor(&c.bi)
			if b.Version != c.version || b.Dir != "" {
				t.Errorf("builderFor = %+v, want Version %q", b, c.version)
			}
			if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, ErrCannotBuild)) {
				t.Errorf("error %v, want one containing %q wrapping ErrCannotBuild", err, c.err)
			}
		})
	}
}
