package command

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/apply"
)

// TestApplySummaryCountsWhatHappened: the summary line reports apply's
// own counts, so that a replace interrupted after it stopped the old
// sandbox, which printed no "Destroyed" line, still shows as destroyed.
func TestApplySummaryCountsWhatHappened(t *testing.T) {
	for _, tc := range []struct {
		verb        string
		res         apply.Result
		err         error
		interrupted bool
		want        string
	}{
		{"Apply", apply.Result{Destroyed: 1, Skipped: 1}, fmt.Errorf("apply interrupted: %w", context.Canceled), true,
			"Interrupted: 0 created, 0 updated, 0 replaced, 1 destroyed; 1 not done."},
		{"Apply", apply.Result{Applied: 3, Created: 1, Updated: 1, Replaced: 1, Destroyed: 1, Failed: 1}, errors.New("sandbox.b: no QEMU"), false,
			"Apply incomplete: 1 created, 1 updated, 1 replaced, 1 destroyed; 1 failed, 0 not done."},
		{"Destroy", apply.Result{Applied: 2, Destroyed: 2}, nil, false, "Destroy complete! 2 destroyed."},
	} {
		var stdout, stderr bytes.Buffer
		v := newView(&Env{Stdout: &stdout, Stderr: &stderr}, true)
		o := newApplyOutput(v)
		o.verb = tc.verb
		o.finish(v, tc.res, tc.err, tc.interrupted)
		if !strings.Contains(stdout.String(), tc.want) {
			t.Errorf("%+v: summary\n%s\nwant %q", tc.res, stdout.String(), tc.want)
		}
	}
}
