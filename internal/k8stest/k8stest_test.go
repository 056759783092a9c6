package k8stest

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestControlPlane starts the control plane with the scheduler and talks
// to it through client-go and the built kubectl: both report the built
// release, and the default ServiceAccount exists.
func TestControlPlane(t *testing.T) {
	c := Start(t, Options{Scheduler: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	v, err := c.Client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != "v"+Version {
		t.Errorf("server version %q, want v%s", v.GitVersion, Version)
	}
	if _, err := c.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Errorf("default ServiceAccount: %v", err)
	}
	out, err := c.Kubectl(ctx, "version")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "Client Version: v"+Version) || !strings.Contains(out, "Server Version: v"+Version) {
		t.Errorf("kubectl version:\n%s", out)
	}
}
