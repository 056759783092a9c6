// Package sigv4 verifies and re-signs AWS Signature Version 4 requests
// (header authorization, AWS4-HMAC-SHA256) and their aws-chunked
// payloads (STREAMING-AWS4-HMAC-SHA256-PAYLOAD), written from AWS's
// specification so that a request can be checked over exactly the
// headers it signed and signed again over the same set.
//
// The egress engine uses it to broker an AWS credential: the guest signs
// with a placeholder credential, the host verifies that signature and
// replaces it by one made with the real credential.
package sigv4
