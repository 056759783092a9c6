package egress

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// gRPC is HTTP/2 with a content type of application/grpc[+codec], a body
// of length-prefixed messages (a flag byte, a four-byte big-endian
// length, the message) and its status in trailers (grpc-status,
// grpc-message). The engine proxies it as any HTTP/2 request — request
// rules judge its /package.Service/Method path, secrets are substituted
// into its metadata (headers) — with two differences:
//
//   - a refusal is a gRPC status, not a 403 page: HTTP 200 with the
//     status in a trailers-only response, which a gRPC client shows as
//     the status and message (a 403 would reach it as Unavailable or
//     Unknown, without the reason);
//   - with secrets, a response's messages are read whole before any of
//     each is sent on, and checked for the values masking looks for. A
//     message that holds one cannot be masked, since the placeholder's
//     length differs from the value's and the message's own encoding
//     (protobuf's length-prefixed fields) would break; the stream is
//     ended instead, with grpc-status INTERNAL naming why, and the value
//     never reaches the guest. Messages without one go on at once and
//     unchanged, so a server stream is not held back.

// A trailers-only response (the status in the headers, which end the
// stream) is answered by the engine itself, so that it stays one: passed
// through the reverse proxy, its headers could be flushed to the guest
// before the proxy learns there is no body, and the guest would get the
// headers and then an empty end of stream, which gRPC clients report as
// a stream closed without trailers.

// maxGRPCMessage bounds a response message read whole to be checked for
// secret values (gRPC clients take 4 MiB by default).
const maxGRPCMessage = 16 << 20

// gRPC status codes the engine answers with.
const (
	grpcInternal          = 13
	grpcPermissionDenied  = 7
	grpcDeadlineExceeded  = 4
	grpcUnavailable       = 14
	grpcResourceExhausted = 8
)

// isGRPC reports whether r is a gRPC request: HTTP/2 with a gRPC content
// type.
func isGRPC(r *http.Request) bool {
	return r.ProtoMajor == 2 && isGRPCType(r.Header.Get("Content-Type"))
}

func isGRPCResponse(res *http.Response) bool {
	return res.ProtoMajor == 2 && isGRPCType(res.Header.Get("Content-Type"))
}

func isGRPCType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/grpc" || strings.HasPrefix(mt, "application/grpc+")
}

// isGRPCTrailersOnly reports whether res is a gRPC trailers-only
// response: its status in the headers and no body (the HTTP/2 transport
// gives a response whose headers ended the stream a length of 0).
func isGRPCTrailersOnly(res *http.Response) bool {
	return isGRPCResponse(res) && res.ContentLength == 0 && res.Header.Get("Grpc-Status") != ""
}

// grpcTrailersOnly carries a trailers-only response from modifyResponse
// to upstreamError, which writes it whole.
type grpcTrailersOnly struct{ header http.Header }

func (t *grpcTrailersOnly) Error() string { return "a gRPC trailers-only response" }

func (t *grpcTrailersOnly) write(w http.ResponseWriter) {
	h := w.Header()
	for k, vv := range t.header {
		if k == "Content-Length" {
			continue
		}
		h[k] = append([]string(nil), vv...)
	}
	w.WriteHeader(http.StatusOK)
}

// writeRefusal answers a refused request: a gRPC status for a gRPC
// request, else a one-line reason with status.
func writeRefusal(w http.ResponseWriter, r *http.Request, status int, reason string) {
	if !isGRPC(r) {
		writeDenial(w, status, reason)
		return
	}
	code := grpcUnavailable
	switch status {
	case http.StatusForbidden:
		code = grpcPermissionDenied
	case http.StatusGatewayTimeout:
		code = grpcDeadlineExceeded
	}
	h := w.Header()
	h.Set("Content-Type", "application/grpc")
	h.Set("Grpc-Status", strconv.Itoa(code))
	h.Set("Grpc-Message", grpcMessage("sbx egress: "+oneLine(reason)))
	// No body: the HTTP/2 server sends the headers alone with the end
	// of the stream, which is gRPC's trailers-only response.
	w.WriteHeader(http.StatusOK)
}

// grpcMessage percent-encodes s as grpc-message wants: every byte
// outside printable ASCII, and %.
func grpcMessage(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '%' {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// grpcMasker passes on a gRPC response body message by message, each
// read whole and checked for the replacer's strings first; see the
// comment at the top of this file. At the body's end it masks the
// trailers, as maskReader does.
type grpcMasker struct {
	r   *replacer
	res *http.Response
	src io.ReadCloser
	max int
	out []byte
	err error
}

func newGRPCMasker(r *replacer, res *http.Response, max int) *grpcMasker {
	return &grpcMasker{r: r, res: res, src: res.Body, max: max}
}

func (g *grpcMasker) Read(p []byte) (int, error) {
	for len(g.out) == 0 {
		if g.err != nil {
			return 0, g.err
		}
		g.out, g.err = g.next()
	}
	n := copy(p, g.out)
	g.out = g.out[n:]
	return n, nil
}

func (g *grpcMasker) Close() error { return g.src.Close() }

// next reads one message and returns it, framing included, or ends the
// stream.
func (g *grpcMasker) next() ([]byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(g.src, hdr[:]); err != nil {
		if err == io.EOF {
			for _, vals := range g.res.Trailer {
				for i, v := range vals {
					vals[i] = g.r.replaceString(v)
				}
			}
			return nil, io.EOF
		}
		return nil, g.readErr(err)
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if uint64(n) > uint64(g.max) {
		return g.end(grpcResourceExhausted, fmt.Sprintf("the upstream sent a gRPC message of %d bytes; messages of more than %d bytes cannot be checked for secret values", n, g.max))
	}
	msg := make([]byte, 5+int(n))
	copy(msg, hdr[:])
	if _, err := io.ReadFull(g.src, msg[5:]); err != nil {
		return nil, g.readErr(err)
	}
	plain := msg[5:]
	if hdr[0]&1 != 0 {
		enc := strings.ToLower(strings.TrimSpace(g.res.Header.Get("Grpc-Encoding")))
		if enc != "gzip" {
			return g.end(grpcInternal, fmt.Sprintf("the upstream sent a gRPC message compressed with %q, which cannot be checked for secret values", enc))
		}
		zr, err := gzip.NewReader(bytes.NewReader(plain))
		if err == nil {
			plain, err = io.ReadAll(io.LimitReader(zr, int64(g.max)+1))
		}
		if err != nil {
			return g.end(grpcInternal, "decoding the upstream's gzip gRPC message to check it for secret values: "+err.Error())
		}
		if len(plain) > g.max {
			return g.end(grpcResourceExhausted, fmt.Sprintf("the upstream sent a gRPC message of more than %d bytes uncompressed, which cannot be checked for secret values", g.max))
		}
	}
	if masked, _ := g.r.process(nil, plain, true); !bytes.Equal(masked, plain) {
		return g.end(grpcInternal, "the upstream's gRPC message held a secret's value, which the guest may not see; the stream was ended")
	}
	return msg, nil
}

func (g *grpcMasker) readErr(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("the upstream's gRPC body ended inside a message")
	}
	return err
}

// end stops reading the upstream and ends the guest's stream after the
// messages already sent, with status code and message in its trailers
// instead of the upstream's.
func (g *grpcMasker) end(code int, msg string) ([]byte, error) {
	g.src.Close()
	g.res.Trailer = http.Header{
		"Grpc-Status":  {strconv.Itoa(code)},
		"Grpc-Message": {grpcMessage("sbx egress: " + msg)},
	}
	return nil, io.EOF
}
