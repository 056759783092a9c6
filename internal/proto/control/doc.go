// Package control is the line protocol of a supervisor's control socket
// (<dir>/control.sock): how a client asks the supervisor of a sandbox to
// stop, to report its status or to enforce a new policy, and how the
// supervisor reads the request and answers.
//
// A connection carries one request and one answer, each a line ending in
// a newline:
//
//	request                      answer
//	stop                         stopped          once the sandbox has stopped
//	status                       {…}              the status, one JSON object
//	reload, then one JSON line   reloaded         once the new policy is enforced
//	anything else                error: unknown request "…"
//
// Any request may be answered "error: <message>" instead, the message on
// one line (Refusal). Every line is bounded (MaxVerb, MaxBody,
// MaxAnswer), so a confused peer of this user cannot make either end
// hold an unbounded line.
//
// Package control does not dial or listen, check who is at the other end
// of the socket, or know what a status or a reload body holds: package
// supervisor does (it owns the socket's directory, verifies the peer and
// defines Status and the reload request). Call is the client's entry
// point; ReadVerb, ReadBody, Answer and Refuse the server's.
package control
