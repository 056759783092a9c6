// Package egress enforces a sandbox's egress policy on the TCP
// connections its guest opens: it decides each connection and, for
// HTTP(S), each request, and brokers the sandbox's secrets.
//
// Compile turns a policy.Sandbox and the secrets' values into a Policy;
// its Resolves and Accepts answer the network stack's questions (which
// names DNS answers, which connections complete). An Engine serves the
// connections the stack accepts (ServeFlow):
//
//   - HTTPS is terminated with a certificate the per-user CA (package ca)
//     mints for the connection's name; a ClientHello whose SNI names
//     another host is refused, and one without SNI gets the name's
//     certificate (the connection's name comes from the synthetic address
//     it dialled, and every request is checked against it anyway). Plain
//     HTTP is served as is. Each request's Host or :authority must be the
//     connection's name; CONNECT is refused; the allow rules' methods,
//     paths and git push refs narrow what passes. Allowed requests are
//     re-originated by the host over HTTP/1.1 or HTTP/2 with TLS verified
//     against the system roots and the spec's CAs, streamed both ways.
//   - A secret's placeholder is replaced by its value only in requests
//     to the secret's hosts, only where a credential goes and only as
//     the whole of it: the token of "Authorization: Bearer", the password
//     of "Authorization: Basic", the whole value of a header the secret
//     names. Anywhere else (another header, around other bytes, the URL)
//     the request is refused, so the upstream never sees the value next
//     to bytes the guest chose. Its placeholder or value in a request to
//     any other host refuses the request; such a request's body is
//     scanned as it streams and the request aborted (403) before the
//     match leaves whole. Values go only into requests that leave over
//     TLS, or to a destination the secret lists in plain_http; Range and
//     If-Range are dropped from a request a value went into. Values are
//     masked back to placeholders, in any ASCII case, with every run of
//     runLen or more of their bytes (mask.go), and in their base64,
//     percent, HTML and JSON encodings (maskForms), in response headers,
//     trailers and bodies, which are asked for and masked uncompressed
//     (gzip is decoded; another encoding is refused) and, from a host a
//     secret goes to, in a charset that writes ASCII as ASCII (the guest
//     cannot ask for another; a body declared in one is refused,
//     charset.go). With secrets in the
//     policy an upgrade must be to WebSocket, offered no extension, and
//     its frames are masked the same way; the guest's frames to a host a
//     secret is not bound to are checked like bodies and the stream
//     closed (1008) on a match (wsmask.go, wsframe.go). A gRPC
//     response's messages are read whole and checked instead of masked,
//     a match ending the stream with grpc-status INTERNAL (grpc.go).
//   - A passthrough rule's TLS is spliced unmodified after its SNI is
//     checked (missing SNI is refused there); a tcp rule's connection is
//     spliced after dialling.
//
// Names are dialled through the policy's hosts mappings or resolved on
// the host, and then only public addresses are dialled. Refusals are
// fast: a reset for connections, a 403 with a one-line reason naming the
// rule to change for requests (for a gRPC call, grpc-status
// PERMISSION_DENIED with that reason, trailers-only). Engine.Update swaps the policy live and
// closes the connections it no longer allows.
//
// It does not parse packets or answer DNS (package netstack does), write
// the audit log's file (package audit), read secret values (package
// secretsrc) or parse git's pkt-lines (package gitpush).
package egress
