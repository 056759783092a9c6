// Command wsguest runs inside a test sandbox and plays a hostile
// WebSocket client against the sandbox's egress engine, printing what it
// got: the WebSocket test of the sandbox network copies it into the
// guest.
//
//	wsguest read URL          upgrade with "Authorization: Bearer $TOKEN",
//	                          print every byte read after the 101 (%q),
//	                          until a close frame or the end
//	wsguest send URL          upgrade without a credential, send $TOKEN
//	                          split across two fragments, print the close
//	                          code the stream ends with
//	wsguest upgrade URL PROTO ask, with the credential, to switch to PROTO;
//	                          print the status and what follows
//
// Its exit code is 0 whenever it could try.
package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: wsguest read|send|upgrade URL ...")
		os.Exit(2)
	}
	token := os.Getenv("TOKEN")
	switch os.Args[1] {
	case "read":
		c, br, res := open(os.Args[2], "websocket", "Authorization: Bearer "+token)
		if c == nil {
			return
		}
		defer c.Close()
		if res.StatusCode != http.StatusSwitchingProtocols {
			fmt.Printf("status %d\n", res.StatusCode)
			return
		}
		var raw bytes.Buffer
		for {
			op, p, err := readFrame(io.TeeReader(br, &raw))
			if err != nil || op == 0x8 {
				_ = p
				break
			}
		}
		fmt.Printf("read %q\n", raw.Bytes())
	case "send":
		c, br, res := open(os.Args[2], "websocket", "")
		if c == nil {
			return
		}
		defer c.Close()
		if res.StatusCode != http.StatusSwitchingProtocols {
			fmt.Printf("status %d\n", res.StatusCode)
			return
		}
		half := len(token) / 2
		c.Write(frame(false, 0x1, []byte(`{"key":"`+token[:half])))
		c.Write(frame(true, 0x0, []byte(token[half:]+`"}`)))
		for {
			op, p, err := readFrame(br)
			if err != nil {
				fmt.Println("ended without a close frame:", err)
				return
			}
			if op == 0x8 && len(p) >= 2 {
				fmt.Printf("close %d %s\n", binary.BigEndian.Uint16(p), p[2:])
				return
			}
			fmt.Printf("frame %#x %q\n", op, p)
		}
	case "upgrade":
		if len(os.Args) < 4 {
			os.Exit(2)
		}
		c, br, res := open(os.Args[2], os.Args[3], "Authorization: Bearer "+token)
		if c == nil {
			return
		}
		defer c.Close()
		fmt.Printf("status %d\n", res.StatusCode)
		if res.StatusCode == http.StatusSwitchingProtocols {
			line, _ := br.ReadString('\n')
			fmt.Printf("then %q\n", line)
		}
	}
}

// open sends an upgrade request to proto on url (https) with the extra
// header line.
func open(rawURL, proto, extra string) (*tls.Conn, *bufio.Reader, *http.Response) {
	u, err := url.Parse(rawURL)
	if err != nil {
		fmt.Println("error:", err)
		return nil, nil, nil
	}
	c, err := tls.Dial("tcp", u.Host+":443", &tls.Config{ServerName: u.Hostname(), NextProtos: []string{"http/1.1"}})
	if err != nil {
		fmt.Println("error:", err)
		return nil, nil, nil
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	key := base64.StdEncoding.EncodeToString([]byte("sbx-test-ws-key!"))
	req := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: %s\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Extensions: permessage-deflate\r\n", u.RequestURI(), u.Hostname(), proto, key)
	if extra != "" {
		req += extra + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		fmt.Println("error:", err)
		c.Close()
		return nil, nil, nil
	}
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		fmt.Println("error:", err)
		c.Close()
		return nil, nil, nil
	}
	return c, br, res
}

// frame makes a masked client frame.
func frame(fin bool, op byte, p []byte) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	key := [4]byte{9, 8, 7, 6}
	b := []byte{b0, 0x80 | byte(len(p))}
	b = append(b, key[:]...)
	for i, c := range p {
		b = append(b, c^key[i%4])
	}
	return b
}

// readFrame reads one server frame (short or 16-bit length).
func readFrame(r io.Reader) (byte, []byte, error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := int(h[1] & 0x7f)
	if n == 126 {
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return 0, nil, err
		}
		n = int(binary.BigEndian.Uint16(b[:]))
	} else if n == 127 {
		return 0, nil, fmt.Errorf("a frame too long for this client")
	}
	p := make([]byte, n)
	_, err := io.ReadFull(r, p)
	return h[0] & 0x0f, p, err
}
