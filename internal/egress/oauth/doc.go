// Package oauth brokers an OAuth login whose tokens live in a JSON
// credential file on the host (a secret with an oauth block, as Codex's
// ~/.codex/auth.json): the guest gets a copy of the file with every token
// replaced by a placeholder, and the host keeps the real tokens.
//
// A Login is opened on the host's file (Open). Render makes the guest's
// copy: a token that is a JWT keeps its header and claims and gets a
// random signature (the client reads the same account, plan and expiry;
// the value is worthless outside), any other token becomes a
// secretsrc-shaped placeholder. AccessToken maps an access placeholder
// to the real access token for the engine to put in "Authorization:
// Bearer". Refresh handles the guest's refresh request to the token
// endpoint: the refresh placeholder is replaced by the real refresh
// token, the request is sent upstream through the caller's Upstream, the
// new tokens are written back to the host file atomically (a temporary
// file renamed over it, same mode) and answered to the guest as new
// placeholders. A refresh whose placeholder this Login did not mint is
// refused. Every read-modify-write of the file holds an flock on a
// sibling lock file (".NAME.sbx-lock"), and the file is read again under
// it: when another sandbox (or the user's own CLI) rotated the tokens
// since the guest's placeholder was minted, the guest is answered from
// the file and upstream is not called, so sandboxes sharing one login
// refresh once. When the spec names the access token's expiry in the
// file (ExpiresAt, as Claude Code's "claudeAiOauth.expiresAt" in
// milliseconds), a refresh writes the new expiry there from the
// response's expires_in, and the guest's copy carries the host's.
// RefreshIfDue lets the host refresh by itself shortly before the access
// token expires (a JWT's exp, else that expiry).
//
// The package sends nothing itself: the caller's Upstream dials (package
// egress, with its TLS verification, hosts mappings and audit). Errors
// and replies never carry a real token.
package oauth
