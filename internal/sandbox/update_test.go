package sandbox

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/sbx-dev/sbx/internal/egress/ca"
	"github.com/sbx-dev/sbx/internal/proto/agentproto"
	"github.com/sbx-dev/sbx/internal/sandbox/sandboxfs"
	"github.com/sbx-dev/sbx/internal/sandbox/sandboxnet"
	"github.com/sbx-dev/sbx/policy"
)

// TestUpdate: a new policy is enforced and recorded; the guest is told
// again, through what ConfigureThrough named, only when its commands'
// environment changes (a secret added); a policy whose secret has no
// value is refused and the old one stays.
func TestUpdate(t *testing.T) {
	n, files := testServers(t)
	s := &Sandbox{net: n, files: files, configure: func(context.Context, agentproto.Configure) error {
		return errors.New("the machine's own client is not the one to use")
	}}
	var told []agentproto.Configure
	s.ConfigureThrough(func(_ context.Context, c agentproto.Configure) error {
		told = append(told, c)
		return nil
	})
	ctx := t.Context()

	allow := policy.Sandbox{Allow: []policy.AllowRule{{Pattern: policy.MustHostPattern("example.com")}}}
	if again, err := s.Update(ctx, allow, nil); err != nil || again {
		t.Fatal(again, err)
	}
	if len(told) != 0 {
		t.Errorf("the guest was configured again with no change to its environment: %+v", told)
	}
	if got := s.Spec().Policy; len(got.Allow) != 1 {
		t.Errorf("the recorded policy: %+v", got)
	}

	withSecret := allow
	withSecret.Secrets = []policy.SecretBinding{{Name: "token", Env: "API_TOKEN", Hosts: []policy.HostPattern{policy.MustHostPattern("example.com")}, Source: "env:API_TOKEN"}}
	if _, err := s.Update(ctx, withSecret, nil); err == nil {
		t.Error("a secret without its value was taken")
	}
	if got := s.Spec().Policy; len(got.Secrets) != 0 {
		t.Errorf("a refused policy was recorded: %+v", got)
	}
	if again, err := s.Update(ctx, withSecret, map[string][]byte{"token": []byte("sk-live-0123456789")}); err != nil || !again {
		t.Fatal(again, err)
	}
	if len(told) != 1 || len(told[0].Env) != 1 || !strings.HasPrefix(told[0].Env[0], "API_TOKEN=") || strings.Contains(told[0].Env[0], "sk-live-0123456789") {
		t.Errorf("the guest told of the added secret: %+v", told)
	}
	if got := s.Spec().Policy; len(got.Secrets) != 1 {
		t.Errorf("the recorded policy: %+v", got)
	}
}

// TestUpdateRefusesSecretEnv: a policy given to Update has not been
// through package lang, which refuses a secret whose placeholder
// variable a forbid_env pattern keeps out of the guest, two secrets in
// one variable, and a variable that is no name. Update refuses them
// too, and the policy in force stays.
func TestUpdateRefusesSecretEnv(t *testing.T) {
	n, files := testServers(t)
	var told []agentproto.Configure
	s := &Sandbox{net: n, files: files, configure: func(_ context.Context, c agentproto.Configure) error {
		told = append(told, c)
		return nil
	}}
	host := []policy.HostPattern{policy.MustHostPattern("example.com")}
	secret := func(name, env string) policy.SecretBinding {
		return policy.SecretBinding{Name: name, Env: env, Hosts: host, Source: "env:X"}
	}
	values := map[string][]byte{"a": []byte("sk-value-a-0123456789"), "b": []byte("sk-value-b-0123456789")}
	for _, tc := range []struct {
		what string
		p    policy.Sandbox
	}{
		{"a forbidden variable", policy.Sandbox{ForbidEnv: []string{"AWS_*"}, Secrets: []policy.SecretBinding{secret("a", "AWS_SECRET_ACCESS_KEY")}}},
		{"two secrets in one variable", policy.Sandbox{Secrets: []policy.SecretBinding{secret("a", "TOKEN"), secret("b", "TOKEN")}}},
		{"an empty variable", policy.Sandbox{Secrets: []policy.SecretBinding{secret("a", "")}}},
		{"a variable with =", policy.Sandbox{Secrets: []policy.SecretBinding{secret("a", "A=B")}}},
	} {
		_, err := s.Update(t.Context(), tc.p, values)
		if err == nil {
			t.Errorf("%s: Update took it", tc.what)
		}
		if got := s.Spec().Policy; len(got.Secrets) != 0 {
			t.Errorf("%s: recorded %+v", tc.what, got)
		}
		if _, ok := n.Placeholder("a"); ok {
			t.Errorf("%s: the network took the secret", tc.what)
		}
	}
	if len(told) != 0 {
		t.Errorf("the guest was told: %+v", told)
	}
}

// TestConcurrentUpdates: two Updates at once (two reloads, or a Go API
// caller's goroutines) leave the sandbox with one of the two policies in
// every part — the policy it records and the environment the guest is
// told — never a mix.
func TestConcurrentUpdates(t *testing.T) {
	n, files := testServers(t)
	s := &Sandbox{net: n, files: files, configure: func(context.Context, agentproto.Configure) error { return nil }}
	host := []policy.HostPattern{policy.MustHostPattern("example.com")}
	values := map[string][]byte{"token": []byte("sk-live-0123456789")}
	in := func(env string) policy.Sandbox {
		return policy.Sandbox{Secrets: []policy.SecretBinding{{Name: "token", Env: env, Hosts: host, Source: "env:X"}}}
	}
	for round := range 2000 {
		var wg sync.WaitGroup
		for _, env := range []string{"TOKEN_A", "TOKEN_B"} {
			wg.Go(func() {
				if _, err := s.Update(t.Context(), in(env), values); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		recorded := s.Spec().Policy.Secrets[0].Env
		told := s.Configure().Env
		if len(told) != 1 || !strings.HasPrefix(told[0], recorded+"=") {
			t.Fatalf("round %d: the sandbox records the secret in %s, and tells the guest %q", round, recorded, told)
		}
	}
}

// A running sandbox's file servers keep the rules they started with, so
// Update refuses a policy whose mounts are served otherwise (here: the
// read-only mount made writable, a hide rule dropped), leaving the
// policy in force; where only the rule's origin differs it goes ahead.
func TestUpdateRefusesMountChanges(t *testing.T) {
	n, files := testServers(t)
	s := &Sandbox{net: n, files: files, configure: func(context.Context, agentproto.Configure) error { return nil }}
	started := policy.Mount{Guest: "/workspace", Host: ".", Access: policy.ReadOnly, Hide: []string{".env"}, Origin: policy.Origin{Block: "vfs.workspace"}}
	s.spec.Policy.Mounts = []policy.Mount{started}
	ctx := t.Context()

	for name, change := range map[string]func(*policy.Mount){
		"made writable":   func(m *policy.Mount) { m.Access = policy.ReadWrite },
		"hide dropped":    func(m *policy.Mount) { m.Hide = nil },
		"git writable":    func(m *policy.Mount) { m.GitWritable = true },
		"other host":      func(m *policy.Mount) { m.Host = "./src" },
		"tmpfs added":     func(m *policy.Mount) { m.Tmpfs = []string{"node_modules"} },
		"other owner":     func(m *policy.Mount) { m.Owner = "agent" },
		"readonly rule":   func(m *policy.Mount) { m.ReadOnly = []string{"docs"} },
		"other guest dir": func(m *policy.Mount) { m.Guest = "/src" },
	} {
		m := started
		change(&m)
		if _, err := s.Update(ctx, policy.Sandbox{Mounts: []policy.Mount{m}}, nil); !errors.Is(err, ErrMountsChanged) {
			t.Errorf("%s: Update gave %v, want ErrMountsChanged", name, err)
		}
		if got := s.Spec().Policy.Mounts; len(got) != 1 || !got[0].SameServed(started) {
			t.Errorf("%s: the recorded mounts became %+v", name, got)
		}
	}
	if _, err := s.Update(ctx, policy.Sandbox{}, nil); !errors.Is(err, ErrMountsChanged) {
		t.Errorf("dropping the mount: Update gave %v, want ErrMountsChanged", err)
	}
	moved := started
	moved.Origin = policy.Origin{Block: "vfs.other", File: "b.hcl", Line: 3}
	if _, err := s.Update(ctx, policy.Sandbox{Mounts: []policy.Mount{moved}}, nil); err != nil {
		t.Errorf("the same mount written elsewhere: %v", err)
	}
}

// testServers makes the network and the file servers of a sandbox
// without a machine, for Update's tests; the network is closed when the
// test ends.
func testServers(t *testing.T) (*sandboxnet.Net, *sandboxfs.Set) {
	t.Helper()
	auth, err := ca.New()
	if err != nil {
		t.Fatal(err)
	}
	n, err := sandboxnet.New(sandboxnet.Options{Sandbox: "box", CA: auth})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	files, err := sandboxfs.Open(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return n, files
}
