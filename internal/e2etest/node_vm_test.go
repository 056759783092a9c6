package e2etest

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/sbx-dev/sbx/internal/egress/secretsrc"
	"github.com/sbx-dev/sbx/internal/k8stest"
	"github.com/sbx-dev/sbx/internal/node"
	"github.com/sbx-dev/sbx/internal/pipeline"
	"github.com/sbx-dev/sbx/lang"
)

// nodeKeyed is the sandbox of TestNodeRunsPods's pod that takes a secret
// from a Kubernetes Secret: api.test is the test's HTTPS server on
// loopback (@UPSTREAM@), and the spec's own source of the secret is a
// variable the node does not have, so the value can only come from the
// pod's secretKeyRef.
const nodeKeyed = `
egress "api" {
  allow = ["api.test"]
  hosts = { "api.test" = "@UPSTREAM@" }
  ca    = ["upstream-ca.pem"]
}

secret "api" {
  env    = "API_TOKEN"
  hosts  = ["api.test"]
  source = "env:SBX_NODE_E2E_UNSET"
}

sandbox "keyed" {
  image   = image.box
  user    = "agent"
  egress  = [egress.api]
  secrets = [secret.api]
  cpus    = 1
  memory  = "512MiB"
}
`

// TestNodeRunsPods runs sbx's node agent against a real API server and
// scheduler: pods that tolerate the node's taint and select its label are
// scheduled to it and boot as sandboxes (under TCG here). One prints a
// line and sleeps: it is Running, its output reads back through the API
// (client-go) and the built kubectl logs, kubectl exec runs commands in
// its sandbox (stdin in, stdout and stderr apart, the exit code out; a
// TTY through client-go's executor, resized), and deleting it stops its
// QEMU process (the PID is gone). One exits 3: it ends Failed with exit
// code 3 in its container status and its output kept. A pod whose policy
// hash is wrong is refused with a PolicyMismatch Event and boots nothing.
//
// One takes its sandbox's secret from a Kubernetes Secret through
// secretKeyRef (the spec's own source is unset on the node, so the start
// needs the Secret): its guest's environment (in the command and in
// kubectl exec) and its output hold only the placeholder, and the value
// is in no log, status or Event. (That the upstream the spec maps
// api.test to receives the value is not checked here yet: busybox wget's
// TLS fails its handshake with the host's minted certificate.)
func TestNodeRunsPods(t *testing.T) {
	c := k8stest.Start(t, k8stest.Options{Scheduler: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	value := "k8s-secret-" + rand.Text()
	up := &authUpstream{want: "Bearer " + value}
	caPEM, cert := testPKI(t, "api.test")
	srv := httptest.NewUnstartedServer(up)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	defer srv.Close()

	cfgDir := vmConfigDir(t, filepath.Join(dir, "sbx.hcl"), "kernel.deb", "busybox.deb")
	spec, err := os.ReadFile(filepath.Join(cfgDir, "sbx.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	spec = append(spec, strings.ReplaceAll(nodeKeyed, "@UPSTREAM@", srv.Listener.Addr().String())...)
	for name, data := range map[string][]byte{"sbx.hcl": spec, "upstream-ca.pem": caPEM} {
		if err := os.WriteFile(filepath.Join(cfgDir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, diags := lang.Load(cfgDir, lang.Options{Environ: environ})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if _, diags := pipeline.Lock(ctx, cfg, pipeline.Env{Environ: environ}, pipeline.LockOptions{}); diags.HasErrors() {
		t.Fatal(diags)
	}
	local, err := node.LoadLocal(ctx, cfgDir, environ)
	if err != nil {
		t.Fatal(err)
	}
	hash, err := local.PolicyHash("box")
	if err != nil {
		t.Fatal(err)
	}
	keyedHash, err := local.PolicyHash("keyed")
	if err != nil {
		t.Fatal(err)
	}
	nd := c.StartNode(t, "sbx-e2e", local)

	if _, err := c.Client.CoreV1().Secrets(k8stest.Namespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "api-creds"}, Data: map[string][]byte{"token": []byte(value)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	keyed := k8stest.SandboxPod("keyed", "keyed", keyedHash, "sh", "-c",
		`echo "env=$API_TOKEN"; echo "started"; sleep 600`)
	keyed.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "API_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "api-creds"}, Key: "token"}}}}

	pods := c.Client.CoreV1().Pods(k8stest.Namespace)
	for _, p := range []*corev1.Pod{
		k8stest.SandboxPod("sleeper", "box", hash, "sh", "-c", "echo hello-from-pod; sleep 600"),
		k8stest.SandboxPod("exit3", "box", hash, "sh", "-c", "echo bye-from-pod; exit 3"),
		k8stest.SandboxPod("wrong", "box", "sha256:"+strings.Repeat("1", 64), "echo", "never"),
		keyed,
	} {
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	w := c.WaitPodPhase(t, ctx, "wrong", corev1.PodFailed)
	if w.Status.Reason != node.ReasonPolicyMismatch || w.Spec.NodeName != nd.Name {
		t.Errorf("wrong: node %q, reason %q: %s", w.Spec.NodeName, w.Status.Reason, w.Status.Message)
	}
	c.WaitEvent(t, ctx, "wrong", node.ReasonPolicyMismatch)

	c.WaitPodPhase(t, ctx, "sleeper", corev1.PodRunning)
	var logs string
	for range 100 {
		b, err := pods.GetLogs("sleeper", &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			t.Fatalf("logs through the API: %v", err)
		}
		if logs = string(b); strings.Contains(logs, "hello-from-pod") {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if logs != "hello-from-pod\n" {
		t.Errorf("logs through the API: %q", logs)
	}
	out, err := c.Kubectl(ctx, "logs", "sleeper")
	if err != nil || out != "hello-from-pod\n" {
		t.Errorf("kubectl logs: %q, %v", out, err)
	}

	// kubectl exec: stdin in, stdout and stderr apart, the exit code
	// out, as the pod's user.
	stdout, stderr, code, err := c.KubectlRun(ctx, strings.NewReader("typed-in\n"), "exec", "-i", "sleeper", "--",
		"sh", "-c", `read line; echo "got $line as $(id -u)"; echo to-stderr >&2; exit 4`)
	if err != nil || code != 4 || stdout != "got typed-in as 1000\n" || !strings.Contains(stderr, "to-stderr") {
		t.Errorf("kubectl exec -i: exit %d, %v\nstdout %q\nstderr %q", code, err, stdout, stderr)
	}
	if stdout, stderr, code, err := c.KubectlRun(ctx, nil, "exec", "sleeper", "--", "true"); err != nil || code != 0 {
		t.Errorf("kubectl exec true: exit %d, %v: %s%s", code, err, stdout, stderr)
	}
	// A TTY, through client-go's executor (kubectl takes one only from a
	// terminal), resized by the client.
	// The size the client sends arrives while the command runs: it
	// polls for it, a bounded number of times.
	ttyScript := `/bin/busybox tty; i=0; while [ $i -lt 300 ]; do s=$(/bin/busybox stty size); [ "$s" = "40 100" ] && break; i=$((i+1)); sleep 0.1; done; echo "size=$s"`
	if got := execTTY(t, ctx, c, "sleeper", ttyScript); !strings.Contains(got, "/dev/pts/") || !strings.Contains(got, "size=40 100") {
		t.Errorf("exec with a TTY: %q", got)
	}

	e := c.WaitPodPhase(t, ctx, "exit3", corev1.PodFailed)
	if cs := e.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode != 3 {
		t.Errorf("exit3: container statuses %+v", cs)
	}
	if out, err := c.Kubectl(ctx, "logs", "exit3"); err != nil || out != "bye-from-pod\n" {
		t.Errorf("kubectl logs exit3: %q, %v", out, err)
	}

	// The secret: the guest has the placeholder, the upstream the value.
	c.WaitPodPhase(t, ctx, "keyed", corev1.PodRunning)
	for range 300 {
		if out, _ = c.Kubectl(ctx, "logs", "keyed"); strings.Contains(out, "started") {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	envLine, _, _ := strings.Cut(out, "\n")
	ph := strings.TrimPrefix(envLine, "env=")
	if !strings.HasPrefix(envLine, "env=") || !secretsrc.HasPlaceholder(ph, "api") {
		t.Errorf("the keyed pod's guest does not have the placeholder in API_TOKEN:\n%s", out)
	}
	stdout, _, code, err = c.KubectlRun(ctx, nil, "exec", "keyed", "--", "env")
	if err != nil || code != 0 || !strings.Contains(stdout, "API_TOKEN="+ph+"\n") {
		t.Errorf("kubectl exec keyed -- env: exit %d, %v\n%s", code, err, stdout)
	}
	evs, err := c.Client.CoreV1().Events(k8stest.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kp, err := pods.Get(ctx, "keyed", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for what, text := range map[string]string{"logs": out, "exec": stdout, "status": fmt.Sprintf("%+v", kp.Status), "events": fmt.Sprintf("%+v", evs.Items)} {
		if strings.Contains(text, value) {
			t.Errorf("the Secret's value is in the keyed pod's %s", what)
		}
	}

	qemu := qemuPids(t, nd.VMDir)
	if len(qemu) != 2 {
		t.Fatalf("QEMU processes under %s: %v, want the sleeper's and the keyed pod's", nd.VMDir, qemu)
	}
	zero := int64(0)
	for _, name := range []string{"sleeper", "keyed"} {
		if err := pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"sleeper", "keyed"} {
		for {
			_, err := pods.Get(ctx, name, metav1.GetOptions{})
			if errors.IsNotFound(err) {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("the deleted pod %s is still there", name)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, pid := range qemu {
		for {
			if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); os.IsNotExist(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("QEMU %d still runs after its pod was deleted", pid)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// authUpstream answers "authorized" to a request whose Authorization is
// want, 401 otherwise, and records what each request carried: the
// upstream the keyed sandbox's spec maps api.test to.
type authUpstream struct {
	want string
	mu   sync.Mutex
	got  []string
}

func (u *authUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a := r.Header.Get("Authorization")
	u.mu.Lock()
	u.got = append(u.got, a)
	u.mu.Unlock()
	if a != u.want {
		http.Error(w, "wrong credential", http.StatusUnauthorized)
		return
	}
	io.WriteString(w, "authorized\n")
}

// sizeOnce is a terminal size queue that sends one size.
type sizeOnce struct{ sent bool }

func (s *sizeOnce) Next() *remotecommand.TerminalSize {
	if s.sent {
		return nil
	}
	s.sent = true
	return &remotecommand.TerminalSize{Width: 100, Height: 40}
}

// execTTY runs script in pod's sandbox on a TTY through the API server's
// exec subresource with client-go's SPDY executor, and returns its output.
func execTTY(t *testing.T, ctx context.Context, c *k8stest.Cluster, pod, script string) string {
	t.Helper()
	req := c.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(k8stest.Namespace).Name(pod).
		SubResource("exec").VersionedParams(&corev1.PodExecOptions{
		Command: []string{"sh", "-c", script}, Stdout: true, TTY: true,
	}, scheme.ParameterCodec)
	ex, err := remotecommand.NewSPDYExecutor(c.Config, http.MethodPost, req.URL())
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Tty: true, TerminalSizeQueue: &sizeOnce{}}); err != nil {
		t.Errorf("exec with a TTY: %v (output %q)", err, out.String())
	}
	return out.String()
}

// qemuPids are the PIDs of the processes whose command line names a path
// under vmDir.
func qemuPids(t *testing.T, vmDir string) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if strings.Contains(args[0], "qemu") && strings.Contains(string(b), vmDir) {
			pids = append(pids, pid)
		}
	}
	return pids
}
