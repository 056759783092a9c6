package k8stest

import (
	"crypto/tls"
	"crypto/x509"
)

// tlsConfig trusts pool, or, for the health checks of processes whose
// serving certificate they make themselves (nil pool), anything.
func tlsConfig(pool *x509.CertPool) *tls.Config {
	if pool == nil {
		return &tls.Config{InsecureSkipVerify: true}
	}
	return &tls.Config{RootCAs: pool}
}
