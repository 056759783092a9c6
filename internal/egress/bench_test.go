package egress

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/policy"
)

// The benchmarks each run a fixed workload once per b.N (run them with
// -benchtime 1x) and report the engine side by side with a direct
// loopback connection to the same server, and their ratio:
//
//	go test -run '^$' -bench . -benchtime 1x ./internal/egress/
//
// -short shrinks the workloads (64 MiB transfers, 300 requests).

func benchSizes() (requests int, bytes int64) {
	if testing.Short() {
		return 300, 64 << 20
	}
	return 2000, 1 << 30
}

type benchEnv struct {
	h      *harness
	pki    *upstreamPKI
	upAddr string
}

var zeros = make([]byte, 256<<10)

func newBenchEnv(b *testing.B, withSecret bool) *benchEnv {
	pki := newUpstreamPKI(b)
	up := upstreamTLS(b, pki, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/big" {
			io.WriteString(w, "ok")
			return
		}
		n, _ := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		for n > 0 {
			k, err := w.Write(zeros[:min(n, int64(len(zeros)))])
			if err != nil {
				return
			}
			n -= int64(k)
		}
	}), "api.test")
	s := spec(pki, []policy.AllowRule{allow("api.test", 4)}, mapping("api.test", serverAddr(up)))
	var values map[string][]byte
	var phs map[string]string
	if withSecret {
		s = secretSpec(pki, "api.test", s.Allow, s.Hosts...)
		values, phs = map[string][]byte{"token": []byte(tokenValue)}, map[string]string{"token": tokenPH}
	}
	h := newHarness(b, s, values, phs, func(o *Options) { o.Audit = nil })
	return &benchEnv{h: h, pki: pki, upAddr: serverAddr(up)}
}

// direct is a client that reaches the upstream itself.
func (e *benchEnv) direct(h2 bool) *http.Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", e.upAddr)
		},
		TLSClientConfig:    &tls.Config{RootCAs: e.pki.pool()},
		ForceAttemptHTTP2:  h2,
		DisableCompression: true,
	}
	if !h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
		tr.TLSClientConfig.NextProtos = []string{"http/1.1"}
	}
	return &http.Client{Transport: tr}
}

func latencies(b *testing.B, c *http.Client, n int) (perSec float64, p50, p99 time.Duration) {
	lat := make([]time.Duration, 0, n)
	// One request first so that connections are up.
	if res, err := c.Get("https://api.test/small"); err == nil {
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		t0 := time.Now()
		res, err := c.Get("https://api.test/small")
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		lat = append(lat, time.Since(t0))
	}
	total := time.Since(start)
	slices.Sort(lat)
	return float64(n) / total.Seconds(), lat[n/2], lat[n*99/100]
}

// BenchmarkRequests measures sequential small requests on one kept-alive
// connection: requests/s and the latency the engine adds at p50 and p99.
func BenchmarkRequests(b *testing.B) {
	n, _ := benchSizes()
	for _, h2 := range []bool{false, true} {
		name := "h1"
		if h2 {
			name = "h2"
		}
		b.Run(name, func(b *testing.B) {
			env := newBenchEnv(b, false)
			for i := 0; i < b.N; i++ {
				dRate, d50, d99 := latencies(b, env.direct(h2), n)
				eRate, e50, e99 := latencies(b, env.h.client(h2), n)
				b.ReportMetric(dRate, "direct-req/s")
				b.ReportMetric(eRate, "engine-req/s")
				b.ReportMetric(eRate/dRate, "ratio")
				b.ReportMetric(float64((e50 - d50).Microseconds()), "added-p50-µs")
				b.ReportMetric(float64((e99 - d99).Microseconds()), "added-p99-µs")
				b.Logf("%s %d requests: direct %.0f req/s (p50 %v p99 %v), engine %.0f req/s (p50 %v p99 %v), ratio %.2f",
					name, n, dRate, d50, d99, eRate, e50, e99, eRate/dRate)
			}
		})
	}
}

func download(b *testing.B, c *http.Client, size int64) float64 {
	start := time.Now()
	res, err := c.Get("https://api.test/big?n=" + strconv.FormatInt(size, 10))
	if err != nil {
		b.Fatal(err)
	}
	n, err := io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if err != nil || n != size {
		b.Fatalf("downloaded %d of %d: %v", n, size, err)
	}
	return float64(size) / (1 << 20) / time.Since(start).Seconds()
}

// BenchmarkDownload measures one large HTTPS download (1 GiB), direct and
// through the engine, over h1 and h2, and with a secret in the policy (so
// the body is masked as it streams).
func BenchmarkDownload(b *testing.B) {
	_, size := benchSizes()
	for _, tc := range []struct {
		name   string
		h2     bool
		secret bool
	}{
		{"h1", false, false},
		{"h2", true, false},
		{"h1-masked", false, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			env := newBenchEnv(b, tc.secret)
			for i := 0; i < b.N; i++ {
				d := download(b, env.direct(tc.h2), size)
				e := download(b, env.h.client(tc.h2), size)
				b.ReportMetric(d, "direct-MiB/s")
				b.ReportMetric(e, "engine-MiB/s")
				b.ReportMetric(e/d, "ratio")
				b.Logf("%s %d MiB: direct %.0f MiB/s, engine %.0f MiB/s, ratio %.2f", tc.name, size>>20, d, e, e/d)
			}
		})
	}
}

// BenchmarkTCPSplice measures a raw TCP download through a tcp rule's
// splice against reading the same server directly.
func BenchmarkTCPSplice(b *testing.B) {
	_, size := benchSizes()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				for n := size; n > 0; {
					k, err := c.Write(zeros[:min(n, int64(len(zeros)))])
					if err != nil {
						return
					}
					n -= int64(k)
				}
			}()
		}
	}()
	h := newHarness(b, policy.Sandbox{
		TCP:   []policy.TCPRule{{Dest: policy.HostPort{Host: "bulk.test", Port: 9000}}},
		Hosts: []policy.HostMapping{mapping("bulk.test", l.Addr().String())},
	}, nil, nil, func(o *Options) { o.Audit = nil })
	read := func(addr string) float64 {
		start := time.Now()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		n, err := io.Copy(io.Discard, c)
		if err != nil || n != size {
			b.Fatalf("read %d of %d: %v", n, size, err)
		}
		return float64(size) / (1 << 20) / time.Since(start).Seconds()
	}
	for i := 0; i < b.N; i++ {
		d := read(l.Addr().String())
		e := read(h.addr("bulk.test", 9000))
		b.ReportMetric(d, "direct-MiB/s")
		b.ReportMetric(e, "engine-MiB/s")
		b.ReportMetric(e/d, "ratio")
		b.Logf("tcp %d MiB: direct %.0f MiB/s, spliced %.0f MiB/s, ratio %.2f", size>>20, d, e, e/d)
	}
}
