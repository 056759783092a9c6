// Package secretsrc reads a secret's value on the host from the source a
// spec names for it ("env:NAME", "file:PATH" or "command:CMD"), and
// makes the random placeholder that the guest sees in the value's stead.
//
// Values stay in memory as byte slices handed to the caller; errors name
// the source but never carry the value, and a command's output appears
// in an error only as a short escaped excerpt of its standard error.
// It does not decide which hosts a secret may be sent to nor substitute
// placeholders in requests (the egress proxy does).
package secretsrc
