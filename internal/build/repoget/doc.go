// Package repoget reads one file of a package repository — an index, a
// signature, a package — by URL (http, https or file), bounded in size,
// for the Debian and Alpine repository clients (packages debrepo and
// apkrepo). What the bytes must hash to is the caller's to check.
package repoget
