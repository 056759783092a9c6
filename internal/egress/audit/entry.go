package audit

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sbx-dev/sbx/internal/termtext"
)

// Entry is one line of the audit log: a decision on a connection or a
// request, and what came of it. String fields may come from the guest
// (names, paths, methods); they are JSON-escaped when written and
// terminal-escaped by Format.
type Entry struct {
	Time      time.Time     `json:"time"`
	Sandbox   string        `json:"sandbox,omitempty"`
	Proto     string        `json:"proto"`          // "http","https","h2","ws","tcp","tls-passthrough","dns","udp","ip"; "audit" for a summary of dropped entries
	Name      string        `json:"name,omitempty"` // destination name
	Port      uint16        `json:"port,omitempty"`
	Dst       string        `json:"dst,omitempty"` // address, for refused non-name destinations
	Method    string        `json:"method,omitempty"`
	Path      string        `json:"path,omitempty"` // without query string
	Decision  string        `json:"decision"`       // DecisionAllow or DecisionDeny; DecisionDropped for a summary
	Reason    string        `json:"reason,omitempty"`
	Rule      string        `json:"rule,omitempty"` // e.g. egress.llm
	RuleFile  string        `json:"rule_file,omitempty"`
	RuleLine  int           `json:"rule_line,omitempty"`
	Secrets   []string      `json:"secrets,omitempty"` // names substituted, never values
	Status    int           `json:"status,omitempty"`
	BytesUp   int64         `json:"bytes_up,omitempty"`
	BytesDown int64         `json:"bytes_down,omitempty"`
	Duration  time.Duration `json:"duration_ns,omitempty"`
	// Dropped is set on a summary entry only: how many entries the
	// writer could not keep up with and discarded since the last one.
	Dropped int64 `json:"dropped,omitempty"`
}

// Decisions.
const (
	DecisionAllow = "allow"
	DecisionDeny  = "deny"
	// DecisionDropped marks a summary entry (Proto ProtoAudit) that
	// counts entries the writer discarded.
	DecisionDropped = "dropped"

	ProtoAudit = "audit"
)

// File is the audit log's name in a supervisor's directory; the previous
// one, after rotation, is File + ".1".
const File = "egress.jsonl"

// maxField bounds each string field written, so that one request with a
// megabyte of path cannot make a line of its own a rotation's worth.
const maxField = 2048

func clip(s string) string {
	if len(s) <= maxField {
		return s
	}
	return s[:maxField] + "…"
}

func (e *Entry) clip() {
	e.Sandbox = clip(e.Sandbox)
	e.Proto = clip(e.Proto)
	e.Name = clip(e.Name)
	e.Dst = clip(e.Dst)
	e.Method = clip(e.Method)
	e.Path = clip(e.Path)
	e.Decision = clip(e.Decision)
	e.Reason = clip(e.Reason)
	e.Rule = clip(e.Rule)
	e.RuleFile = clip(e.RuleFile)
	if len(e.Secrets) > 64 {
		e.Secrets = e.Secrets[:64]
	}
	for i, s := range e.Secrets {
		e.Secrets[i] = clip(s)
	}
}

// Format returns e as one readable line: time, decision, proto,
// name:port (or the address), method and path, status, reason, rule and
// its file:line, secret names, bytes each way and duration. Every string
// from the entry is escaped for a terminal, so a guest-chosen path
// cannot move the cursor or start a line of its own.
func Format(e Entry) string {
	var b strings.Builder
	q := termtext.Line
	b.WriteString(e.Time.UTC().Format("2006-01-02T15:04:05.000Z"))
	b.WriteByte(' ')
	fmt.Fprintf(&b, "%-5s %s", q(e.Decision), q(e.Proto))
	if e.Decision == DecisionDropped {
		fmt.Fprintf(&b, " %d entries dropped", e.Dropped)
		if e.Reason != "" {
			b.WriteString(": " + q(e.Reason))
		}
		return b.String()
	}
	dest := e.Name
	if dest == "" {
		dest = e.Dst
	}
	if dest != "" || e.Port != 0 {
		b.WriteByte(' ')
		b.WriteString(q(dest))
		if e.Port != 0 {
			b.WriteString(":" + strconv.Itoa(int(e.Port)))
		}
	}
	if e.Name != "" && e.Dst != "" {
		b.WriteString(" (" + q(e.Dst) + ")")
	}
	if e.Method != "" || e.Path != "" {
		b.WriteString(" " + q(e.Method))
		if e.Path != "" {
			b.WriteString(" " + q(e.Path))
		}
	}
	if e.Status != 0 {
		b.WriteString(" " + strconv.Itoa(e.Status))
	}
	if e.Reason != "" {
		b.WriteString(": " + q(e.Reason))
	}
	if e.Rule != "" || e.RuleFile != "" {
		b.WriteString(" [")
		b.WriteString(q(e.Rule))
		if e.RuleFile != "" {
			if e.Rule != "" {
				b.WriteByte(' ')
			}
			b.WriteString(q(e.RuleFile))
			if e.RuleLine != 0 {
				b.WriteString(":" + strconv.Itoa(e.RuleLine))
			}
		}
		b.WriteByte(']')
	}
	if len(e.Secrets) > 0 {
		names := make([]string, len(e.Secrets))
		for i, s := range e.Secrets {
			names[i] = q(s)
		}
		b.WriteString(" secrets=" + strings.Join(names, ","))
	}
	if e.BytesUp != 0 || e.BytesDown != 0 {
		fmt.Fprintf(&b, " up=%d down=%d", e.BytesUp, e.BytesDown)
	}
	if e.Duration != 0 {
		b.WriteString(" " + e.Duration.Round(time.Millisecond).String())
	}
	return b.String()
}
