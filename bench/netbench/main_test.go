package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/bench/internal/vmbench"
	"github.com/sbx-dev/sbx/internal/machine/machinetest"
	"github.com/sbx-dev/sbx/internal/machine/qemu"
)

func TestMain(m *testing.M) {
	code := m.Run()
	machinetest.Cleanup()
	os.Exit(code)
}

// TestTinyRun runs the benchmark with a small size on the test sandbox's
// image: both guests boot, download and make their requests, and the
// report has a figure and a ratio for each. Then it checks that the two
// guests really are on different networks: the sandbox's guest cannot
// reach the server by the addresses the user-mode guest uses, nor a name
// its policy does not allow.
func TestTinyRun(t *testing.T) {
	_, _, img := machinetest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	b := &bench{size: 4 << 20, rounds: 1, requests: 10, log: vmbench.Log{W: io.Discard, Name: "netbench"}}
	if testing.Verbose() {
		b.log.W = os.Stderr
	}
	res := &results{}
	err := b.measure(ctx, img, res)
	t.Cleanup(func() {
		if err := b.cleanup(); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.paths) != 2 {
		t.Fatalf("%d networks measured, want 2", len(res.paths))
	}
	for _, p := range res.paths {
		if len(p.downloads) != 1 || len(p.bursts) != 1 || len(p.execTrue) != execSamples {
			t.Errorf("%s: %d downloads, %d bursts, %d execs; want 1, 1, %d", p.name, len(p.downloads), len(p.bursts), len(p.execTrue), execSamples)
		}
	}
	var out strings.Builder
	res.print(&out)
	report := out.String()
	for _, want := range []string{"| download of 4 MiB with `wget -O /dev/null`, median | ", "| 10 sequential `wget` of 1 KiB, a connection each, median | ", "accelerator "} {
		if !strings.Contains(report, want) {
			t.Errorf("the report lacks %q:\n%s", want, report)
		}
	}
	if strings.Contains(report, "n/a") || strings.Contains(report, " 0.0 MB/s") {
		t.Errorf("the report has a missing figure:\n%s", report)
	}

	sandbox, user := b.paths[0], b.paths[1]
	if sandbox.sb == nil || user.sb != nil {
		t.Fatal("the paths are not the sandbox network's then the user-mode network's")
	}
	port := strconv.Itoa(b.srv.port())
	for _, url := range []string{
		"http://" + userGateway + ":" + port + smallPath, // the user-mode network's way to the host
		"http://127.0.0.1:" + port + smallPath,
		"http://denied.test" + smallPath, // no allow rule
	} {
		if _, err := b.exec(ctx, sandbox, 30*time.Second, "wget", "-q", "-T", "5", "-O", "/dev/null", url); err == nil {
			t.Errorf("the sandbox's guest fetched %s", url)
		}
	}
	// A failed wget is an error, not a sample.
	if _, err := b.download(ctx, user, -1); err == nil {
		t.Error("a download the server refused was timed")
	}
	// So is one that wget finished but the measured server did not
	// serve whole: here another server answers in its place.
	other, err := newServer()
	if err != nil {
		t.Fatal(err)
	}
	defer other.close()
	elsewhere := *user
	elsewhere.url = "http://" + userGateway + ":" + strconv.Itoa(other.port())
	if _, err := b.download(ctx, &elsewhere, 1<<20); err == nil || !strings.Contains(err.Error(), "whole bodies") {
		t.Errorf("a download another server made was timed: %v", err)
	}
	if _, err := b.burst(ctx, &elsewhere, 3); err == nil || !strings.Contains(err.Error(), "whole requests") {
		t.Errorf("a burst another server answered was timed: %v", err)
	}
	if whole, _ := other.counts(); whole != 4 {
		t.Errorf("the other server wrote %d whole bodies, want 4: the checks above did not run wget", whole)
	}
}

// TestServer checks the host's server: bodies of the size asked, counted
// whole only when they went out whole, and nonsense refused.
func TestServer(t *testing.T) {
	s, err := newServer()
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	base := "http://127.0.0.1:" + strconv.Itoa(s.port())
	client := &http.Client{Timeout: 30 * time.Second}
	get := func(path string) (int, int64) {
		t.Helper()
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		n, err := io.Copy(io.Discard, resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, n
	}
	if code, n := get(zeroPath + "?n=200001"); code != 200 || n != 200001 {
		t.Errorf("zero: %d, %d bytes; want 200, 200001", code, n)
	}
	if code, n := get(smallPath); code != 200 || n != smallSize {
		t.Errorf("small: %d, %d bytes", code, n)
	}
	if whole, bytes := s.counts(); whole != 2 || bytes != 200001+smallSize {
		t.Errorf("counts %d, %d; want 2, %d", whole, bytes, 200001+smallSize)
	}
	for _, bad := range []string{"?n=-1", "?n=x", "", "?n=1099511627777"} {
		if code, _ := get(zeroPath + bad); code != http.StatusBadRequest {
			t.Errorf("zero%s: status %d, want 400", bad, code)
		}
	}

	// A client that goes away early: the body is not counted whole.
	resp, err := client.Get(base + zeroPath + "?n=" + strconv.Itoa(256<<20))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(io.Discard, resp.Body, 1<<20); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		whole, bytes := s.counts()
		if whole != 2 {
			t.Fatalf("a body cut short was counted whole (%d)", whole)
		}
		if bytes > 200001+smallSize {
			if bytes >= 200001+smallSize+256<<20 {
				t.Errorf("%d bytes counted for a body cut short", bytes)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the handler of the abandoned request did not return within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"1GiB": 1 << 30, "4MiB": 4 << 20, "3KiB": 3 << 10, "12345": 12345, "1024GiB": 1 << 40} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0", "-1MiB", "1GB", "MiB", "1.5GiB", "1025GiB"} {
		if _, err := parseSize(bad); err == nil || !strings.Contains(err.Error(), strconv.Quote(bad)) {
			t.Errorf("parseSize(%q): %v; want an error quoting it", bad, err)
		}
	}
}

// TestReport checks the figures and ratios against samples whose
// answers are easy to work out.
func TestReport(t *testing.T) {
	s := vmbench.Of
	r := &results{
		size: 100e6, requests: 200, hostCPUs: 2,
		host: qemu.Host{Arch: "amd64", Accels: []qemu.Accel{qemu.AccelTCG}},
		qemu: qemu.Binary{Path: "/usr/bin/qemu-system-x86_64"},
		paths: []*pathResult{
			{name: "sandbox network", downloads: s(4, 2, 5), bursts: s(10, 8, 20), execTrue: s(0.03)},
			{name: "QEMU user-mode network", downloads: s(1, 2, 1), bursts: s(4, 5, 5), execTrue: s(0.02)},
		},
	}
	var out strings.Builder
	r.print(&out)
	got := out.String()
	for _, want := range []string{
		// 100 MB in 4 s and 1 s.
		"| download of 100000000 bytes with `wget -O /dev/null`, median | 25.0 MB/s | 100.0 MB/s | 0.25× |",
		"| download of 100000000 bytes with `wget -O /dev/null`, best | 50.0 MB/s | 100.0 MB/s | 0.50× |",
		// 200 requests in 10 s and 5 s.
		"| 200 sequential `wget` of 1 KiB, a connection each, median | 20.0 requests/s | 40.0 requests/s | 0.50× |",
		"| 200 sequential `wget` of 1 KiB, a connection each, best | 25.0 requests/s | 50.0 requests/s | 0.50× |",
		"| 200 sequential `wget` of 1 KiB, a connection each, worst | 10.0 requests/s | 40.0 requests/s | 0.25× |",
		"| download of 100000000 bytes with `wget -O /dev/null`, worst | 20.0 MB/s | 50.0 MB/s | 0.40× |",
		"| 30.0 ms | 20.0 ms |",
		"- sandbox network, downloads of 100000000 bytes: 4.00 s, 2.00 s, 5.00 s",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the report lacks %q:\n%s", want, got)
		}
	}
	// A run cut short before both guests ran prints nothing.
	var none strings.Builder
	(&results{paths: r.paths[:1]}).print(&none)
	if none.Len() != 0 {
		t.Errorf("a partial run printed %q", none.String())
	}
}
