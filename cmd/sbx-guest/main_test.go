package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestRefusesOutsideAGuest(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(4242, &stdout, &stderr, time.Now()); code != 2 {
		t.Errorf("exit code %d, want 2", code)
	}
	if stdout.Len() != 0 || !strings.Contains(stderr.String(), "runs only as PID 1") {
		t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
}
