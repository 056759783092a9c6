package audit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func TestWriteTailRoundTrip(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(dir, Options{Sandbox: "sb1"})
	if err != nil {
		t.Fatal(err)
	}
	want := Entry{Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Proto: "https", Name: "api.example.test", Port: 443,
		Method: "POST", Path: "/v1/messages", Decision: DecisionAllow, Rule: "egress.llm", RuleFile: "sbx.hcl", RuleLine: 12,
		Secrets: []string{"ANTHROPIC_API_KEY"}, Status: 200, BytesUp: 10, BytesDown: 20, Duration: 1500 * time.Millisecond}
	w.Log(want)
	w.Log(Entry{Proto: "tcp", Dst: "10.0.0.1", Port: 22, Decision: DecisionDeny, Reason: "not a name"})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, File))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
	got, err := Tail(dir, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("got %d entries", len(got))
	}
	want.Sandbox = "sb1"
	if fmt.Sprint(got[0]) != fmt.Sprint(want) {
		t.Errorf("got %+v\nwant %+v", got[0], want)
	}
	if got[1].Time.IsZero() || got[1].Sandbox != "sb1" {
		t.Errorf("time or sandbox not filled: %+v", got[1])
	}
	if one, _ := Tail(dir, 1); len(one) != 1 || one[0].Dst != "10.0.0.1" {
		t.Errorf("Tail 1: %+v", one)
	}
	line := Format(want)
	for _, part := range []string{"allow", "https", "api.example.test:443", "POST /v1/messages", "200", "egress.llm sbx.hcl:12", "secrets=ANTHROPIC_API_KEY", "up=10 down=20", "1.5s"} {
		if !strings.Contains(line, part) {
			t.Errorf("Format %q lacks %q", line, part)
		}
	}
}

// A guest chooses names and paths: neither the file nor Format may carry
// a raw control character, and one entry stays one line.
func TestHostileStringsEscaped(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	evil := "/x\n{\"decision\":\"allow\"}\r\x1b[2J\x1b]0;title\x07\u202e\x00"
	w.Log(Entry{Proto: "http", Name: evil, Path: evil, Method: evil, Decision: DecisionDeny, Reason: evil})
	w.Log(Entry{Proto: "http", Path: strings.Repeat("a", 1<<20), Decision: DecisionDeny})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, File))
	if n := bytes.Count(data, []byte("\n")); n != 2 {
		t.Fatalf("%d lines for 2 entries", n)
	}
	if len(data) > 16<<10 {
		t.Errorf("a 1 MiB path made %d bytes of log", len(data))
	}
	for i, c := range data {
		if (c < 0x20 && c != '\n') || c == 0x7f {
			t.Fatalf("raw control byte %#x at %d", c, i)
		}
	}
	got, _ := Tail(dir, 10)
	if len(got) != 2 || got[0].Path != evil || got[0].Decision != DecisionDeny {
		t.Fatalf("round trip: %+v", got)
	}
	f := Format(got[0])
	if strings.ContainsAny(f, "\n\r\x1b\x07\x00\u202e") {
		t.Errorf("Format left a control character: %q", f)
	}
}

func TestRotationBound(t *testing.T) {
	dir := t.TempDir()
	const max = 4096
	w, err := Open(dir, Options{MaxSize: max, Buffer: 100000})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		w.Log(Entry{Proto: "https", Name: "h.test", Path: fmt.Sprintf("/%d", i), Decision: DecisionAllow, Status: i + 1})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	cur, old := fileSize(t, filepath.Join(dir, File)), fileSize(t, filepath.Join(dir, File+".1"))
	if cur > max || old > max || old == 0 {
		t.Fatalf("sizes %d and %d, bound %d", cur, old, max)
	}
	got, err := Tail(dir, 5)
	if err != nil || len(got) != 5 {
		t.Fatalf("Tail: %d entries, %v", len(got), err)
	}
	if got[4].Status != 2000 || got[0].Status != 1996 {
		t.Errorf("last entries %d..%d", got[0].Status, got[4].Status)
	}
	if w.Dropped() != 0 {
		t.Errorf("dropped %d with room in the queue", w.Dropped())
	}
}

// A flooding guest: 1e5 entries logged as fast as possible return at
// once, the files stay bounded, and every entry is either written or
// counted in a summary entry.
func TestFlood(t *testing.T) {
	for _, tc := range []struct {
		name string
		max  int64
	}{{"bounded", 64 << 10}, {"accounted", 1 << 30}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			w, err := Open(dir, Options{MaxSize: tc.max, Buffer: 256})
			if err != nil {
				t.Fatal(err)
			}
			const n = 100000
			start := time.Now()
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Go(func() {
					for i := range n / 4 {
						w.Log(Entry{Proto: "tcp", Name: "flood.test", Port: uint16(g), Status: i, Decision: DecisionDeny, Reason: "port not listed"})
					}
				})
			}
			wg.Wait()
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("logging %d entries took %v", n, d)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			cur, old := fileSize(t, filepath.Join(dir, File)), fileSize(t, filepath.Join(dir, File+".1"))
			if cur > tc.max || old > tc.max {
				t.Fatalf("sizes %d and %d, bound %d", cur, old, tc.max)
			}
			if tc.max < 1<<30 {
				return
			}
			entries, err := Tail(dir, -1)
			if err != nil {
				t.Fatal(err)
			}
			var written, dropped int64
			for _, e := range entries {
				if e.Decision == DecisionDropped {
					dropped += e.Dropped
				} else {
					written++
				}
			}
			if written+dropped != n || dropped != w.Dropped() {
				t.Errorf("written %d + dropped %d != %d (writer counted %d dropped)", written, dropped, n, w.Dropped())
			}
			t.Logf("written %d, dropped %d", written, dropped)
		})
	}
}

func TestMalformedLinesSkipped(t *testing.T) {
	dir := t.TempDir()
	content := `{"time":"2026-01-01T00:00:00Z","proto":"dns","name":"a.test","decision":"allow"}
not json at all
{"time":"2026-01-01T00:00:01Z","proto":"dns","name":"b.te` + "\x00\xff" + `
{}
[1,2,3]

{"time":"2026-01-01T00:00:02Z","proto":"dns","name":"c.test","decision":"deny"}
{"time":"2026-01-01T00:00:03Z","proto":"dns","name":"torn`
	if err := os.WriteFile(filepath.Join(dir, File+".1"), []byte("garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, File), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	var st Stats
	got, err := TailStats(dir, 10, &st)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "a.test" || got[1].Name != "c.test" {
		t.Fatalf("got %+v", got)
	}
	if st.Malformed != 6 {
		t.Errorf("malformed %d, want 6", st.Malformed)
	}
}

func TestOpenRefusesPlantedSymlink(t *testing.T) {
	t.Run("outside", func(t *testing.T) { testPlantedSymlink(t, filepath.Join(t.TempDir(), "victim")) })
	// A link that stays in the directory is one os.Root would follow.
	t.Run("inside", func(t *testing.T) { testPlantedSymlink(t, "") })
}

func testPlantedSymlink(t *testing.T, victim string) {
	dir := t.TempDir()
	target := victim
	if victim == "" {
		victim, target = filepath.Join(dir, "victim"), "victim"
	}
	if err := os.WriteFile(victim, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, File)); err != nil {
		t.Fatal(err)
	}
	if w, err := Open(dir, Options{}); err == nil {
		w.Log(Entry{Proto: "dns", Decision: DecisionDeny})
		w.Close()
		t.Fatal("Open followed a symbolic link")
	} else if !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("error %q does not say why", err)
	}
	if _, err := Tail(dir, 1); err == nil {
		t.Error("Tail read through a symbolic link")
	}
	if data, _ := os.ReadFile(victim); string(data) != "precious\n" {
		t.Errorf("victim changed: %q", data)
	}
}

func TestOpenRefusesNonRegular(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, File), 0o700); err != nil {
		t.Fatal(err)
	}
	if w, err := Open(dir, Options{}); err == nil {
		w.Close()
		t.Fatal("Open accepted a directory")
	}
}

func TestOpenRefusesOtherUsersFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a file owned by another user")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, File)
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, 12345, 12345); err != nil {
		t.Fatal(err)
	}
	if w, err := Open(dir, Options{}); err == nil {
		w.Close()
		t.Fatal("Open accepted another user's file")
	}
}

func TestLogAfterCloseDoesNotPanic(t *testing.T) {
	w, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w.Log(Entry{Proto: "dns", Decision: DecisionDeny})
	if w.Dropped() != 1 {
		t.Errorf("dropped %d", w.Dropped())
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestFollowAcrossRotation(t *testing.T) {
	defer func(d time.Duration) { followInterval = d }(followInterval)
	followInterval = 5 * time.Millisecond
	dir := t.TempDir()
	// Entries written before Follow starts are not followed.
	w, err := Open(dir, Options{MaxSize: 1500, Buffer: 10000})
	if err != nil {
		t.Fatal(err)
	}
	w.Log(Entry{Proto: "dns", Decision: DecisionAllow, Status: -1})
	waitFor(t, func() bool { return fileSize(t, filepath.Join(dir, File)) > 0 })

	const n, batch = 300, 5
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := make(chan Entry, n+10)
	done := make(chan error, 1)
	var st Stats
	go func() {
		done <- FollowStats(ctx, dir, func(e Entry) error { got <- e; return nil }, &st)
	}()
	time.Sleep(30 * time.Millisecond)
	// Each batch is received before the next is logged, so the writer
	// never rotates more than once between two polls however slow the
	// machine (two rotations are TestFollowTwoRotationsBetweenPolls).
	for i := 0; i < n; i += batch {
		for j := i; j < i+batch; j++ {
			w.Log(Entry{Proto: "https", Name: "f.test", Decision: DecisionAllow, Status: j})
		}
		for j := i; j < i+batch; j++ {
			select {
			case e := <-got:
				if e.Status != j {
					t.Fatalf("entry %d has status %d", j, e.Status)
				}
			case <-ctx.Done():
				t.Fatalf("only %d of %d entries followed", j, n)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if fileSize(t, filepath.Join(dir, File+".1")) == 0 {
		t.Fatal("the log never rotated")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st.Malformed != 0 {
		t.Errorf("malformed %d", st.Malformed)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Two rotations between polls: the file in between is read from .1.
func TestFollowTwoRotationsBetweenPolls(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, File)
	w, err := Open(dir, Options{MaxSize: 1000, Buffer: 10000})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var got []int
	fo := &follower{st: new(Stats), fn: func(e Entry) error { got = append(got, e.Status); return nil }}
	defer fo.close()
	logged := 0
	logUntil := func(cond func() bool) {
		for !cond() {
			w.Log(Entry{Proto: "dns", Name: "two.test", Decision: DecisionAllow, Status: logged})
			logged++
			want := logged
			waitFor(t, func() bool {
				all, _ := Tail(dir, -1)
				return len(all) > 0 && all[len(all)-1].Status == want-1
			})
			if logged > 1000 {
				t.Fatal("no rotation after 1000 entries")
			}
		}
	}
	logUntil(func() bool { return fileSize(t, path) > 0 })
	if err := fo.open(path, false); err != nil {
		t.Fatal(err)
	}
	ino := func(p string) uint64 {
		fi, err := os.Lstat(p)
		if err != nil {
			return 0
		}
		return inode(fi)
	}
	first := ino(path)
	logUntil(func() bool { return ino(path+".1") == first }) // one rotation
	second := ino(path)
	logUntil(func() bool { return ino(path+".1") == second }) // and another
	logUntil(func() bool { return fileSize(t, path) > 0 })
	if err := fo.poll(path); err != nil {
		t.Fatal(err)
	}
	if len(got) != logged {
		t.Fatalf("followed %d of %d entries", len(got), logged)
	}
	for i, s := range got {
		if s != i {
			t.Fatalf("entry %d has status %d", i, s)
		}
	}
}

func TestFollowStopsOnCallbackError(t *testing.T) {
	defer func(d time.Duration) { followInterval = d }(followInterval)
	followInterval = 5 * time.Millisecond
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	stop := errors.New("stop")
	// Follow waits for a log that does not exist yet.
	go func() { done <- Follow(ctx, dir, func(Entry) error { return stop }) }()
	time.Sleep(20 * time.Millisecond)
	w, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.Log(Entry{Proto: "dns", Decision: DecisionAllow})
	select {
	case err := <-done:
		if err != stop {
			t.Fatalf("Follow returned %v", err)
		}
	case <-ctx.Done():
		t.Fatal("Follow did not return")
	}
}

func TestFollowSkipsOverlongLine(t *testing.T) {
	defer func(d time.Duration) { followInterval = d }(followInterval)
	followInterval = 5 * time.Millisecond
	dir := t.TempDir()
	path := filepath.Join(dir, File)
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan Entry, 4)
	var st Stats
	done := make(chan error, 1)
	go func() { done <- FollowStats(ctx, dir, func(e Entry) error { got <- e; return nil }, &st) }()
	time.Sleep(20 * time.Millisecond)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(bytes.Repeat([]byte("x"), 3*maxLine))
	f.Write([]byte("\n{\"proto\":\"dns\",\"decision\":\"allow\",\"name\":\"after.test\"}\n"))
	f.Close()
	select {
	case e := <-got:
		if e.Name != "after.test" {
			t.Fatalf("got %+v", e)
		}
	case <-ctx.Done():
		t.Fatal("entry after an overlong line never arrived")
	}
	cancel()
	<-done
	if st.Malformed != 1 {
		t.Errorf("malformed %d, want 1", st.Malformed)
	}
}

// Log must not wait for the disk: with the writing goroutine stuck, Log
// still returns at once and counts what it could not queue.
func TestLogNeverBlocks(t *testing.T) {
	w := &Writer{ch: make(chan Entry, 2), done: make(chan struct{})}
	returned := make(chan struct{})
	go func() {
		for range 1000 {
			w.Log(Entry{Proto: "dns", Decision: DecisionDeny})
		}
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("Log blocked on a full queue")
	}
	if w.Dropped() != 998 {
		t.Errorf("dropped %d, want 998", w.Dropped())
	}
}

// Dropped entries are reported as soon as the writer has room, not only
// at Close, so `sbx logs -f` shows the gap while the sandbox runs.
func TestDroppedSummaryWrittenWhileRunning(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.dropped.Add(5) // as Log does when the queue is full
	w.Log(Entry{Proto: "dns", Decision: DecisionAllow, Name: "next.test"})
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := Tail(dir, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 2 {
			if got[0].Decision != DecisionDropped || got[0].Dropped != 5 || got[1].Name != "next.test" {
				t.Fatalf("got %+v", got)
			}
			if f := Format(got[0]); !strings.Contains(f, "5 entries dropped") {
				t.Errorf("Format %q", f)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("summary not written while running: %+v", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// When rotation fails the bound still holds: entries are dropped rather
// than the current file growing, and Close reports the failure.
func TestRotationFailureKeepsBound(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, File+".1"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, File+".1", "x"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	const max = 2048
	w, err := Open(dir, Options{MaxSize: max, Buffer: 10000})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 500 {
		w.Log(Entry{Proto: "dns", Name: "r.test", Decision: DecisionDeny, Status: i})
	}
	err = w.Close()
	if err == nil || !strings.Contains(err.Error(), "rotating") {
		t.Errorf("Close: %v", err)
	}
	if size := fileSize(t, filepath.Join(dir, File)); size > max || size == 0 {
		t.Errorf("size %d, bound %d", size, max)
	}
}
