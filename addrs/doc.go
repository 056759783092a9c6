// Package addrs holds the typed addresses of things a configuration declares:
// resources that materialize (image.NAME, sandbox.NAME) and the blocks they
// reference (egress.NAME, secret.NAME, vfs.NAME, var.NAME, local.NAME).
//
// Addresses are values, compared with ==, and rendered with String in the
// same form users write them in specs ("image.agent"). Parsing and checking
// of references in expressions lives in package lang; this package only
// names things.
package addrs
