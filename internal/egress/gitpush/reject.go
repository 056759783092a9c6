package gitpush

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// ContentTypeResult is the content type of a receive-pack response.
const ContentTypeResult = "application/x-git-receive-pack-result"

// maxReason bounds the reason in each status line.
const maxReason = 512

// Reject writes a complete receive-pack response refusing every command
// in cmds: "unpack ok" and, for each, "ng <ref> <reason>", which git
// prints as " ! [remote rejected] <src> -> <ref> (<reason>)". The report
// goes in side-band-64k (or side-band) framing when caps asks for it,
// with the reason also sent as a progress message; a client that asked
// for no report-status gets the reason as a side-band error, or as an
// HTTP 403 without side-band. The reason is reduced to one line of
// printable ASCII. The caller must have drained or discarded the request
// body.
func Reject(w http.ResponseWriter, cmds []Command, caps []string, reason string) error {
	reason = cleanReason(reason)
	report := slices.Contains(caps, "report-status") || slices.Contains(caps, "report-status-v2")
	band := 0
	switch {
	case slices.Contains(caps, "side-band-64k"):
		band = 65520 - 5
	case slices.Contains(caps, "side-band"):
		band = 1000 - 5
	}
	if !report && band == 0 {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusForbidden)
		_, err := fmt.Fprintf(w, "push refused: %s\n", reason)
		return err
	}
	var body bytes.Buffer
	if !report {
		writeBand(&body, 3, []byte("push refused: "+reason+"\n"), band)
	} else {
		var status bytes.Buffer
		writePkt(&status, []byte("unpack ok\n"))
		for _, c := range cmds {
			writePkt(&status, []byte("ng "+c.Ref+" "+reason+"\n"))
		}
		status.WriteString("0000")
		if band == 0 {
			body = status
		} else {
			writeBand(&body, 2, []byte("push refused: "+reason+"\n"), band)
			writeBand(&body, 1, status.Bytes(), band)
			body.WriteString("0000")
		}
	}
	h := w.Header()
	h.Set("Content-Type", ContentTypeResult)
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(body.Bytes())
	return err
}

func writePkt(b *bytes.Buffer, payload []byte) {
	fmt.Fprintf(b, "%04x", len(payload)+4)
	b.Write(payload)
}

// writeBand writes data as side-band packets on channel ch, each at most
// max bytes of data.
func writeBand(b *bytes.Buffer, ch byte, data []byte, max int) {
	for len(data) > 0 {
		n := min(len(data), max)
		writePkt(b, append([]byte{ch}, data[:n]...))
		data = data[n:]
	}
}

func cleanReason(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			b.WriteByte(' ')
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\x%02x", r)
		case r > 0x7e:
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteRune(r)
		}
		if b.Len() >= maxReason {
			break
		}
	}
	out := strings.TrimSpace(b.String())
	if out == "" {
		out = "refused by the sandbox's egress policy"
	}
	return out
}
