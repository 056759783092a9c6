package e2etest

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sbx-dev/sbx/internal/k8stest"
	"github.com/sbx-dev/sbx/internal/node"
	"github.com/sbx-dev/sbx/internal/pipeline"
	"github.com/sbx-dev/sbx/lang"
)

// TestNodeRunsPods runs sbx's node agent against a real API server and
// scheduler: pods that tolerate the node's taint and select its label are
// scheduled to it and boot as sandboxes (under TCG here). One prints a
// line and sleeps: it is Running, its output reads back through the API
// (client-go) and the built kubectl logs, and deleting it stops its QEMU
// process (the PID is gone). One exits 3: it ends Failed with exit code 3
// in its container status and its output kept. A pod whose policy hash
// is wrong is refused with a PolicyMismatch Event and boots nothing.
func TestNodeRunsPods(t *testing.T) {
	c := k8stest.Start(t, k8stest.Options{Scheduler: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	cfgDir := vmConfigDir(t, filepath.Join(dir, "sbx.hcl"), "kernel.deb", "busybox.deb")
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

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	vmDir, err := os.MkdirTemp("", "sbxn")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(vmDir)
	nodeCtx, stopNode := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- node.Run(nodeCtx, node.Options{Name: "sbx-e2e", Client: c.Client, Sandboxes: local,
			Listen: "127.0.0.1:" + strconv.Itoa(port), ClientCA: c.KubeletClientCA, VMDir: vmDir,
			Ready: func() { close(ready) }})
	}()
	defer func() {
		stopNode()
		if err := <-done; err != nil {
			t.Errorf("node.Run: %v", err)
		}
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("node.Run: %v", err)
	case <-ctx.Done():
		t.Fatal("the node did not become ready")
	}

	pods := c.Client.CoreV1().Pods("default")
	for _, p := range []*corev1.Pod{
		sandboxPod("sleeper", hash, "sh", "-c", "echo hello-from-pod; sleep 600"),
		sandboxPod("exit3", hash, "sh", "-c", "echo bye-from-pod; exit 3"),
		sandboxPod("wrong", "sha256:"+strings.Repeat("1", 64), "echo", "never"),
	} {
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	w := waitPodPhase(t, ctx, c, "wrong", corev1.PodFailed)
	if w.Status.Reason != node.ReasonPolicyMismatch || w.Spec.NodeName != "sbx-e2e" {
		t.Errorf("wrong: node %q, reason %q: %s", w.Spec.NodeName, w.Status.Reason, w.Status.Message)
	}
	evs, err := c.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=wrong,reason=" + node.ReasonPolicyMismatch})
	for i := 0; err == nil && len(evs.Items) == 0 && i < 50; i++ {
		time.Sleep(200 * time.Millisecond)
		evs, err = c.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=wrong,reason=" + node.ReasonPolicyMismatch})
	}
	if err != nil || len(evs.Items) == 0 {
		t.Errorf("no PolicyMismatch event for the wrong pod: %v", err)
	}

	waitPodPhase(t, ctx, c, "sleeper", corev1.PodRunning)
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

	e := waitPodPhase(t, ctx, c, "exit3", corev1.PodFailed)
	if cs := e.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode != 3 {
		t.Errorf("exit3: container statuses %+v", cs)
	}
	if out, err := c.Kubectl(ctx, "logs", "exit3"); err != nil || out != "bye-from-pod\n" {
		t.Errorf("kubectl logs exit3: %q, %v", out, err)
	}

	qemu := qemuPids(t, vmDir)
	if len(qemu) != 1 {
		t.Fatalf("QEMU processes under %s: %v, want the sleeper's one", vmDir, qemu)
	}
	zero := int64(0)
	if err := pods.Delete(ctx, "sleeper", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := pods.Get(ctx, "sleeper", metav1.GetOptions{})
		if errors.IsNotFound(err) {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the deleted pod is still there")
		}
		time.Sleep(200 * time.Millisecond)
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

func sandboxPod(name, hash string, command ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
			node.SandboxAnnotation: "box", node.PolicyHashAnnotation: hash,
		}},
		Spec: corev1.PodSpec{
			NodeSelector:                 map[string]string{node.NodeLabel: "true"},
			Tolerations:                  []corev1.Toleration{{Key: node.TaintKey, Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: new(bool),
			Containers:                   []corev1.Container{{Name: "main", Image: "sbx:box", Command: command}},
		},
	}
}

func waitPodPhase(t *testing.T, ctx context.Context, c *k8stest.Cluster, name string, phase corev1.PodPhase) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	for {
		p, err := c.Client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			last = p
			if p.Status.Phase == phase {
				return p
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("pod %s never %s: %v; last status %+v", name, phase, err, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
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
