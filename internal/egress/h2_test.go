package egress

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/sbx-dev/sbx/policy"
)

// h2Request sends one request on a fresh h2 connection to a.test with
// exactly the header fields given (pseudo-headers included) and returns
// the response's :status.
func h2Request(t *testing.T, h *harness, fields [][2]string) int {
	t.Helper()
	c, err := h.guestTLS("a.test", 443, "a.test", "h2")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("ALPN %q", p)
	}
	io.WriteString(c, http2.ClientPreface)
	fr := http2.NewFramer(c, c)
	fr.WriteSettings()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range fields {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true})
	dec := hpack.NewDecoder(4096, nil)
	for i := 0; i < 100; i++ {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading frames: %v", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		case *http2.RSTStreamFrame:
			return 0 // refused as a stream error
		case *http2.GoAwayFrame:
			return 0
		case *http2.HeadersFrame:
			hf, err := dec.DecodeFull(f.HeaderBlockFragment())
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range hf {
				if x.Name == ":status" {
					n, _ := strconv.Atoi(x.Value)
					return n
				}
			}
		}
	}
	t.Fatal("no response in 100 frames")
	return 0
}

// TestH2AuthorityTricks plays a raw h2 client: a Host field that differs
// from :authority, and a Host field without :authority.
func TestH2AuthorityTricks(t *testing.T) {
	pki := newUpstreamPKI(t)
	seen := make(chan string, 10)
	up := upstreamTLS(t, pki, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Host + " " + r.Header.Get("Host")
	}), "a.test", "b.test")
	h := newHarness(t, spec(pki, []policy.AllowRule{allow("a.test", 4), allow("b.test", 5)},
		mapping("a.test", serverAddr(up)), mapping("b.test", serverAddr(up))), nil, nil)

	// Host only, naming b: refused.
	if code := h2Request(t, h, [][2]string{{":method", "GET"}, {":scheme", "https"}, {":path", "/"}, {"host", "b.test"}}); code != 403 && code != 0 && code != 400 {
		t.Errorf("h2 with host b.test and no :authority: %d", code)
	}
	// :authority a with a host field b: either refused or sent upstream
	// as a.test only.
	code := h2Request(t, h, [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "a.test"}, {":path", "/"}, {"host", "b.test"}})
	t.Logf(":authority a.test with host b.test: status %d", code)
	if code == 200 {
		select {
		case s := <-seen:
			if s != "a.test " {
				t.Errorf("upstream saw Host %q", s)
			}
		default:
			t.Error("200 without an upstream request")
		}
	}
	select {
	case s := <-seen:
		t.Errorf("upstream saw another request: %q", s)
	default:
	}
}
