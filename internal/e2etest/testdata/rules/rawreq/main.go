// Command rawreq sends HTTP requests from inside a guest exactly as
// written, as a hostile guest would: raw HTTP/1.1 request lines and raw
// HTTP/2 frames over TLS to port 443, with nothing a client library would
// normalise (dot segments, ";", "\", lower-case methods, override
// headers). It is built statically by TestRequestRulesInVM
// (rules_vm_test.go) and placed in the image.
//
// It reads one request a line from stdin, fields separated by tabs:
//
//	PROTO METHOD HOST TARGET HEADER BODY
//
// PROTO is h1 or h2; HEADER is "name: value" or "-"; BODY is a Go-quoted
// string or "-". It prints one line a request: the status (0 when the
// stream or connection was refused before a response), a tab and the
// start of the response body on one line. It does not verify the
// certificate it is given: the guest is the attacker here.
package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

func main() {
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 6 {
			fmt.Printf("0\tbad line %q\n", sc.Text())
			continue
		}
		var hdr [][2]string
		if f[4] != "-" {
			k, v, _ := strings.Cut(f[4], ": ")
			hdr = append(hdr, [2]string{k, v})
		}
		body := ""
		if f[5] != "-" {
			var err error
			if body, err = strconv.Unquote(f[5]); err != nil {
				fmt.Printf("0\tbad body %q\n", f[5])
				continue
			}
		}
		code, out, err := exchange(f[0], f[1], f[2], f[3], hdr, body)
		if err != nil {
			out = err.Error()
		}
		if len(out) > 300 {
			out = out[:300]
		}
		fmt.Printf("%d\t%s\n", code, strings.Join(strings.Fields(out), " "))
	}
}

func exchange(proto, method, host, target string, hdr [][2]string, body string) (int, string, error) {
	alpn := "http/1.1"
	if proto == "h2" {
		alpn = "h2"
	}
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 20 * time.Second}, "tcp", host+":443",
		&tls.Config{ServerName: host, InsecureSkipVerify: true, NextProtos: []string{alpn}})
	if err != nil {
		return 0, "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	if proto == "h1" {
		var b bytes.Buffer
		fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", method, target, host)
		for _, h := range hdr {
			fmt.Fprintf(&b, "%s: %s\r\n", h[0], h[1])
		}
		if body != "" {
			fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
		}
		b.WriteString("\r\n" + body)
		if _, err := c.Write(b.Bytes()); err != nil {
			return 0, "", err
		}
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return 0, "", err
		}
		out, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(out), nil
	}
	if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
		return 0, "", fmt.Errorf("ALPN %q", p)
	}
	io.WriteString(c, http2.ClientPreface)
	fr := http2.NewFramer(c, c)
	fr.WriteSettings()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range append([][2]string{{":method", method}, {":scheme", "https"}, {":authority", host}, {":path", target}}, hdr...) {
		enc.WriteField(hpack.HeaderField{Name: strings.ToLower(f[0]), Value: f[1]})
	}
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: body == "", EndHeaders: true})
	if body != "" {
		fr.WriteData(1, true, []byte(body))
	}
	dec := hpack.NewDecoder(4096, nil)
	status := 0
	var out bytes.Buffer
	for i := 0; i < 1000; i++ {
		f, err := fr.ReadFrame()
		if err != nil {
			return status, out.String(), err
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		case *http2.RSTStreamFrame, *http2.GoAwayFrame:
			return status, out.String(), nil
		case *http2.HeadersFrame:
			hf, err := dec.DecodeFull(f.HeaderBlockFragment())
			if err != nil {
				return status, "", err
			}
			for _, x := range hf {
				if x.Name == ":status" {
					status, _ = strconv.Atoi(x.Value)
				}
			}
			if f.StreamEnded() {
				return status, out.String(), nil
			}
		case *http2.DataFrame:
			out.Write(f.Data())
			if f.StreamEnded() {
				return status, out.String(), nil
			}
		}
	}
	return status, out.String(), fmt.Errorf("no end of stream in 1000 frames")
}
