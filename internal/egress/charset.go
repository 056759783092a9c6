package egress

import (
	"mime"
	"net/http"
	"strings"
)

// dropCharsetAsks removes from h what asks a server to answer in a
// charset of the client's choosing: Accept-Charset, and the charset
// parameter of each media range in Accept (which JAX-RS frameworks and
// others honour). An echo of a credential in UTF-16 or EBCDIC would not
// be recognised by the masker.
func dropCharsetAsks(h http.Header) {
	h.Del("Accept-Charset")
	vals := h.Values("Accept")
	if len(vals) == 0 {
		return
	}
	out := make([]string, 0, len(vals))
	for _, v := range vals {
		ranges := strings.Split(v, ",")
		for i, rg := range ranges {
			parts := strings.Split(rg, ";")
			kept := parts[:1]
			for _, p := range parts[1:] {
				name, _, _ := strings.Cut(p, "=")
				if !strings.EqualFold(strings.TrimSpace(name), "charset") {
					kept = append(kept, p)
				}
			}
			ranges[i] = strings.Join(kept, ";")
		}
		out = append(out, strings.Join(ranges, ","))
	}
	h["Accept"] = out
}

// unmaskableCharset returns the charset a response's Content-Type
// declares when it is not one that writes ASCII text as ASCII bytes (so
// that an echoed value could pass the masker), or "" when it is, or none
// is declared. A Content-Type that does not parse but mentions a charset
// is returned whole.
func unmaskableCharset(h http.Header) string {
	for _, v := range h.Values("Content-Type") {
		_, params, err := mime.ParseMediaType(v)
		if err != nil {
			if strings.Contains(strings.ToLower(v), "charset") {
				return v
			}
			continue
		}
		if cs, ok := params["charset"]; ok && !asciiCompatible(cs) {
			return cs
		}
	}
	return ""
}

// asciiCompatible reports whether charset cs is one of those known to
// encode every ASCII character as its ASCII byte: UTF-8, US-ASCII, the
// ISO 8859 parts and the Windows 125x code pages. Any other (UTF-16,
// UTF-32, UCS-2, UTF-7, EBCDIC code pages, ones not known) is not.
func asciiCompatible(cs string) bool {
	cs = strings.ToLower(strings.TrimSpace(cs))
	switch cs {
	case "utf-8", "utf8", "us-ascii", "ascii", "latin1":
		return true
	}
	for _, prefix := range []string{"iso-8859-", "iso_8859-", "iso8859-"} {
		if n, ok := strings.CutPrefix(cs, prefix); ok {
			return n != "" && strings.Trim(n, "0123456789") == ""
		}
	}
	for _, prefix := range []string{"windows-125", "cp125"} {
		if n, ok := strings.CutPrefix(cs, prefix); ok {
			return len(n) == 1 && '0' <= n[0] && n[0] <= '8'
		}
	}
	return false
}
