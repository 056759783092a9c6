// Command guestclient runs inside a test sandbox and tries one thing on
// the sandbox's network, printing what happened on one line: the
// sandbox network's end-to-end test copies it into the guest.
//
//	guestclient get [-h1] [-bearer VAR] [-basic USER:VAR] [-host HOST] URL
//	guestclient dial HOST:PORT
//	guestclient udp HOST:PORT
//	guestclient sse URL
//	guestclient ws URL MESSAGE
//
// get prints "status CODE PROTO" and the body; dial prints "connected"
// or the error; udp sends a DNS query and prints "answered" or the error.
// Its exit code is 0 whenever it could try.
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
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
	case "sse":
		sse(os.Args[2])
	case "ws":
		ws(os.Args[2], os.Args[3])
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

// sse prints the lines of an event stream one by one as they arrive.
func sse(url string) {
	resp, err := http.Get(url)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	defer resp.Body.Close()
	fmt.Printf("status %d %s\n", resp.StatusCode, resp.Proto)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line := sc.Text(); line != "" {
			fmt.Println(line)
			os.Stdout.Sync()
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Println("error:", err)
	}
}

// ws opens a WebSocket on url (https), sends msg and prints the reply.
func ws(rawURL, msg string) {
	u, err := url.Parse(rawURL)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	conn, err := tls.Dial("tcp", u.Host+":443", &tls.Config{ServerName: u.Hostname(), NextProtos: []string{"http/1.1"}})
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	key := base64.StdEncoding.EncodeToString([]byte("sbx-test-ws-key!"))
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n", u.RequestURI(), u.Hostname(), key)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		fmt.Printf("status %d\n%s\n", resp.StatusCode, body)
		return
	}
	// One masked text frame.
	mask := [4]byte{1, 2, 3, 4}
	frame := []byte{0x81, 0x80 | byte(len(msg))}
	frame = append(frame, mask[:]...)
	for i := range len(msg) {
		frame = append(frame, msg[i]^mask[i%4])
	}
	if _, err := conn.Write(frame); err != nil {
		fmt.Println("error:", err)
		return
	}
	hdr := make([]byte, 2)
	if _, err := io.ReadFull(br, hdr); err != nil {
		fmt.Println("error:", err)
		return
	}
	payload := make([]byte, hdr[1]&0x7f)
	if _, err := io.ReadFull(br, payload); err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Printf("ws %s\n", payload)
}
