package bootproto

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Prefixes of the lines the agent prints on the console. Each line is
// written whole, in one write, and ends in "\n".
const (
	// ReadyPrefix starts the one ready line: "sbx-guest: ready {json}",
	// the JSON being a Ready.
	ReadyPrefix = "sbx-guest: ready "
	// ErrorPrefix starts the line printed when boot fails, just before
	// the agent powers the machine off.
	ErrorPrefix = "sbx-guest: error: "
	// WarningPrefix starts lines about problems boot survives, such as a
	// module the hardware has no use for.
	WarningPrefix = "sbx-guest: warning: "
	// StepPrefix starts the line the agent prints as it begins a step
	// of a configure request that can wait on something outside it
	// (the network interface, a mount): the host quotes the last one
	// when the request does not finish.
	StepPrefix = "sbx-guest: configuring: "
)

// Ready is what the agent reports once the guest is up.
type Ready struct {
	// Kernel is the running kernel's release (uname -r).
	Kernel string `json:"kernel"`
	// Hostname is the host name the agent set.
	Hostname string `json:"hostname"`
	// Mode is the mode the agent runs in.
	Mode Mode `json:"mode"`
	// Root is the root disk's device.
	Root string `json:"root"`
	// Modules is how many kernel modules the agent loaded.
	Modules int `json:"modules"`
	// UptimeMillis is the kernel's uptime at the ready line, in
	// milliseconds: the whole boot, kernel included.
	UptimeMillis int64 `json:"uptime_ms"`
	// AgentMillis is the time from the agent's start to the ready line.
	AgentMillis int64 `json:"agent_ms"`
}

// Line renders r as the ready line, with its newline.
func (r Ready) Line() string {
	b, err := json.Marshal(r)
	if err != nil {
		// A struct of strings and integers always marshals.
		panic(err)
	}
	return ReadyPrefix + string(b) + "\n"
}

// ParseReady finds the ready line in console output and decodes it. The
// line may follow other output on the same line (the kernel's messages
// share the console) and may end in "\r\n". It reports ok false when
// there is no ready line, and an error when there is one that does not
// decode.
func ParseReady(console []byte) (r Ready, ok bool, err error) {
	i := bytes.Index(console, []byte(ReadyPrefix))
	if i < 0 {
		return Ready{}, false, nil
	}
	rest := console[i+len(ReadyPrefix):]
	if j := bytes.IndexByte(rest, '\n'); j >= 0 {
		rest = rest[:j]
	}
	rest = bytes.TrimRight(rest, "\r")
	dec := json.NewDecoder(bytes.NewReader(rest))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Ready{}, true, fmt.Errorf("ready line %q: %w", rest, err)
	}
	return r, true, nil
}

// ErrorLine renders a boot error as the error line, with its newline.
// Line breaks in the message are replaced so the error stays one line.
func ErrorLine(err error) string {
	return ErrorPrefix + oneLine(err.Error()) + "\n"
}

// WarningLine renders a warning line, with its newline.
func WarningLine(msg string) string {
	return WarningPrefix + oneLine(msg) + "\n"
}

func oneLine(s string) string {
	return strings.NewReplacer("\r\n", " / ", "\n", " / ", "\r", " / ").Replace(s)
}

// ParseError returns the message of the first error line in console
// output, and whether there is one.
func ParseError(console []byte) (string, bool) {
	i := bytes.Index(console, []byte(ErrorPrefix))
	if i < 0 {
		return "", false
	}
	rest := console[i+len(ErrorPrefix):]
	if j := bytes.IndexByte(rest, '\n'); j >= 0 {
		rest = rest[:j]
	}
	return string(bytes.TrimRight(rest, "\r")), true
}

// StepLine renders the line of a configure step, with its newline.
func StepLine(step string) string {
	return StepPrefix + oneLine(step) + "\n"
}

// LastStep returns the step of the last step line in console output,
// and whether there is one.
func LastStep(console []byte) (string, bool) {
	i := bytes.LastIndex(console, []byte(StepPrefix))
	if i < 0 {
		return "", false
	}
	rest := console[i+len(StepPrefix):]
	if j := bytes.IndexByte(rest, '\n'); j >= 0 {
		rest = rest[:j]
	}
	return string(bytes.TrimRight(rest, "\r")), true
}
