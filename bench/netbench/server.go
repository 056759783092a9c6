package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Paths the host's server answers.
const (
	zeroPath  = "/zero" // ?n=BYTES: that many zero bytes
	smallPath = "/small"
	smallSize = 1 << 10
	chunkSize = 64 << 10
	maxSize   = 1 << 40
)

// server is the host's loopback HTTP server both guests download from.
// It counts the bodies it wrote whole, so that a download the guest's
// client cut short, or never made, cannot pass as a measurement.
type server struct {
	srv *http.Server
	ln  net.Listener

	mu       sync.Mutex
	complete int   // bodies written whole
	bytes    int64 // body bytes written, whole or not
}

// newServer listens on 127.0.0.1 (port chosen by the kernel) and serves.
func newServer() (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &server{ln: ln}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+zeroPath, s.zero)
	mux.HandleFunc("GET "+smallPath, s.small)
	// The guests' clients are slow, so only the header wait is bounded:
	// a write timeout would cut a 1 GiB download under emulation short.
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: time.Minute}
	go s.srv.Serve(ln)
	return s, nil
}

// port is the server's port on 127.0.0.1.
func (s *server) port() int { return s.ln.Addr().(*net.TCPAddr).Port }

func (s *server) close() error {
	err := s.srv.Close()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// counts returns the bodies written whole and the body bytes written.
func (s *server) counts() (int, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.complete, s.bytes
}

func (s *server) zero(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
	if err != nil || n < 0 || n > maxSize {
		http.Error(w, "n must be a byte count from 0 to 2^40", http.StatusBadRequest)
		return
	}
	s.write(w, n)
}

func (s *server) small(w http.ResponseWriter, r *http.Request) { s.write(w, smallSize) }

// write sends n zero bytes with their length announced, as a file
// server would.
func (s *server) write(w http.ResponseWriter, n int64) {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	buf := make([]byte, min(n, chunkSize))
	var sent int64
	for sent < n {
		k, err := w.Write(buf[:min(n-sent, int64(len(buf)))])
		sent += int64(k)
		if err != nil {
			break
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bytes += sent
	if sent == n {
		s.complete++
	}
}

// parseSize reads a byte count: a number, or one with a KiB, MiB or GiB
// suffix.
func parseSize(arg string) (int64, error) {
	s, mult := arg, int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if len(s) > len(u.suffix) && s[len(s)-len(u.suffix):] == u.suffix {
			s, mult = s[:len(s)-len(u.suffix)], u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > maxSize/mult {
		return 0, fmt.Errorf("size %q: want a positive number of bytes, KiB, MiB or GiB, at most 1 TiB", arg)
	}
	return n * mult, nil
}
