package sigv4

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// MaxChunk bounds one aws-chunked chunk: each is held whole, since its
// signature covers its bytes and precedes them. SDKs send 64 KiB.
const MaxChunk = 8 << 20

// ChunkSigner signs the chunks of one aws-chunked body, each chained
// from the one before, starting at the seed signature (the request's).
type ChunkSigner struct {
	key      []byte
	amzDate  string
	scope    string
	previous string
}

// NewChunkSigner returns a signer for the chunks of a request signed
// with seed under a (its scope) at amzDate, with secret.
func NewChunkSigner(a *Auth, amzDate, seed, secret string) *ChunkSigner {
	return &ChunkSigner{key: SigningKey(secret, a.Date, a.Region, a.Service), amzDate: amzDate, scope: a.Scope(), previous: seed}
}

// Sign returns the signature of the next chunk, data (empty for the
// last), and makes it the one the following chunk chains from.
func (c *ChunkSigner) Sign(data []byte) string {
	h := sha256.Sum256(data)
	sts := "AWS4-HMAC-SHA256-PAYLOAD\n" + c.amzDate + "\n" + c.scope + "\n" + c.previous + "\n" + EmptySHA256 + "\n" + hex.EncodeToString(h[:])
	c.previous = hex.EncodeToString(hmacSHA256(c.key, []byte(sts)))
	return c.previous
}

// EncodeChunk renders one chunk of an aws-chunked body.
func EncodeChunk(data []byte, sig string) []byte {
	out := []byte(strconv.FormatInt(int64(len(data)), 16) + ";chunk-signature=" + sig + "\r\n")
	out = append(out, data...)
	return append(out, "\r\n"...)
}

// Resigner reads an aws-chunked body signed chunk by chunk by one
// credential and yields it signed by another: every chunk's signature is
// checked (in constant time) against the guest's chain before the chunk,
// signed again in the new chain, is passed on. A chunk that fails, a
// malformed frame, bytes after the last chunk or a body that ends early
// fail the read, so that nothing after the bad chunk leaves. Its output
// has the input's length: signatures are all 64 hex digits.
type Resigner struct {
	src      *bufio.Reader
	closer   io.Closer
	verify   *ChunkSigner
	sign     *ChunkSigner
	out      []byte
	err      error
	done     bool
	decoded  int64
	declared int64
}

// NewResigner checks src's chunks with verify and re-signs them with
// sign. declared is x-amz-decoded-content-length, or -1.
func NewResigner(src io.ReadCloser, verify, sign *ChunkSigner, declared int64) *Resigner {
	return &Resigner{src: bufio.NewReaderSize(src, 64<<10), closer: src, verify: verify, sign: sign, declared: declared}
}

// ErrChunk is wrapped by every chunk verification failure.
var ErrChunk = errors.New("aws-chunked body")

func (r *Resigner) Read(p []byte) (int, error) {
	for len(r.out) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		if r.done {
			r.err = r.trailing()
			continue
		}
		if err := r.next(); err != nil {
			r.err = fmt.Errorf("%w: %v", ErrChunk, err)
		}
	}
	n := copy(p, r.out)
	r.out = r.out[n:]
	return n, nil
}

func (r *Resigner) trailing() error {
	if _, err := r.src.ReadByte(); err != io.EOF {
		if err == nil {
			return fmt.Errorf("%w: bytes after the last chunk", ErrChunk)
		}
		return err
	}
	return io.EOF
}

func (r *Resigner) next() error {
	line, err := r.src.ReadSlice('\n')
	if err != nil {
		if err == io.EOF || err == bufio.ErrBufferFull {
			return errors.New("truncated or overlong chunk header")
		}
		return err
	}
	head := strings.TrimSuffix(string(line), "\r\n")
	if len(head) == len(line) {
		return errors.New("chunk header without CRLF")
	}
	size, sig, ok := strings.Cut(head, ";chunk-signature=")
	if !ok || !IsHexSHA256(sig) || size == "" || len(size) > 8 {
		return errors.New("malformed chunk header")
	}
	n, err := strconv.ParseInt(size, 16, 64)
	if err != nil || n < 0 || n > MaxChunk {
		return fmt.Errorf("chunk size %q out of bounds", size)
	}
	data := make([]byte, n+2)
	if _, err := io.ReadFull(r.src, data); err != nil {
		return errors.New("truncated chunk")
	}
	if string(data[n:]) != "\r\n" {
		return errors.New("chunk without trailing CRLF")
	}
	data = data[:n]
	if want := r.verify.Sign(data); !hmac.Equal([]byte(want), []byte(sig)) {
		return errors.New("a chunk's signature does not match its bytes")
	}
	r.decoded += n
	if r.declared >= 0 && r.decoded > r.declared {
		return errors.New("more bytes than x-amz-decoded-content-length")
	}
	if n == 0 {
		if r.declared >= 0 && r.decoded != r.declared {
			return errors.New("fewer bytes than x-amz-decoded-content-length")
		}
		// The last chunk is empty: "0;chunk-signature=…\r\n\r\n".
		r.done = true
		r.out = EncodeChunk(nil, r.sign.Sign(nil))
		return nil
	}
	r.out = EncodeChunk(data, r.sign.Sign(data))
	return nil
}

// Close closes the source.
func (r *Resigner) Close() error { return r.closer.Close() }
