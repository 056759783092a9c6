package egress

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/egress/audit"
	"github.com/sbx-dev/sbx/policy"
)

// TestUpdate removes a host and rotates a secret while connections are
// open: the removed host's connection is closed and new ones refused, the
// kept host's connection stays and its next request carries the new value.
func TestUpdate(t *testing.T) {
	pki := newUpstreamPKI(t)
	up := upstreamTLS(t, pki, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Reversed, or the engine would mask the value it sees.
		fmt.Fprintf(w, "%s %s", r.Host, reverse(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")))
	}), "a.test", "b.test")
	mk := func(hosts []string, value string) (*Policy, policy.Sandbox) {
		var rules []policy.AllowRule
		for i, h := range hosts {
			rules = append(rules, allow(h, 4+i))
		}
		s := secretSpec(pki, "a.test", rules, mapping("a.test", serverAddr(up)), mapping("b.test", serverAddr(up)))
		p, err := Compile(s, map[string][]byte{"token": []byte(value)}, map[string]string{"token": tokenPH})
		if err != nil {
			t.Fatal(err)
		}
		return p, s
	}
	_, s1 := mk([]string{"a.test", "b.test"}, tokenValue)
	h := newHarness(t, s1, map[string][]byte{"token": []byte(tokenValue)}, map[string]string{"token": tokenPH})

	open := func(name string) (io.ReadWriteCloser, *bufio.Reader) {
		c, err := h.guestTLS(name, 443, name, "http/1.1")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		return c, bufio.NewReader(c)
	}
	ask := func(c io.Writer, br *bufio.Reader, name string) (int, string) {
		auth := ""
		if name == "a.test" {
			auth = "Authorization: Bearer " + tokenPH + "\r\n"
		}
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n%s\r\n", name, auth)
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			return 0, err.Error()
		}
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	ca, cabr := open("a.test")
	defer ca.Close()
	cb, cbbr := open("b.test")
	defer cb.Close()
	if code, body := ask(ca, cabr, "a.test"); code != 200 || body != "a.test "+reverse(tokenValue) {
		t.Fatalf("a before: %d %q", code, body)
	}
	if code, _ := ask(cb, cbbr, "b.test"); code != 200 {
		t.Fatalf("b before: %d", code)
	}

	const rotated = "rotated-value-9876543210"
	p2, _ := mk([]string{"a.test"}, rotated)
	h.eng.Update(p2)

	// b's open connection is closed by the update.
	closed := make(chan error, 1)
	go func() {
		_, err := cbbr.ReadByte()
		closed <- err
	}()
	select {
	case err := <-closed:
		if err == nil {
			t.Error("b's connection delivered data after the update")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("b's connection is still open 5s after the update removed b.test")
	}
	// New connections to b are refused.
	if c, err := h.guestTLS("b.test", 443, "b.test", "http/1.1"); err == nil {
		c.Close()
		t.Error("a new connection to b.test completed its handshake after the update")
	}
	// a's connection stays, and its next request carries the rotated value.
	if code, body := ask(ca, cabr, "a.test"); code != 200 || body != "a.test "+reverse(rotated) {
		t.Errorf("a after: %d %q", code, body)
	}
	if h.eng.Policy() != p2 {
		t.Error("Policy() is not the updated policy")
	}
	var closedEntry bool
	for _, e := range h.entries() {
		if e.Name == "b.test" && e.Decision == audit.DecisionDeny && strings.Contains(e.Reason, "updated policy") {
			closedEntry = true
		}
	}
	if !closedEntry {
		t.Error("no audit entry for the connection the update closed")
	}
}

// TestUpdateAddsHost checks that a host added by an update is reachable
// at once.
func TestUpdateAddsHost(t *testing.T) {
	pki := newUpstreamPKI(t)
	up := upstreamTLS(t, pki, echoHandler(), "new.test")
	s := spec(pki, nil, mapping("new.test", serverAddr(up)))
	h := newHarness(t, s, nil, nil)
	if _, err := h.client(false).Get("https://new.test/"); err == nil {
		t.Fatal("new.test reachable before the update")
	}
	s.Allow = []policy.AllowRule{allow("new.test", 4)}
	p, err := Compile(s, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.eng.Update(p)
	if res, body := get(t, h.client(false), "https://new.test/x"); res.StatusCode != 200 {
		t.Fatalf("after the update: %d %q", res.StatusCode, body)
	}
}

// TestRequestCheckedAgainstCurrentPolicy checks each request against the
// policy in force, not the one its connection was opened under, even if
// the connection was not (yet) closed.
func TestRequestCheckedAgainstCurrentPolicy(t *testing.T) {
	pki := newUpstreamPKI(t)
	up := upstreamTLS(t, pki, echoHandler(), "a.test")
	s := spec(pki, []policy.AllowRule{allow("a.test", 4)}, mapping("a.test", serverAddr(up)))
	h := newHarness(t, s, nil, nil)
	c, err := h.guestTLS("a.test", 443, "a.test", "http/1.1")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	ask := func() int {
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n")
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		return res.StatusCode
	}
	if code := ask(); code != 200 {
		t.Fatalf("before: %d", code)
	}
	// a.test is now spliced unseen, not inspected: a connection opened
	// for inspection must not carry on under the new rule.
	s.Allow[0].Passthrough = true
	p, err := Compile(s, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.eng.cur.Store(h.eng.newState(p)) // the policy changes, the connection stays
	if code := ask(); code != 403 {
		t.Errorf("after: %d, want 403", code)
	}
}

func reverse(s string) string {
	b := []byte(s)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}
