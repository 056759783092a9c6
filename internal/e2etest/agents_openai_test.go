//go:build linux

package e2etest

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha1"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sbx-dev/sbx"
	"github.com/sbx-dev/sbx/internal/atomicfile"
	"github.com/sbx-dev/sbx/internal/build/cache"
	"github.com/sbx-dev/sbx/internal/build/fetch"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"golang.org/x/sys/unix"
)

// codexKey is the Codex key the host holds; the guest gets a
// placeholder.
const codexKey = "sk-codex-real-5e1b7a93c04d2f68"

// The scripted Codex turn: the model's first answer is a tool call that
// writes codexFile in the working directory, its second a message that
// ends the turn once the tool's output has come back.
const (
	codexFile    = "from-codex.txt"
	codexContent = "written by codex inside sbx"
	codexCallID  = "call_sbx_write"
	codexFinal   = "the file is written"
)

// openaiReq is one request the fake OpenAI service saw.
type openaiReq struct {
	host, proto, method, path, auth string
	// ws is set for a WebSocket upgrade.
	ws bool
}

// codexTurn is one Responses request the fake answered.
type codexTurn struct {
	// transport is "ws" for a request frame on a WebSocket, else the
	// HTTP protocol of the POST ("HTTP/2.0", "HTTP/1.1").
	transport string
	// kind is "prewarm" (a request that asks for no output), "tool" (the
	// answer is the tool call) or "final" (the tool's output came back).
	kind string
	// tool is the tool the call named; output is what Codex sent back
	// for it.
	tool, output string
}

// openaiFake is the OpenAI service Codex talks to: the Responses API on
// api.openai.com over a WebSocket (HTTP/1.1 upgrade) or a POST with an
// event stream (HTTP/2 or HTTP/1.1), and 404 for everything else Codex
// asks (model lists, plugin catalogues). The Responses API wants
// Authorization: Bearer key and answers 401 otherwise. It records every
// request and every turn.
type openaiFake struct {
	key string
	// refuseWS answers WebSocket upgrades with 426, as a server without
	// the WebSocket transport might: Codex then falls back to a POST.
	refuseWS atomic.Bool
	// echoPost makes the final message of a POST turn repeat the
	// Authorization header it came with, as error pages and debugging
	// endpoints do: the host must mask the value on the way back.
	echoPost atomic.Bool

	mu    sync.Mutex
	reqs  []openaiReq
	turns []codexTurn
	// oddities are protocol surprises (unparsable frames, unknown
	// request types): logged by the tests to keep the fake honest.
	oddities []string
}

func (f *openaiFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	auth := r.Header.Get("Authorization")
	ws := strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
	f.mu.Lock()
	f.reqs = append(f.reqs, openaiReq{host: host, proto: r.Proto, method: r.Method, path: r.URL.Path, auth: auth, ws: ws})
	f.mu.Unlock()

	if host != "api.openai.com" || r.URL.Path != "/v1/responses" {
		http.NotFound(w, r)
		return
	}
	if auth != "Bearer "+f.key {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","code":"invalid_api_key"}}`)
		return
	}
	switch {
	case ws && f.refuseWS.Load():
		http.Error(w, "this server speaks the Responses API over HTTP only", http.StatusUpgradeRequired)
	case ws:
		f.serveWS(w, r)
	case r.Method == http.MethodPost:
		f.servePost(w, r)
	default:
		http.Error(w, "POST or a WebSocket upgrade", http.StatusMethodNotAllowed)
	}
}

func (f *openaiFake) oddity(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.oddities = append(f.oddities, fmt.Sprintf(format, args...))
}

func (f *openaiFake) turn(t codexTurn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.turns = append(f.turns, t)
}

// servePost answers a POST /v1/responses with the turn as an event
// stream.
func (f *openaiFake) servePost(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	echo := ""
	if f.echoPost.Load() {
		echo = r.Header.Get("Authorization")
	}
	events, t, err := codexReply(body, len(f.turnsSoFar()), echo)
	if err != nil {
		f.oddity("POST /v1/responses: %v", err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	t.transport = r.Proto
	f.turn(t)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	rc := http.NewResponseController(w)
	for _, ev := range events {
		data, _ := json.Marshal(ev)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev["type"], data)
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

func (f *openaiFake) turnsSoFar() []codexTurn {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]codexTurn(nil), f.turns...)
}

// requests returns the recorded requests that match.
func (f *openaiFake) requests(match func(openaiReq) bool) []openaiReq {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []openaiReq
	for _, r := range f.reqs {
		if match(r) {
			out = append(out, r)
		}
	}
	return out
}

// serveWS takes the upgrade and answers each response.create frame with
// the turn's events, one text frame each, until the client closes or
// goes quiet. Codex opens the socket for a whole session and sends the
// next turn's request on it.
func (f *openaiFake) serveWS(w http.ResponseWriter, r *http.Request) {
	ws, err := acceptWebSocket(w, r)
	if err != nil {
		f.oddity("WebSocket upgrade: %v", err)
		return
	}
	defer ws.c.Close()
	// Bounded: a session here is a handful of frames.
	for range 64 {
		// Under TCG a tool run between two turns takes a while.
		ws.c.SetReadDeadline(time.Now().Add(5 * time.Minute))
		msg, err := ws.read()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				f.oddity("WebSocket read: %v", err)
			}
			return
		}
		var head struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(msg, &head); err != nil {
			f.oddity("WebSocket frame is not JSON: %.200q", msg)
			continue
		}
		if head.Type != "response.create" {
			// response.processed and the like acknowledge a turn.
			continue
		}
		events, t, err := codexReply(msg, len(f.turnsSoFar()), "")
		if err != nil {
			f.oddity("WebSocket response.create: %v", err)
			data, _ := json.Marshal(map[string]any{"type": "error", "status": 400,
				"error": map[string]any{"type": "invalid_request_error", "message": err.Error()}})
			ws.write(wsText, data)
			continue
		}
		t.transport = "ws"
		f.turn(t)
		for _, ev := range events {
			data, _ := json.Marshal(ev)
			if err := ws.write(wsText, data); err != nil {
				f.oddity("WebSocket write: %v", err)
				return
			}
		}
	}
}

// responsesRequest is what the fake reads of a Responses request: the
// body of a POST, or a WebSocket response.create frame, which carries
// the same fields.
type responsesRequest struct {
	Model string `json:"model"`
	Input []struct {
		Type   string          `json:"type"`
		CallID string          `json:"call_id"`
		Output json.RawMessage `json:"output"`
	} `json:"input"`
	Tools []struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tools"`
	Generate *bool `json:"generate"`
}

// codexReply scripts the model. A request that asks for no output (a
// WebSocket prewarm) gets an empty response. A request whose input
// carries the output of the scripted call gets the final message.
// Otherwise the answer is the call, made with the first of the tools
// the request offers that can write a file: apply_patch (freeform or
// JSON), exec_command, shell. n numbers the response ids; a non-empty
// echo is quoted in the final message as "upstream saw [echo]".
func codexReply(body []byte, n int, echo string) ([]map[string]any, codexTurn, error) {
	var req responsesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, codexTurn{}, fmt.Errorf("the request is not a Responses request: %v", err)
	}
	id := fmt.Sprintf("resp_sbx_%d", n)
	if req.Generate != nil && !*req.Generate {
		return responseEvents(id), codexTurn{kind: "prewarm"}, nil
	}
	for _, in := range req.Input {
		if in.CallID != codexCallID || !strings.HasSuffix(in.Type, "call_output") {
			continue
		}
		out := string(in.Output)
		var s string
		if json.Unmarshal(in.Output, &s) == nil {
			out = s
		}
		text := codexFinal
		if echo != "" {
			text += "; upstream saw [" + echo + "]"
		}
		msg := map[string]any{"type": "message", "role": "assistant", "id": "msg_" + id, "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}
		return responseEvents(id, msg), codexTurn{kind: "final", output: out}, nil
	}
	cmd := fmt.Sprintf("printf '%%s\\n' '%s' > %s", codexContent, codexFile)
	patch := fmt.Sprintf("*** Begin Patch\n*** Add File: %s\n+%s\n*** End Patch\n", codexFile, codexContent)
	for _, want := range []string{"apply_patch", "exec_command", "shell"} {
		for _, tool := range req.Tools {
			if tool.Name != want {
				continue
			}
			var item map[string]any
			switch {
			case want == "apply_patch" && tool.Type == "custom":
				item = map[string]any{"type": "custom_tool_call", "id": "ctc_" + id, "status": "completed",
					"call_id": codexCallID, "name": want, "input": patch}
			case want == "apply_patch":
				item = functionCall(id, want, map[string]any{"input": patch})
			case want == "exec_command":
				item = functionCall(id, want, map[string]any{"cmd": cmd})
			default:
				item = functionCall(id, want, map[string]any{"command": []string{"bash", "-lc", cmd}})
			}
			return responseEvents(id, item), codexTurn{kind: "tool", tool: want}, nil
		}
	}
	var names []string
	for _, t := range req.Tools {
		names = append(names, t.Name)
	}
	return nil, codexTurn{}, fmt.Errorf("none of the offered tools writes a file: %v", names)
}

func functionCall(id, name string, args map[string]any) map[string]any {
	a, _ := json.Marshal(args)
	return map[string]any{"type": "function_call", "id": "fc_" + id, "status": "completed",
		"call_id": codexCallID, "name": name, "arguments": string(a)}
}

// responseEvents is a whole response: created, each item done, then
// completed with its usage.
func responseEvents(id string, items ...map[string]any) []map[string]any {
	evs := []map[string]any{{"type": "response.created", "response": map[string]any{"id": id, "status": "in_progress"}}}
	for i, it := range items {
		evs = append(evs, map[string]any{"type": "response.output_item.done", "output_index": i, "item": it})
	}
	return append(evs, map[string]any{"type": "response.completed", "response": map[string]any{
		"id": id, "status": "completed",
		"usage": map[string]any{"input_tokens": 100, "output_tokens": 10, "total_tokens": 110},
	}})
}

// A server's side of RFC 6455, as much as the fake needs: the
// handshake, unmasking, fragments, ping and close. No extension is
// accepted, so frames are never compressed.
const (
	wsCont  = 0x0
	wsText  = 0x1
	wsBin   = 0x2
	wsClose = 0x8
	wsPing  = 0x9
	wsPong  = 0xa
)

type webSocket struct {
	c  net.Conn
	br *bufio.Reader
	mu sync.Mutex // writes
}

func acceptWebSocket(w http.ResponseWriter, r *http.Request) (*webSocket, error) {
	key := r.Header.Get("Sec-WebSocket-Key")
	if r.Method != http.MethodGet || key == "" || r.Header.Get("Sec-WebSocket-Version") != "13" {
		http.Error(w, "not a WebSocket handshake", http.StatusBadRequest)
		return nil, fmt.Errorf("%s %s: not a WebSocket handshake (%s, key %q, version %q)", r.Method, r.URL.Path, r.Proto, key, r.Header.Get("Sec-WebSocket-Version"))
	}
	sum := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	c, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
		base64.StdEncoding.EncodeToString(sum[:]))
	if err := brw.Flush(); err != nil {
		c.Close()
		return nil, err
	}
	return &webSocket{c: c, br: brw.Reader}, nil
}

// read returns the next whole text or binary message, answering pings;
// io.EOF after a close frame, which it answers.
func (ws *webSocket) read() ([]byte, error) {
	var msg []byte
	for range 4096 {
		var h [2]byte
		if _, err := io.ReadFull(ws.br, h[:]); err != nil {
			return nil, err
		}
		fin, op := h[0]&0x80 != 0, h[0]&0x0f
		if h[0]&0x70 != 0 {
			return nil, fmt.Errorf("a frame with RSV bits %#x, and no extension was agreed", h[0]&0x70)
		}
		n := uint64(h[1] & 0x7f)
		switch n {
		case 126:
			var b [2]byte
			if _, err := io.ReadFull(ws.br, b[:]); err != nil {
				return nil, err
			}
			n = uint64(binary.BigEndian.Uint16(b[:]))
		case 127:
			var b [8]byte
			if _, err := io.ReadFull(ws.br, b[:]); err != nil {
				return nil, err
			}
			n = binary.BigEndian.Uint64(b[:])
		}
		if n+uint64(len(msg)) > 16<<20 {
			return nil, fmt.Errorf("a message over 16 MiB")
		}
		var mask [4]byte
		masked := h[1]&0x80 != 0
		if masked {
			if _, err := io.ReadFull(ws.br, mask[:]); err != nil {
				return nil, err
			}
		}
		p := make([]byte, n)
		if _, err := io.ReadFull(ws.br, p); err != nil {
			return nil, err
		}
		if masked {
			for i := range p {
				p[i] ^= mask[i%4]
			}
		}
		switch op {
		case wsClose:
			if len(p) > 2 {
				p = p[:2]
			}
			ws.write(wsClose, p)
			return nil, io.EOF
		case wsPing:
			if err := ws.write(wsPong, p); err != nil {
				return nil, err
			}
		case wsPong:
		case wsText, wsBin, wsCont:
			msg = append(msg, p...)
			if fin {
				return msg, nil
			}
		default:
			return nil, fmt.Errorf("unknown opcode %#x", op)
		}
	}
	return nil, errors.New("too many frames without a whole message")
}

func (ws *webSocket) write(op byte, p []byte) error {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	hdr := []byte{0x80 | op}
	switch n := len(p); {
	case n < 126:
		hdr = append(hdr, byte(n))
	case n < 1<<16:
		hdr = append(hdr, 126)
		hdr = binary.BigEndian.AppendUint16(hdr, uint16(n))
	default:
		hdr = append(hdr, 127)
		hdr = binary.BigEndian.AppendUint64(hdr, uint64(n))
	}
	ws.c.SetWriteDeadline(time.Now().Add(time.Minute))
	if _, err := ws.c.Write(append(hdr, p...)); err != nil {
		return err
	}
	return nil
}

// codexVersion is the Codex release the tests run: the agent image's
// default (examples/agent-debian).
const codexVersion = "0.171.0"

// codexSpec is an image that holds only the codex executable: enough for
// the lock to pin the npm tarball and for the fetcher to bring it into
// the cache, the way the agent image's build does.
const codexSpec = `image "codex" {
  platform = "linux/amd64"

  artifact "codex" {
    source = "npm:@openai/codex@` + codexVersion + `-linux-x64"
    file   = "` + codexTarballPath + `"
    dest   = "/usr/local/bin/codex"
    mode   = "0755"
  }
}
`

// codexTarballPath is the static musl executable in the npm tarball.
const codexTarballPath = "package/vendor/x86_64-unknown-linux-musl/bin/codex"

// codexExecutable returns the path of the real codex executable of
// codexVersion for this host, brought the way the agent image's build
// brings it: locked from the npm registry the host's npm configuration
// names, fetched into sbx's default cache (where the VM tests' builds
// find it too). The lock and the unpacked executable are kept in the
// per-user cache's sbx-test/codex, so that a second run touches no
// network and unpacks nothing.
func codexExecutable(ctx context.Context, t *testing.T) string {
	t.Helper()
	base, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	keep := filepath.Join(base, "sbx-test", "codex")
	if err := os.MkdirAll(keep, 0o755); err != nil {
		t.Fatal(err)
	}
	cacheRoot, err := cache.DefaultRoot()
	if err != nil {
		t.Fatal(err)
	}
	cfgDir := t.TempDir()
	files := map[string][]byte{"sbx.hcl": []byte(codexSpec)}
	if prev, err := os.ReadFile(filepath.Join(keep, lockfiles.FileName)); err == nil {
		files[lockfiles.FileName] = prev
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(cfgDir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := withEnv(environ, cache.EnvRoot+"="+cacheRoot)
	cfg, err := sbx.Load(cfgDir, sbx.Options{Environ: env})
	if err != nil {
		t.Fatal(err)
	}
	locked, err := cfg.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lock, diags := lockfiles.Read(locked.Path)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if data, err := os.ReadFile(filepath.Join(cfgDir, lockfiles.FileName)); err == nil {
		if err := atomicfile.WriteBytes(filepath.Join(keep, lockfiles.FileName), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := cache.Open(cacheRoot)
	if err != nil {
		t.Fatal(err)
	}
	got, err := fetch.Inputs(ctx, cfg.Lang.Images["codex"], lock.Images["codex"], c, fetch.Options{Dir: cfgDir, Environ: env})
	if err != nil {
		t.Fatal(err)
	}
	blob := got["artifact.codex"].File
	if blob == nil {
		t.Fatalf("the cache holds no tarball for artifact.codex: %+v", got)
	}
	exe := filepath.Join(keep, strings.TrimPrefix(blob.Digest, "sha256:"), "codex")
	if _, err := os.Stat(exe); err == nil {
		return exe
	}
	if err := unpackFile(blob.Path, codexTarballPath, exe); err != nil {
		t.Fatal(err)
	}
	return exe
}

// unpackFile writes the regular file name of the gzip tarball tgz to
// dst, executable, through a temporary file and a rename so that
// concurrent tests never run a partial copy.
func unpackFile(tgz, name, dst string) error {
	f, err := os.Open(tgz)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return fmt.Errorf("%s has no %s", tgz, name)
		}
		if err != nil {
			return err
		}
		if h.Name != name || h.Typeflag != tar.TypeReg {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		tmp, err := os.CreateTemp(filepath.Dir(dst), ".codex-*")
		if err != nil {
			return err
		}
		defer os.Remove(tmp.Name())
		if _, err := io.Copy(tmp, io.LimitReader(tr, 1<<30)); err != nil {
			tmp.Close()
			return err
		}
		if err := tmp.Chmod(0o755); err != nil {
			tmp.Close()
			return err
		}
		if err := tmp.Close(); err != nil {
			return err
		}
		return os.Rename(tmp.Name(), dst)
	}
}

// withEnv returns env with each NAME=value of set replacing NAME's
// entry.
func withEnv(env []string, set ...string) []string {
	out := make([]string, 0, len(env)+len(set))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		keep := true
		for _, s := range set {
			if strings.HasPrefix(s, name+"=") {
				keep = false
			}
		}
		if keep {
			out = append(out, kv)
		}
	}
	return append(out, set...)
}

// connectProxy is the only network a host-side codex run reaches: every
// CONNECT, whatever name it asks for, is tunnelled to one local address.
// It listens on a unix socket, which the relay inside codex's network
// namespace forwards to (codexRelay). It records the names.
type connectProxy struct {
	sock string
	to   string
	mu   sync.Mutex
	seen []string
	wg   sync.WaitGroup
}

func newConnectProxy(t *testing.T, to string) *connectProxy {
	sock := filepath.Join(t.TempDir(), "proxy.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	p := &connectProxy{sock: sock, to: to}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		p.wg.Wait()
	})
	return p
}

func (p *connectProxy) serve(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Minute))
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	p.mu.Lock()
	p.seen = append(p.seen, req.Method+" "+req.Host)
	p.mu.Unlock()
	if req.Method != http.MethodConnect {
		io.WriteString(c, "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
		return
	}
	up, err := net.DialTimeout("tcp", p.to, 10*time.Second)
	if err != nil {
		io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
		return
	}
	defer up.Close()
	up.SetDeadline(time.Now().Add(5 * time.Minute))
	io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	splice(c, br, up)
}

// splice copies both ways between a (read through ar) and b until both
// directions end, half-closing each side's write as its input ends.
func splice(a net.Conn, ar io.Reader, b net.Conn) {
	done := make(chan struct{})
	go func() {
		io.Copy(b, ar)
		closeWrite(b)
		close(done)
	}()
	io.Copy(a, b)
	closeWrite(a)
	<-done
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
}

func (p *connectProxy) names() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.seen...)
}

// codexRelayEnv, set in this test binary's environment, makes it the
// relay of a host-side codex run instead of a test run: unshare starts it
// in a network namespace of its own, where it brings the loopback up,
// listens on it for codex's proxy connections, forwards each to the
// unix socket the variable names (a file, so it crosses namespaces) and
// runs codex with that proxy. codex so has no route to any address, and
// whatever it fails to send through the proxy goes nowhere.
const codexRelayEnv = "SBX_TEST_CODEX_RELAY"

func init() {
	if sock := os.Getenv(codexRelayEnv); sock != "" {
		os.Exit(codexRelay(sock, os.Args[1:]))
	}
}

func codexRelay(sock string, argv []string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "codex relay:", err)
		return 125
	}
	if len(argv) == 0 {
		return fail(errors.New("no command"))
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fail(err)
	}
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fail(err)
	}
	ifr.SetUint16(unix.IFF_UP | unix.IFF_LOOPBACK | unix.IFF_RUNNING)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fail(fmt.Errorf("bringing lo up: %w", err))
	}
	unix.Close(fd)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("unix", sock)
				if err != nil {
					return
				}
				defer up.Close()
				splice(c, c, up)
			}()
		}
	}()
	proxy := "http://" + ln.Addr().String()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = withEnv(os.Environ(), codexRelayEnv+"=",
		"HTTPS_PROXY="+proxy, "https_proxy="+proxy, "HTTP_PROXY="+proxy, "http_proxy="+proxy,
		"ALL_PROXY="+proxy, "all_proxy="+proxy, "NO_PROXY=", "no_proxy=")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		return fail(err)
	}
	return 0
}

// codexArgs is how the tests run Codex non-interactively: in dir, with
// no approval prompts and no sandbox of its own (the VM is the sandbox;
// Codex's own would need user namespaces), outside a git repository
// allowed, and with a model named so that none is looked up first.
func codexArgs(exe, dir, prompt string) []string {
	return []string{exe, "exec",
		"--skip-git-repo-check",
		"--dangerously-bypass-approvals-and-sandbox",
		"--color", "never",
		"-m", "gpt-5.3-codex",
		"-C", dir,
		prompt}
}

// TestCodexOnHost runs the real codex binary on this host against the
// fake OpenAI service, twice: once with the turn on a WebSocket, once
// with the WebSocket refused and the turn on HTTP/2 POSTs. codex runs in
// a network namespace of its own (unshare, as an unprivileged user
// namespace) whose only way out is a CONNECT proxy that tunnels every
// name to the fake, so nothing can leave the machine. Each run must write the scripted file in
// its working directory and end with the scripted message, with the key
// sent as Authorization: Bearer. This pins the protocol facts the VM
// test relies on, in seconds instead of minutes.
func TestCodexOnHost(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	exe := codexExecutable(ctx, t)
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("unshare (util-linux) is needed to run codex without a network: %v", err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}

	caPEM, cert := testPKI(t, "api.openai.com", "chatgpt.com")
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		refuseWS  bool
		transport string
	}{
		{"websocket", false, "ws"},
		{"http2 fallback", true, "HTTP/2.0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fake := &openaiFake{key: codexKey}
			fake.refuseWS.Store(c.refuseWS)
			srv := httptest.NewUnstartedServer(fake)
			srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
			srv.EnableHTTP2 = true
			// Handshakes for the names the certificate lacks (Codex's
			// telemetry and plugin hosts) fail; that is expected.
			srv.Config.ErrorLog = log.New(io.Discard, "", 0)
			srv.StartTLS()
			defer srv.Close()
			proxy := newConnectProxy(t, srv.Listener.Addr().String())

			home, work := t.TempDir(), t.TempDir()
			hostGit(t, work, "init", "-q")
			ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			// codex in a network namespace of its own, through the relay
			// (codexRelayEnv) to the proxy.
			cmd := exec.CommandContext(ctx, unshare, append([]string{"--user", "--map-root-user", "--net", "--", self},
				codexArgs(exe, work, "write the file")...)...)
			cmd.Dir = work
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "CODEX_API_KEY=" + codexKey,
				"SSL_CERT_FILE=" + caFile, codexRelayEnv + "=" + proxy.sock}
			cmd.WaitDelay = 5 * time.Second
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			t0 := time.Now()
			err := cmd.Run()
			took := time.Since(t0)
			t.Logf("codex exec took %v; CONNECTs: %v", took.Round(time.Millisecond), proxy.names())
			for _, r := range fake.requests(func(openaiReq) bool { return true }) {
				t.Logf("  %s %s %s%s ws=%v bearer=%v", r.proto, r.method, r.host, r.path, r.ws, r.auth == "Bearer "+codexKey)
			}
			for _, o := range fake.oddities {
				t.Logf("  oddity: %s", o)
			}
			if err != nil {
				t.Fatalf("codex exec: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
			}
			got, err := os.ReadFile(filepath.Join(work, codexFile))
			if err != nil || string(got) != codexContent+"\n" {
				t.Errorf("%s in the working directory: %q, %v\nstderr:\n%s", codexFile, got, err, stderr.String())
			}
			if !strings.Contains(stdout.String(), codexFinal) {
				t.Errorf("stdout lacks the final message %q:\n%s", codexFinal, stdout.String())
			}
			var tool, final *codexTurn
			turns := fake.turnsSoFar()
			for i := range turns {
				switch turns[i].kind {
				case "tool":
					tool = &turns[i]
				case "final":
					final = &turns[i]
				}
			}
			if tool == nil || final == nil || tool.transport != c.transport || final.transport != c.transport {
				t.Fatalf("turns %+v; want the tool call and the final answer over %s", turns, c.transport)
			}
			t.Logf("turns %+v", turns)
			if !strings.Contains(final.output, "exited with code 0") {
				t.Errorf("the %s call's output as Codex sent it back: %q", tool.tool, final.output)
			}
			if c.refuseWS {
				if n := len(fake.requests(func(r openaiReq) bool { return r.ws })); n == 0 {
					t.Error("codex never tried the WebSocket before falling back")
				}
			}
		})
	}
}

// TestCodexReply checks the fake's script against request bodies of the
// shapes Codex sends: the prewarm, a turn offering each kind of tool,
// the turn carrying the call's output, and a turn with no usable tool.
func TestCodexReply(t *testing.T) {
	for _, c := range []struct {
		name, body string
		kind, tool string
		item       string // the answer's item type
		wantErr    bool
	}{
		{"prewarm", `{"type":"response.create","generate":false,"input":[],"tools":[{"type":"function","name":"exec_command"}]}`, "prewarm", "", "", false},
		{"freeform apply_patch first", `{"input":[],"tools":[{"type":"function","name":"exec_command"},{"type":"custom","name":"apply_patch"}]}`, "tool", "apply_patch", "custom_tool_call", false},
		{"JSON apply_patch", `{"input":[],"tools":[{"type":"function","name":"apply_patch"}]}`, "tool", "apply_patch", "function_call", false},
		{"exec_command", `{"input":[],"tools":[{"type":"function","name":"write_stdin"},{"type":"function","name":"exec_command"}]}`, "tool", "exec_command", "function_call", false},
		{"shell", `{"input":[],"tools":[{"type":"function","name":"shell"}]}`, "tool", "shell", "function_call", false},
		{"the call's output", `{"input":[{"type":"function_call_output","call_id":"` + codexCallID + `","output":"Process exited with code 0"}],"tools":[{"type":"function","name":"exec_command"}]}`, "final", "", "message", false},
		{"another call's output", `{"input":[{"type":"function_call_output","call_id":"call_other","output":"x"}],"tools":[{"type":"function","name":"exec_command"}]}`, "tool", "exec_command", "function_call", false},
		{"no tool that writes", `{"input":[],"tools":[{"type":"function","name":"view_image"}]}`, "", "", "", true},
		{"not JSON", `{`, "", "", "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			evs, turn, err := codexReply([]byte(c.body), 1, "")
			if (err != nil) != c.wantErr {
				t.Fatalf("err %v, want error %v", err, c.wantErr)
			}
			if err != nil {
				return
			}
			if turn.kind != c.kind || turn.tool != c.tool {
				t.Errorf("turn %+v, want kind %q tool %q", turn, c.kind, c.tool)
			}
			if evs[0]["type"] != "response.created" || evs[len(evs)-1]["type"] != "response.completed" {
				t.Errorf("events %v do not open with response.created and close with response.completed", evs)
			}
			var items []string
			for _, ev := range evs[1 : len(evs)-1] {
				items = append(items, ev["item"].(map[string]any)["type"].(string))
			}
			var want []string
			if c.item != "" {
				want = []string{c.item}
			}
			if !slices.Equal(items, want) {
				t.Errorf("items %v, want %v", items, want)
			}
		})
	}
	// The final message quotes an echo when asked to.
	evs, _, err := codexReply([]byte(`{"input":[{"type":"custom_tool_call_output","call_id":"`+codexCallID+`","output":"ok"}]}`), 2, "Bearer x")
	if err != nil {
		t.Fatal(err)
	}
	text := evs[1]["item"].(map[string]any)["content"].([]any)[0].(map[string]any)["text"]
	if text != codexFinal+"; upstream saw [Bearer x]" {
		t.Errorf("final text %q", text)
	}
}
