package lang

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hashicorp/hcl/v2"
)

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		err  string // substring of the error; empty for success
	}{
		{in: "0", want: 0},
		{in: "1048576", want: 1 << 20},
		{in: "4096B", want: 4096},
		{in: "1KiB", want: 1024},
		{in: "512MiB", want: 512 << 20},
		{in: "4GiB", want: 4 << 30},
		{in: "2TiB", want: 2 << 40},
		{in: "64 MiB", want: 64 << 20},
		{in: " 1GiB ", want: 1 << 30},
		{in: "8388607TiB", want: 8388607 << 40},
		{in: "8388608TiB", err: "too large"},
		{in: "99999999999999999999", err: "too large"},
		{in: "", err: "empty"},
		{in: "GiB", err: "whole number"},
		{in: "-1GiB", err: "whole number"},
		{in: "1.5GiB", err: "not a whole number"},
		{in: "4GB", err: `ambiguous unit "GB"; write "4GiB"`},
		{in: "4G", err: `write "4GiB"`},
		{in: "4gib", err: "ambiguous"},
		{in: "4k", err: `write "4KiB"`},
		{in: "4 parsecs", err: "unknown unit"},
	} {
		got, err := ParseSize(tc.in)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("ParseSize(%q): %v", tc.in, err)
		case tc.err != "" && err == nil:
			t.Errorf("ParseSize(%q) = %d, want error containing %q", tc.in, got, tc.err)
		case tc.err != "" && !strings.Contains(err.Error(), tc.err):
			t.Errorf("ParseSize(%q) error %q, want it to contain %q", tc.in, err, tc.err)
		case tc.err == "" && got != tc.want:
			t.Errorf("ParseSize(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestFormatSizeRoundTrip(t *testing.T) {
	for _, n := range []int64{0, 1, 1023, 1024, 1536, 64 << 20, 4 << 30, 3 << 40, 5<<40 + 1} {
		s := FormatSize(n)
		back, err := ParseSize(s)
		if err != nil || back != n {
			t.Errorf("FormatSize(%d) = %q, which parses to %d, %v", n, s, back, err)
		}
	}
	if got := FormatSize(4 << 30); got != "4GiB" {
		t.Errorf("FormatSize(4GiB) = %q", got)
	}
	if got := FormatSize(1536); got != "1536B" {
		t.Errorf("FormatSize(1536) = %q, want 1536B", got)
	}
}

func TestParseMode(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint32
		err  string
	}{
		{in: "0755", want: 0o755},
		{in: "755", want: 0o755},
		{in: "0644", want: 0o644},
		{in: "0", want: 0},
		{in: "4755", want: 0o4755},
		{in: "07777", want: 0o7777},
		{in: "0o600", want: 0o600},
		{in: "000644", want: 0o644},
		{in: "", err: "empty"},
		{in: "0o", err: "empty"},
		{in: "0999", err: "not octal"},
		{in: "rwxr-xr-x", err: "not octal"},
		{in: "-755", err: "not octal"},
		{in: "0x1ed", err: "not octal"},
		{in: "10000", err: "larger than 07777"},
		{in: "777777777777777777777777", err: "larger than 07777"},
	} {
		got, err := ParseMode(tc.in)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("ParseMode(%q): %v", tc.in, err)
		case tc.err != "" && err == nil:
			t.Errorf("ParseMode(%q) = %o, want error containing %q", tc.in, got, tc.err)
		case tc.err != "" && !strings.Contains(err.Error(), tc.err):
			t.Errorf("ParseMode(%q) error %q, want it to contain %q", tc.in, err, tc.err)
		case tc.err == "" && got != tc.want:
			t.Errorf("ParseMode(%q) = %o, want %o", tc.in, got, tc.want)
		}
	}
}

func TestParseSource(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	for _, tc := range []struct {
		in   string
		want Source // Raw and Range are checked separately
		err  string
	}{
		{in: "alpine:3.23", want: Source{Kind: SourceOCI, Ref: "alpine:3.23"}},
		{in: "alpine:3.23", want: Source{Kind: SourceOCI, Ref: "alpine:3.23"}},
		{in: "registry.example.com/org/img@" + digest, want: Source{Kind: SourceOCI, Ref: "registry.example.com/org/img@" + digest}},
		{in: "registry.example.com/org/img:v1@" + digest, want: Source{Kind: SourceOCI, Ref: "registry.example.com/org/img:v1@" + digest}},
		{in: "localhost:5000/img:dev", want: Source{Kind: SourceOCI, Ref: "localhost:5000/img:dev"}},
		{in: "oci:alpine:3.23", want: Source{Kind: SourceOCI, Ref: "alpine:3.23"}},
		{in: "alpine", err: "no tag or digest"},
		{in: "localhost:5000/img", err: "no tag or digest"},
		{in: "oci:", err: "empty OCI reference"},
		{in: "Alpine:3.23", err: "not a valid OCI image reference"},
		{in: "alpine:3.23@sha256:abc", err: "not a valid OCI image reference"},

		{in: "oci-layout:./layout", want: Source{Kind: SourceOCILayout, Ref: "layout"}},
		{in: "oci-layout:./build/layout:v1", want: Source{Kind: SourceOCILayout, Ref: "build/layout", Version: "v1"}},
		{in: "oci-layout:/abs/dir@" + digest, want: Source{Kind: SourceOCILayout, Ref: "/abs/dir", Version: digest}},
		{in: "oci-layout:../x.y/layout", want: Source{Kind: SourceOCILayout, Ref: "../x.y/layout"}},
		{in: "oci-layout:", err: "names no directory"},
		{in: "oci-layout:dir@sha256:short", err: "64 lower-case hex"},
		{in: "oci-layout:dir:bad tag", err: "not a valid tag"},

		{in: "npm:left-pad@1.3.0", want: Source{Kind: SourceNPM, Ref: "left-pad", Version: "1.3.0"}},
		{in: "npm:@anthropic-ai/claude-code-linux-x64-musl@2.1.3", want: Source{Kind: SourceNPM, Ref: "@anthropic-ai/claude-code-linux-x64-musl", Version: "2.1.3"}},
		{in: "npm:@openai/codex@0.171.0-linux-x64", want: Source{Kind: SourceNPM, Ref: "@openai/codex", Version: "0.171.0-linux-x64"}},
		{in: "npm:typescript@^5.4", want: Source{Kind: SourceNPM, Ref: "typescript", Version: "^5.4"}},
		{in: "npm:typescript@latest", want: Source{Kind: SourceNPM, Ref: "typescript", Version: "latest"}},
		{in: "npm:left-pad", err: "names no version"},
		{in: "npm:@scope/pkg", err: "names no version"},
		{in: "npm:left-pad@", err: "empty version"},
		{in: "npm:Left-Pad@1.0.0", err: "lower-case"},
		{in: "npm:@scope@1.0.0", err: "@scope/name"},
		{in: "npm:.hidden@1.0.0", err: "starts with"},

		{in: "https://example.com/x.tar.gz", want: Source{Kind: SourceURL, Ref: "https://example.com/x.tar.gz"}},
		{in: "https://example.com:8443/dl?id=3", want: Source{Kind: SourceURL, Ref: "https://example.com:8443/dl?id=3"}},
		{in: "http://example.com/x", err: "plain http"},
		{in: "https://", err: "no host"},
		{in: "https://user:pw@example.com/x", err: "credentials"},
		{in: "https://example.com/x#frag", err: "fragment"},
		{in: "ftp://example.com/x", err: `unsupported scheme "ftp"`},

		{in: "file:./bin/tool", want: Source{Kind: SourceFile, Ref: "bin/tool"}},
		{in: "file:/opt/tool", want: Source{Kind: SourceFile, Ref: "/opt/tool"}},
		{in: "file:../shared//tool", want: Source{Kind: SourceFile, Ref: "../shared/tool"}},
		{in: "file:", err: "names no file"},

		{in: "deb:busybox-static=1:1.36.1-9", want: Source{Kind: SourceDeb, Ref: "busybox-static", Version: "1:1.36.1-9"}},
		{in: "deb:linux-image-amd64=6.12.38-1", want: Source{Kind: SourceDeb, Ref: "linux-image-amd64", Version: "6.12.38-1"}},
		{in: "deb:libstdc++6=14.2.0-19", want: Source{Kind: SourceDeb, Ref: "libstdc++6", Version: "14.2.0-19"}},
		{in: "deb:busybox-static", want: Source{Kind: SourceDeb, Ref: "busybox-static"}},
		{in: "deb:busybox-static>=1:1.35", want: Source{Kind: SourceDeb, Ref: "busybox-static", Version: ">=1:1.35"}},
		{in: "deb:busybox-static>=1:1.35,<<1:1.37~", want: Source{Kind: SourceDeb, Ref: "busybox-static", Version: ">=1:1.35,<<1:1.37~"}},
		{in: "deb:linux-image-amd64<=6.1.192-3", want: Source{Kind: SourceDeb, Ref: "linux-image-amd64", Version: "<=6.1.192-3"}},
		{in: "deb:busybox=", err: "names no version after ="},
		{in: "deb:busybox>=", err: "names no version after >="},
		{in: "deb:busybox>1.0", err: "a single < or > is not one"},
		{in: "deb:busybox<1.0", err: "a single < or > is not one"},
		{in: "deb:busybox==1.0", err: `"==1.0" is not a relation`},
		{in: "deb:busybox=>1.0", err: `"=>1.0" is not a relation`},
		{in: "deb:busybox>=1.0,", err: "an empty relation"},
		{in: "deb:busybox>=1.0,,<<2", err: "an empty relation"},
		{in: "deb:busybox>=1.0,2.0", err: "does not start with a relation"},
		{in: "deb:busybox=1.0,<<2", err: "cannot be combined"},
		{in: "deb:busybox>=a:1.0", err: "the epoch before the colon must be a number"},
		{in: "deb:busybox>=1.0-", err: "the revision after the last hyphen"},
		{in: "deb:busybox=1:", err: "must start with a digit"},
		{in: "deb:b", err: "not a Debian package name"},
		{in: "deb:=1.0", err: "not a Debian package name"},
		{in: "deb:BusyBox=1.0", err: "not a Debian package name"},
		{in: "deb:busybox=v1", err: "must start with a digit"},
		{in: "deb:busybox=1.0 beta", err: "has the character"},
		{in: "deb:busybox >=1.0", err: "not a Debian package name"},

		{in: "", err: "empty source"},
		{in: " alpine:3.23", err: "leading or trailing space"},
		{in: "alpine:3.23\n", err: "leading or trailing space"},
		{in: "alpine:\x013.23", err: "control character"},
	} {
		rng := hcl.Range{Filename: "main.hcl", Start: hcl.Pos{Line: 3, Column: 5}}
		got, err := ParseSource(tc.in, rng)
		if tc.err != "" {
			if err == nil {
				t.Errorf("ParseSource(%q) = %+v, want error containing %q", tc.in, got, tc.err)
			} else if !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseSource(%q) error %q, want it to contain %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseSource(%q): %v", tc.in, err)
			continue
		}
		if got.Raw != tc.in || got.Range != rng {
			t.Errorf("ParseSource(%q): Raw %q, Range %v; want the input and its range", tc.in, got.Raw, got.Range)
		}
		if diff := cmp.Diff(tc.want, *got, cmpopts.IgnoreFields(Source{}, "Raw", "Range")); diff != "" {
			t.Errorf("ParseSource(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestDebRelations(t *testing.T) {
	for in, want := range map[string][]DebRelation{
		"deb:busybox":                 nil,
		"deb:busybox=1:1.36.1-9":      {{"=", "1:1.36.1-9"}},
		"deb:busybox>=1.35":           {{">=", "1.35"}},
		"deb:busybox>>1.35,<<1.37~":   {{">>", "1.35"}, {"<<", "1.37~"}},
		"deb:busybox<=2:1.0,>=1:0.9":  {{"<=", "2:1.0"}, {">=", "1:0.9"}},
		"npm:left-pad@>=1.0":          nil,
		"deb:busybox>=1.0,<=1.9,<<2":  {{">=", "1.0"}, {"<=", "1.9"}, {"<<", "2"}},
		"deb:linux-image-amd64=6.1-3": {{"=", "6.1-3"}},
	} {
		src, err := ParseSource(in, hcl.Range{})
		if err != nil {
			t.Fatalf("ParseSource(%q): %v", in, err)
		}
		if diff := cmp.Diff(want, src.DebRelations()); diff != "" {
			t.Errorf("%s: DebRelations (-want +got):\n%s", in, diff)
		}
	}
}

func TestSourceIsArchive(t *testing.T) {
	for in, want := range map[string]bool{
		"npm:left-pad@1.3.0":                      true,
		"deb:busybox=1.0":                         true,
		"alpine:3.23":                             true,
		"oci-layout:./dir":                        true,
		"https://example.com/a.tar.gz":            true,
		"https://example.com/a.TGZ?x=1":           true,
		"https://example.com/a.zip":               true,
		"https://example.com/dl/tool-linux-amd64": false,
		"https://example.com/a.tar.gz/raw":        false,
		"file:./vendor/tool.tar.xz":               true,
		"file:./vendor/tool":                      false,
	} {
		src, err := ParseSource(in, hcl.Range{})
		if err != nil {
			t.Fatalf("ParseSource(%q): %v", in, err)
		}
		if got := src.IsArchive(); got != want {
			t.Errorf("%q IsArchive = %v, want %v", in, got, want)
		}
	}
}

func TestParsePlatform(t *testing.T) {
	for in, want := range map[string]string{
		"linux/amd64":    "linux/amd64",
		"linux/arm64/v8": "linux/arm64/v8",
		"linux/riscv64":  "linux/riscv64",
		"darwin/arm64":   "",
		"linux":          "",
		"linux/amd64/":   "",
		"linux/x86_64":   "",
		"linux/arm/v7/x": "",
	} {
		p, err := ParsePlatform(in)
		if want == "" {
			if err == nil {
				t.Errorf("ParsePlatform(%q) = %v, want an error", in, p)
			}
			continue
		}
		if err != nil || p.String() != want {
			t.Errorf("ParsePlatform(%q) = %v, %v; want %s", in, p, err, want)
		}
	}
}
