package egress

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/sbx-dev/sbx/internal/egress/audit"
)

// SelfRefreshEvery is how often SelfRefresh looks at the logins: well
// inside oauth.SelfRefreshWindow, so a login is refreshed before its
// access token expires.
const SelfRefreshEvery = time.Minute

// selfRefreshTimeout bounds one host refresh.
const selfRefreshTimeout = 30 * time.Second

// RefreshLogins refreshes, from the host, each login of the current
// policy whose access token expires within oauth.SelfRefreshWindow
// (oauth.Login.RefreshIfDue, under the login's file lock, so another
// sandbox's refresh of the same file is seen and not repeated). The
// request goes to the login's token endpoint through the engine's
// transport: its TLS verification, spec CAs and hosts mappings. Each
// refresh made, and each that failed, is one audit entry; a login not
// due writes none. It returns how many logins were refreshed.
func (e *Engine) RefreshLogins(ctx context.Context) int {
	st := e.cur.Load()
	n := 0
	for _, ls := range st.pol.logins {
		authority := ls.tokenHost
		if ls.tokenPort != 443 {
			authority = net.JoinHostPort(ls.tokenHost, strconv.Itoa(int(ls.tokenPort)))
		}
		up := func(ctx context.Context, ct string, b []byte) (*http.Response, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+authority+ls.tokenPath, bytes.NewReader(b))
			if err != nil {
				return nil, err
			}
			req.Header.Set("Content-Type", ct)
			req.Header.Set("Accept", "application/json")
			req.Header.Set("Accept-Encoding", "identity")
			return st.transport.RoundTrip(req)
		}
		start := time.Now()
		rctx, cancel := context.WithTimeout(ctx, selfRefreshTimeout)
		did, err := ls.login.RefreshIfDue(rctx, up)
		cancel()
		if !did && err == nil {
			continue
		}
		en := withOrigin(audit.Entry{Time: start, Proto: "https", Name: ls.tokenHost, Port: ls.tokenPort, Method: http.MethodPost,
			Path: ls.tokenPath, Secrets: []string{ls.Name}, Duration: time.Since(start)}, ls.Origin)
		if err != nil {
			en.Decision, en.Reason = audit.DecisionDeny, "the host's own refresh of secret."+ls.Name+" failed: "+oneLine(err.Error())
		} else {
			n++
			en.Decision, en.Reason, en.Status = audit.DecisionAllow, "refreshed by the host before the access token expires", http.StatusOK
		}
		e.audit(en)
	}
	return n
}

// SelfRefresh calls RefreshLogins every interval (SelfRefreshEvery when
// not positive), the first time one interval from now, until ctx ends,
// and returns then. A sandbox's network runs it for as long as the
// sandbox runs.
func (e *Engine) SelfRefresh(ctx context.Context, every time.Duration) {
	if every <= 0 {
		every = SelfRefreshEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			e.RefreshLogins(ctx)
		}
	}
}
