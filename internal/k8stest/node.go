package k8stest

import (
	"context"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/sbx-dev/sbx/internal/node"
)

// Namespace is the namespace the helpers' pods are in.
const Namespace = "default"

// Node is an sbx node running against a Cluster.
type Node struct {
	// Name is the Node's name.
	Name string
	// VMDir is where its pods' VM directories are made.
	VMDir string
}

// StartNode runs node.Run for the sandboxes of local as the Node name,
// with its kubelet API on a free loopback port trusting the cluster's
// kubelet client authority, and returns once the node is ready. It is
// stopped, and its VM directory removed, when t ends; an error of
// node.Run fails t.
func (c *Cluster) StartNode(t testing.TB, name string, local *node.Local) *Node {
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
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- node.Run(ctx, node.Options{Name: name, Client: c.Client, Sandboxes: local,
			Listen: "127.0.0.1:" + strconv.Itoa(port), ClientCA: c.KubeletClientCA, VMDir: vmDir,
			Ready: func() { close(ready) }})
	}()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("node.Run: %v", err)
		}
		os.RemoveAll(vmDir)
	}
	t.Cleanup(stop)
	select {
	case <-ready:
	case err := <-done:
		stopped = true
		os.RemoveAll(vmDir)
		t.Fatalf("node.Run: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("the node did not become ready within two minutes")
	}
	return &Node{Name: name, VMDir: vmDir}
}

// SandboxPod is a pod for an sbx node: the toleration of its taint, the
// selector of its label, the annotations naming sandbox and declaring
// hash (none when empty), no service account token, and one container
// running command.
func SandboxPod(name, sandbox, hash string, command ...string) *corev1.Pod {
	ann := map[string]string{node.SandboxAnnotation: sandbox}
	if hash != "" {
		ann[node.PolicyHashAnnotation] = hash
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace, Annotations: ann},
		Spec: corev1.PodSpec{
			NodeSelector:                 map[string]string{node.NodeLabel: "true"},
			Tolerations:                  []corev1.Toleration{{Key: node.TaintKey, Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: new(bool),
			Containers:                   []corev1.Container{{Name: "main", Image: "sbx:" + sandbox, Command: command}},
		},
	}
}

// WaitPod polls pod name of Namespace until ok holds for it, failing t
// with its last status when ctx ends first.
func (c *Cluster) WaitPod(t testing.TB, ctx context.Context, name string, ok func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	for {
		p, err := c.Client.CoreV1().Pods(Namespace).Get(ctx, name, metav1.GetOptions{})
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

// WaitPodPhase is WaitPod until the pod is in phase.
func (c *Cluster) WaitPodPhase(t testing.TB, ctx context.Context, name string, phase corev1.PodPhase) *corev1.Pod {
	t.Helper()
	return c.WaitPod(t, ctx, name, func(p *corev1.Pod) bool { return p.Status.Phase == phase })
}

// WaitEvent polls until an Event of reason about pod exists and fails t
// when it is not a Warning, or when ctx ends first.
func (c *Cluster) WaitEvent(t testing.TB, ctx context.Context, pod, reason string) corev1.Event {
	t.Helper()
	sel := fields.Set{"involvedObject.name": pod, "reason": reason}.AsSelector().String()
	for {
		evs, err := c.Client.CoreV1().Events(Namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err == nil && len(evs.Items) > 0 {
			if evs.Items[0].Type != corev1.EventTypeWarning {
				t.Errorf("event %s of %s is %s", reason, pod, evs.Items[0].Type)
			}
			return evs.Items[0]
		}
		if ctx.Err() != nil {
			t.Fatalf("no %s event for %s: %v", reason, pod, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// WaitNodeReady polls until Node name is Ready without the not-ready
// taint.
func (c *Cluster) WaitNodeReady(t testing.TB, ctx context.Context, name string) *corev1.Node {
	t.Helper()
	for {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err == nil && nodeReady(n) && !hasTaint(n, "node.kubernetes.io/not-ready") {
			return n
		}
		if ctx.Err() != nil {
			t.Fatalf("node %s not ready: %v %+v", name, err, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func nodeReady(n *corev1.Node) bool {
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
