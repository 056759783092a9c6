//go:build linux

package e2etest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// fakeAnthropic is the Messages API as far as Claude Code's `claude -p`
// needs it, scripted: asked with a tool that writes files, it answers
// with a call of that tool writing Content to Path; given that call's
// result, it answers with text. It streams (SSE) as the real API does
// when asked to, and refuses a request without the expected credential
// as the real API does (401). It records every request it gets.
//
// Measured with Claude Code 2.1.332 on the host before it ran in a
// sandbox (docs/agents.md): the CLI posts to /v1/messages?beta=true over
// HTTP/1.1 with "stream": true, the credential in Authorization: Bearer
// (CLAUDE_CODE_OAUTH_TOKEN) or x-api-key (ANTHROPIC_API_KEY), and offers
// some dozen tools, among them Write {file_path, content}.
type fakeAnthropic struct {
	// Exactly one of Bearer and APIKey is set: the credential that must
	// arrive.
	Bearer, APIKey string
	// Path (absolute, in the guest) and Content are what the scripted
	// tool call writes.
	Path, Content string
	// Final is the text of the last answer. "%s" in it is replaced with
	// the credential the request carried: an upstream that echoes the
	// credential, which the host must mask on the way back.
	Final string

	mu   sync.Mutex
	reqs []anthropicReq
}

// anthropicReq is one request the fake got.
type anthropicReq struct {
	Method, Path string
	Auth, Key    string // Authorization and x-api-key as they arrived
	// Answer is what the fake did: "tool_use", "text", "unauthorized",
	// "not found" or "bad request".
	Answer string
	// ToolResult is the tool_result the request carried for the
	// scripted call, if any, and whether the CLI marked it an error.
	ToolResult string
	ToolError  bool
}

// messagesRequest is the part of a Messages API request the fake reads.
type messagesRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Tools    []tool `json:"tools"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

type tool struct {
	Name        string `json:"name"`
	InputSchema struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	} `json:"input_schema"`
}

// contentBlock is one block of a message's content.
type contentBlock struct {
	Type      string          `json:"type"`
	ToolUseID string          `json:"tool_use_id"`
	IsError   bool            `json:"is_error"`
	Content   json.RawMessage `json:"content"`
}

// writeTool returns the offered tool that writes a whole file, with the
// names of its path and content parameters: the one whose schema
// requires exactly a path and a content.
func writeTool(tools []tool) (name, pathParam, contentParam string, ok bool) {
	for _, t := range tools {
		var p, c string
		for _, r := range t.InputSchema.Required {
			switch r {
			case "file_path", "path":
				p = r
			case "content":
				c = r
			}
		}
		if p != "" && c != "" && len(t.InputSchema.Required) == 2 {
			return t.Name, p, c, true
		}
	}
	return "", "", "", false
}

// scriptedToolID is the id of the fake's one tool call.
const scriptedToolID = "toolu_sbx_scripted_write"

func (f *fakeAnthropic) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := anthropicReq{Method: r.Method, Path: r.URL.Path, Auth: r.Header.Get("Authorization"), Key: r.Header.Get("X-Api-Key")}
	defer func() {
		f.mu.Lock()
		f.reqs = append(f.reqs, rec)
		f.mu.Unlock()
	}()
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		rec.Answer = "not found"
		apiError(w, http.StatusNotFound, "not_found_error", "fake: only POST /v1/messages")
		return
	}
	if (f.Bearer != "" && rec.Auth != "Bearer "+f.Bearer) || (f.APIKey != "" && rec.Key != f.APIKey) ||
		(f.Bearer == "" && rec.Auth != "") || (f.APIKey == "" && rec.Key != "") {
		rec.Answer = "unauthorized"
		apiError(w, http.StatusUnauthorized, "authentication_error", "fake: not the credential the test brokers")
		return
	}
	var req messagesRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 16<<20)).Decode(&req); err != nil {
		rec.Answer = "bad request"
		apiError(w, http.StatusBadRequest, "invalid_request_error", "fake: "+err.Error())
		return
	}
	// Has the scripted call been answered?
	answered := false
	for _, m := range req.Messages {
		var blocks []contentBlock
		if json.Unmarshal(m.Content, &blocks) != nil {
			continue
		}
		for _, b := range blocks {
			if b.Type == "tool_result" && b.ToolUseID == scriptedToolID {
				answered = true
				rec.ToolError = b.IsError
				rec.ToolResult = string(b.Content)
			}
		}
	}
	name, pathParam, contentParam, ok := writeTool(req.Tools)
	var blocks []map[string]any
	stop := "end_turn"
	switch {
	case ok && !answered:
		rec.Answer = "tool_use"
		stop = "tool_use"
		blocks = append(blocks, map[string]any{"type": "tool_use", "id": scriptedToolID, "name": name,
			"input": map[string]string{pathParam: f.Path, contentParam: f.Content}})
	default:
		rec.Answer = "text"
		cred := rec.Auth
		if f.APIKey != "" {
			cred = rec.Key
		}
		text := strings.ReplaceAll(f.Final, "%s", cred)
		blocks = append(blocks, map[string]any{"type": "text", "text": text})
	}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": "msg_sbx_fake", "type": "message", "role": "assistant",
			"model": req.Model, "content": blocks, "stop_reason": stop, "stop_sequence": nil,
			"usage": map[string]int{"input_tokens": 10, "output_tokens": 10}})
		return
	}
	streamMessage(w, req.Model, blocks, stop)
}

// streamMessage sends blocks as the Messages API's event stream does:
// message_start, then each block's start, deltas (a tool call's input
// in two JSON fragments, a text in two pieces) and stop, then
// message_delta with the stop reason and message_stop, flushing after
// each event.
func streamMessage(w http.ResponseWriter, model string, blocks []map[string]any, stop string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	flush := http.NewResponseController(w).Flush
	event := func(typ string, data map[string]any) {
		data["type"] = typ
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
		flush()
	}
	event("message_start", map[string]any{"message": map[string]any{"id": "msg_sbx_fake", "type": "message", "role": "assistant",
		"model": model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]int{"input_tokens": 10, "output_tokens": 1}}})
	for i, b := range blocks {
		switch b["type"] {
		case "tool_use":
			input, _ := json.Marshal(b["input"])
			half := len(input) / 2
			event("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}})
			for _, part := range []string{string(input[:half]), string(input[half:])} {
				event("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
			}
		case "text":
			// Split after the first word, so that an echoed credential
			// stays in one piece the host can mask.
			text := b["text"].(string)
			cut := strings.IndexByte(text, ' ') + 1
			event("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			for _, part := range []string{text[:cut], text[cut:]} {
				event("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "text_delta", "text": part}})
			}
		}
		event("content_block_stop", map[string]any{"index": i})
	}
	event("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]int{"output_tokens": 10}})
	event("message_stop", map[string]any{})
}

// apiError answers as the API does when it refuses a request.
func apiError(w http.ResponseWriter, code int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
}

// requests returns what the fake got so far.
func (f *fakeAnthropic) requests() []anthropicReq {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]anthropicReq(nil), f.reqs...)
}
