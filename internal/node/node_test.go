package node_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sbx-dev/sbx/internal/k8stest"
	"github.com/sbx-dev/sbx/internal/machine/machinetest"
	"github.com/sbx-dev/sbx/internal/node"
	"github.com/sbx-dev/sbx/internal/pipeline"
	"github.com/sbx-dev/sbx/lang"
)

// keyed is a second sandbox of the fixture's image with a secret, whose
// value a pod takes from a Kubernetes Secret.
const keyed = `
egress "api" {
  allow = ["api.test"]
}

secret "api" {
  env    = "API_TOKEN"
  hosts  = ["api.test"]
  source = "env:SBX_NODE_TEST_TOKEN"
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

// TestNodeRefusesPolicyMismatch runs a node against a real API server and
// scheduler: the Node registers with its taint, label, capacity and
// Lease and without the not-ready taint; pods that tolerate the taint
// and select the label are scheduled to it; a pod whose declared policy
// hash is not the compiled sandbox's, or that declares none, is refused
// (phase Failed, reason PolicyMismatch, a Warning Event) without booting.
//
// Pods whose hash is right but that try to put a value the spec does not
// declare into the guest are refused the same way, each with its reason:
// a secretKeyRef on a variable no secret of the sandbox has as its env,
// a configMapKeyRef, a fieldRef, envFrom of a Secret, a Secret volume,
// and a literal in a secret's variable; and a secretKeyRef on the
// secret's env naming a Secret that does not exist ends the pod
// SecretUnavailable before anything boots.
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
	keyedHash, err := local.PolicyHash("keyed")
	if err != nil {
		t.Fatal(err)
	}
	nd := c.StartNode(t, "sbx-test-node", local)
	cs := c.Client

	n := c.WaitNodeReady(t, ctx, nd.Name)
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
	if _, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, nd.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("lease: %v", err)
	}

	// A Secret and a ConfigMap a hostile pod would like in its guest.
	if _, err := cs.CoreV1().Secrets(k8stest.Namespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds"}, Data: map[string][]byte{"token": []byte("hunter2")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps(k8stest.Namespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"token": "hunter2"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	secretRef := func(secret string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: "token"}}
	}
	type refusal struct {
		sandbox, hash, reason, says string
		edit                        func(*corev1.Pod)
	}
	refusals := map[string]refusal{
		"wrong-hash": {"box", "sha256:" + strings.Repeat("0", 64), node.ReasonPolicyMismatch, want, nil},
		"no-hash":    {"box", "", node.ReasonPolicyMismatch, want, nil},
		"undeclared-secret": {"box", want, node.ReasonSecretNotDeclared, "declares no secret with env API_TOKEN", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "API_TOKEN", ValueFrom: secretRef("creds")}}
		}},
		"other-variable": {"keyed", keyedHash, node.ReasonSecretNotDeclared, "declares no secret with env SMUGGLED", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "SMUGGLED", ValueFrom: secretRef("creds")}}
		}},
		"configmap-ref": {"keyed", keyedHash, node.ReasonEnvRefused, "configMapKeyRef", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "API_TOKEN", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Key: "token"}}}}
		}},
		"field-ref": {"keyed", keyedHash, node.ReasonEnvRefused, "fieldRef", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "WHO", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
		}},
		"env-from": {"keyed", keyedHash, node.ReasonEnvRefused, "envFrom", func(p *corev1.Pod) {
			p.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}}}
		}},
		"secret-volume": {"keyed", keyedHash, node.ReasonInvalidPod, "volumes ([creds])", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "creds", MountPath: "/run/creds"}}
		}},
		"literal-in-secret-variable": {"keyed", keyedHash, node.ReasonEnvRefused, "reserved for the placeholder of secret.api", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "API_TOKEN", Value: "hunter2"}}
		}},
		"missing-secret": {"keyed", keyedHash, node.ReasonSecretUnavailable, "Secret default/absent", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "API_TOKEN", ValueFrom: secretRef("absent")}}
		}},
	}
	for name, r := range refusals {
		pod := k8stest.SandboxPod(name, r.sandbox, r.hash, "echo", "never")
		if r.edit != nil {
			r.edit(pod)
		}
		if _, err := cs.CoreV1().Pods(k8stest.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	for name, r := range refusals {
		p := c.WaitPodPhase(t, ctx, name, corev1.PodFailed)
		if p.Spec.NodeName != nd.Name {
			t.Errorf("%s: scheduled to %q", name, p.Spec.NodeName)
		}
		if p.Status.Reason != r.reason || !strings.Contains(p.Status.Message, r.says) || strings.Contains(p.Status.Message, "hunter2") {
			t.Errorf("%s: reason %q (%s); want %s saying %q", name, p.Status.Reason, p.Status.Message, r.reason, r.says)
		}
		ev := c.WaitEvent(t, ctx, name, r.reason)
		if strings.Contains(ev.Message, "hunter2") {
			t.Errorf("%s: the event holds the value: %s", name, ev.Message)
		}
	}
	if ents, err := os.ReadDir(nd.VMDir); err != nil || len(ents) != 0 {
		t.Errorf("the refused pods made VM directories: %v %v", ents, err)
	}
}

func fixture(t *testing.T, ctx context.Context) (string, []string) {
	t.Helper()
	work := t.TempDir()
	f, err := machinetest.New(ctx, work)
	if err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(f.Dir, "sbx.hcl")
	b, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(spec, append(b, keyed...), 0o644); err != nil {
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
