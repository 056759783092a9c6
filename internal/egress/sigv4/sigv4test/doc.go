// Package sigv4test is a fake AWS service for tests: an HTTP handler
// that accepts a request only when its Signature Version 4 signature
// was made with the credential it is given, checked with
// aws-sdk-go-v2's own signer (so not with the code under test), and
// answers S3 PutObject and STS GetCallerIdentity.
package sigv4test
