// Package ca holds the per-user certificate authority that the egress
// proxy uses to terminate a sandbox's TLS connections: it loads or
// creates the CA's certificate and key in a directory only the user can
// write, and mints short-lived leaf certificates for the names a guest
// connects to, cached so a busy sandbox does not pay for a signature per
// connection.
//
// The CA's private key never leaves the host; only CertPEM goes into a
// guest's trust store. LoadOrCreate refuses a directory or file that
// another user could have planted or read (UnsafeError), because a key
// an attacker knows would let it read every sandbox's traffic.
//
// It does not decide which names may be reached (the egress policy
// does) nor verify upstream servers (the proxy uses the system roots
// and the spec's CAs for that).
package ca
