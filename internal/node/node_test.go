package node_test

import (
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/sbx-dev/sbx/internal/k8stest"
	"github.com/sbx-dev/sbx/internal/machine/machinetest"
	"github.com/sbx-dev/sbx/internal/node"
	"github.com/sbx-dev/sbx/internal/pipeline"
	"github.com/sbx-dev/sbx/lang"
)

// TestNodeRefusesPolicyMismatch runs a node against a real API server and
// scheduler: the Node registers with its taint, label, capacity and
// Lease and without the not-ready taint; pods that tolerate the taint
// and select the label are scheduled to it; a pod whose declared policy
// hash is not the compiled sandbox's, or that declares none, is refused
// (phase Failed, reason PolicyMismatch, a Warning Event) without booting.
func TestNodeRefusesPolicyMismatch(t *testing.T) {
	c := k8stest.Start(t, k8stest.Options{Scheduler: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfgDir, environ := fixture(t, ctx)

	local, err := node.LoadLocal(ctx, cfgDir, environ)
	if err != nil {
		t.Fatal(err)
	}
	want, err := local.PolicyHash("box")
	if err != nil {
		t.Fatal(err)
	}
	startNode(t, c, local, "sbx-test-node")
	cs := c.Client

	n := waitNode(t, ctx, c, "sbx-test-node")
	if n.Labels[node.NodeLabel] != "true" {
		t.Errorf("labels %v", n.Labels)
	}
	var sbxTaint bool
	for _, tn := range n.Spec.Taints {
		if tn.Key == "node.kubernetes.io/not-ready" {
			t.Errorf("the not-ready taint is still there: %v", n.Spec.Taints)
		}
		sbxTaint = sbxTaint || tn.Key == node.TaintKey && tn.Value == "true" && tn.Effect == corev1.TaintEffectNoSchedule
	}
	if !sbxTaint {
		t.Errorf("no %s=true:NoSchedule taint: %v", node.TaintKey, n.Spec.Taints)
	}
	if cpu := n.Status.Capacity.Cpu().Value(); cpu < 1 {
		t.Errorf("cpu capacity %d", cpu)
	}
	if mem := n.Status.Capacity.Memory().Value(); mem < 64<<20 {
		t.Errorf("memory capacity %d", mem)
	}
	if _, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "sbx-test-node", metav1.GetOptions{}); err != nil {
		t.Errorf("lease: %v", err)
	}

	for name, hash := range map[string]string{"wrong-hash": "sha256:" + strings.Repeat("0", 64), "no-hash": ""} {
		pod := SandboxPod(name, "box", hash, "echo", "never")
		if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		p := waitPod(t, ctx, c, name, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
		if p.Spec.NodeName != "sbx-test-node" {
			t.Errorf("%s: scheduled to %q", name, p.Spec.NodeName)
		}
		if p.Status.Reason != node.ReasonPolicyMismatch {
			t.Errorf("%s: reason %q (%s)", name, p.Status.Reason, p.Status.Message)
		}
		if hash != "" && !strings.Contains(p.Status.Message, want) {
			t.Errorf("%s: message %q does not name the compiled hash %s", name, p.Status.Message, want)
		}
		waitEvent(t, ctx, c, name, node.ReasonPolicyMismatch)
	}
}

// SandboxPod is a pod for the sbx node: the toleration, the node
// selector, the sandbox and policy hash annotations and the command.
func SandboxPod(name, sandbox, hash string, command ...string) *corev1.Pod {
	ann := map[string]string{node.SandboxAnnotation: sandbox}
	if hash != "" {
		ann[node.PolicyHashAnnotation] = hash
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann},
		Spec: corev1.PodSpec{
			NodeSelector:                 map[string]string{node.NodeLabel: "true"},
			Tolerations:                  []corev1.Toleration{{Key: node.TaintKey, Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: new(bool),
			Containers:                   []corev1.Container{{Name: "main", Image: "sbx:" + sandbox, Command: command}},
		},
	}
}

func fixture(t *testing.T, ctx context.Context) (string, []string) {
	t.Helper()
	work := t.TempDir()
	f, err := machinetest.New(ctx, work)
	if err != nil {
		t.Fatal(err)
	}
	cfg, diags := lang.Load(f.Dir, lang.Options{Environ: f.Environ})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if _, diags := pipeline.Lock(ctx, cfg, pipeline.Env{Environ: f.Environ}, pipeline.LockOptions{}); diags.HasErrors() {
		t.Fatal(diags)
	}
	return f.Dir, f.Environ
}

func startNode(t *testing.T, c *k8stest.Cluster, local *node.Local, name string) {
	t.Helper()
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
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- node.Run(ctx, node.Options{Name: name, Client: c.Client, Sandboxes: local,
			Listen: "127.0.0.1:" + strconv.Itoa(port), ClientCA: c.KubeletClientCA, VMDir: vmDir})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("node.Run: %v", err)
		}
		os.RemoveAll(vmDir)
	})
}

func waitNode(t *testing.T, ctx context.Context, c *k8stest.Cluster, name string) *corev1.Node {
	t.Helper()
	for {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err == nil && ready(n) && !hasTaint(n, "node.kubernetes.io/not-ready") {
			return n
		}
		if ctx.Err() != nil {
			t.Fatalf("node %s not ready: %v %+v", name, err, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

func waitPod(t *testing.T, ctx context.Context, c *k8stest.Cluster, name string, ok func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	for {
		p, err := c.Client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			last = p
			if ok(p) {
				return p
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("pod %s: %v; last status %+v", name, err, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func waitEvent(t *testing.T, ctx context.Context, c *k8stest.Cluster, pod, reason string) {
	t.Helper()
	sel := fields.Set{"involvedObject.name": pod, "reason": reason}.AsSelector().String()
	for {
		evs, err := c.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err == nil && len(evs.Items) > 0 {
			if evs.Items[0].Type != corev1.EventTypeWarning {
				t.Errorf("event %s of %s is %s", reason, pod, evs.Items[0].Type)
			}
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("no %s event for %s: %v", reason, pod, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
