package oauth

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// helperEnv names, in the environment of this test binary run again as
// another process, the credential file and token endpoint of
// TestRefreshInAnotherProcessCallsUpstreamOnce's second refresher.
const helperEnv = "SBX_OAUTH_TEST_REFRESHER"

// TestRefresherProcess is the second refresher of
// TestRefreshInAnotherProcessCallsUpstreamOnce, in a process of its own:
// it opens the login, renders its guest's copy, says "ready", and on a
// line from its standard input refreshes with its own placeholder and
// prints the reply's status, whether it went upstream, and whether its
// new access placeholder stands for the access token the file holds.
func TestRefresherProcess(t *testing.T) {
	arg := os.Getenv(helperEnv)
	if arg == "" {
		t.Skip("run by TestRefreshInAnotherProcessCallsUpstreamOnce")
	}
	path, tokenURL, _ := strings.Cut(arg, "\n")
	l := openLogin(t, path)
	out, err := l.Render()
	if err != nil {
		t.Fatal(err)
	}
	ph := tokensOf(readAuth(t, out)).refresh
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	r, err := l.Refresh(context.Background(), "application/json", refreshBody(ph), plainUpstream(tokenURL))
	if err != nil {
		t.Fatal(err)
	}
	var resp map[string]string
	json.Unmarshal(r.Body, &resp)
	data, _ := os.ReadFile(path)
	real, ok := l.AccessToken(resp["access_token"])
	fmt.Printf("reply %d upstream=%v access=%v\n", r.Status, r.Upstream, ok && real == tokensOf(readAuth(t, data)).access)
}

func plainUpstream(url string) Upstream {
	return func(ctx context.Context, ct string, body []byte) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", ct)
		return http.DefaultClient.Do(req)
	}
}

// TestRefreshInAnotherProcessCallsUpstreamOnce refreshes one login from
// two processes, each with its own Login (as two sandboxes' networks
// are): this one refreshes first, and the token endpoint holds its
// request until the other process waits on the login's lock (as
// /proc/locks shows) or its own request arrives. The endpoint must be
// called once, with the real refresh token, and the other process must
// be answered from the file the first refresh wrote, its new access
// placeholder standing for the rotated token.
func TestRefreshInAnotherProcessCallsUpstreamOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "auth.json")
	real, next := newLogin(t, 1), newLogin(t, 2)
	writeAuth(t, path, real)
	var calls atomic.Int32
	first := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	held := "not held"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m map[string]string
		json.Unmarshal(body, &m)
		if calls.Add(1) == 1 {
			once.Do(func() { close(first) })
			outcome := "the bound passed"
			for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
				if calls.Load() > 1 {
					outcome = "a second refresh arrived"
					break
				}
				if flockWaiter(LockPath(path)) {
					outcome = "the other process waited on the lock"
					break
				}
			}
			mu.Lock()
			held = outcome
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/json")
		if m["refresh_token"] != real.refresh {
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":"invalid_grant"}`)
			return
		}
		json.NewEncoder(w).Encode(map[string]string{"id_token": next.id, "access_token": next.access, "refresh_token": next.refresh})
	}))
	defer srv.Close()

	cmd := exec.Command(os.Args[0], "-test.run=^TestRefresherProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+path+"\n"+srv.URL+"/oauth/token")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "ready" {
		t.Fatalf("the other process: %q %s", lines.Text(), stderr.String())
	}

	l := openLogin(t, path)
	out, _ := l.Render()
	ph := tokensOf(readAuth(t, out)).refresh
	type result struct {
		r   *Reply
		err error
	}
	mine := make(chan result, 1)
	go func() {
		r, err := l.Refresh(context.Background(), "application/json", refreshBody(ph), plainUpstream(srv.URL+"/oauth/token"))
		mine <- result{r, err}
	}()
	select {
	case <-first:
	case <-time.After(30 * time.Second):
		t.Fatal("this process's refresh never reached the token endpoint")
	}
	io.WriteString(stdin, "go\n")
	var theirs string
	for lines.Scan() {
		if strings.HasPrefix(lines.Text(), "reply ") {
			theirs = lines.Text()
		}
	}
	werr := cmd.Wait()
	res := <-mine
	mu.Lock()
	t.Logf("the first refresh was held until %s", held)
	mu.Unlock()
	if res.err != nil || res.r.Status != 200 || !res.r.Upstream {
		t.Fatalf("this process's refresh: %v %+v", res.err, res.r)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the token endpoint was called %d times: want once for one login (the other process: %s)", n, theirs)
	}
	if theirs != "reply 200 upstream=false access=true" {
		t.Errorf("the other process: %q (%v)\n%s", theirs, werr, stderr.String())
	}
	data, _ := os.ReadFile(path)
	if tokensOf(readAuth(t, data)) != next {
		t.Errorf("the host's file does not hold the rotated tokens")
	}
}

// flockWaiter reports whether /proc/locks shows a process blocked on an
// flock of the file at path.
func flockWaiter(path string) bool {
	fi, err := os.Stat(path)
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	data, err := os.ReadFile("/proc/locks")
	if err != nil {
		return false
	}
	ino := fmt.Sprintf(":%d ", st.Ino)
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, "->") && strings.Contains(line, "FLOCK") && strings.Contains(line, ino) {
			return true
		}
	}
	return false
}

// TestLockFileNotFollowed plants a symbolic link where the lock file
// goes: the refresh must fail rather than create or lock the link's
// target.
func TestLockFileNotFollowed(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "auth.json")
	real := newLogin(t, 1)
	writeAuth(t, path, real)
	target := filepath.Join(dir, "elsewhere")
	if err := os.Symlink(target, LockPath(path)); err != nil {
		t.Fatal(err)
	}
	l := openLogin(t, path)
	out, _ := l.Render()
	ts := newTokenServer(t, real.refresh, newLogin(t, 2))
	_, err := l.Refresh(context.Background(), "application/json", refreshBody(tokensOf(readAuth(t, out)).refresh), ts.upstream())
	if err == nil {
		t.Fatal("a refresh took a lock file that is a symbolic link")
	}
	if _, serr := os.Lstat(target); !os.IsNotExist(serr) {
		t.Errorf("the link's target was made: %v", serr)
	}
	if n := ts.calls.Load(); n != 0 {
		t.Errorf("the token endpoint was called %d times without the lock", n)
	}
}
