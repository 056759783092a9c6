// Command guestclient runs inside a test sandbox and tries one thing on
// the sandbox's network, printing what happened on one line: the
// sandbox network's end-to-end test copies it into the guest.
//
//	guestclient get [-h1] [-bearer VAR] [-basic USER:VAR] [-host HOST] URL
//	guestclient dial HOST:PORT
//	guestclient udp HOST:PORT
//
// get prints "status CODE PROTO" and the body; dial prints "connected"
// or the error; udp sends a DNS query and prints "answered" or the error.
// Its exit code is 0 whenever it could try.
package main

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: guestclient get|dial|udp ...")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "get":
		get(os.Args[2:])
	case "dial":
		c, err := net.DialTimeout("tcp", os.Args[2], 5*time.Second)
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		c.Close()
		fmt.Println("connected")
	case "udp":
		udp(os.Args[2])
	default:
		fmt.Fprintln(os.Stderr, "unknown verb", os.Args[1])
		os.Exit(2)
	}
}

func get(args []string) {
	fs := flag.NewFlagSet("get", flag.ExitOnError)
	h1 := fs.Bool("h1", false, "HTTP/1.1 only")
	bearer := fs.String("bearer", "", "send Authorization: Bearer $VAR")
	basic := fs.String("basic", "", "send Authorization: Basic USER:$VAR")
	host := fs.String("host", "", "send this Host header")
	fs.Parse(args)
	tr := &http.Transport{ForceAttemptHTTP2: !*h1, TLSClientConfig: &tls.Config{}}
	if *h1 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	client := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	req, err := http.NewRequestWithContext(context.Background(), "GET", fs.Arg(0), nil)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	if *bearer != "" {
		req.Header.Set("Authorization", "Bearer "+os.Getenv(*bearer))
	}
	if *basic != "" {
		user, v, _ := strings.Cut(*basic, ":")
		req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":"+os.Getenv(v))))
	}
	if *host != "" {
		req.Host = *host
	}
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	fmt.Printf("status %d %s\n%s\n", resp.StatusCode, resp.Proto, body)
}

// udp sends a DNS query for example.com to addr and waits 2 s for any
// answer.
func udp(addr string) {
	c, err := net.Dial("udp", addr)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	defer c.Close()
	q := []byte{0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 3, 'c', 'o', 'm', 0, 0, 1, 0, 1}
	if _, err := c.Write(q); err != nil {
		fmt.Println("error:", err)
		return
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 512)
	if _, err := c.Read(buf); err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println("answered")
}
