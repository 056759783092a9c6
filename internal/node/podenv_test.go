package node

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/sbx-dev/sbx/policy"
)

// TestPodEnv: a secretKeyRef on a declared secret's env becomes a
// reference and no variable; every other way of putting a value the spec
// does not declare into the guest's environment is refused with its
// reason, and no refusal carries a value.
func TestPodEnv(t *testing.T) {
	oauth := policy.SecretBinding{Name: "login", Env: "LOGIN_TOKEN", OAuth: &policy.OAuth{}}
	p := policy.Sandbox{Secrets: []policy.SecretBinding{{Name: "api", Env: "API_TOKEN"}, oauth}, ForbidEnv: []string{"AWS_*"}}
	secretEnv := func(name, secret, key string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key}}}
	}
	c := corev1.Container{Env: []corev1.EnvVar{{Name: "MODE", Value: "test"}, secretEnv("API_TOKEN", "creds", "token")}}
	env, refs, reason, msg := podEnv(c, p, "box")
	if reason != "" {
		t.Fatalf("refused: %s: %s", reason, msg)
	}
	if len(env) != 1 || env[0] != "MODE=test" {
		t.Errorf("env %q: want only the literal", env)
	}
	if r := refs["api"]; len(refs) != 1 || r != (secretRef{Env: "API_TOKEN", Name: "creds", Key: "token"}) {
		t.Errorf("refs %+v", refs)
	}

	yes := true
	optional := secretEnv("API_TOKEN", "creds", "token")
	optional.ValueFrom.SecretKeyRef.Optional = &yes
	for _, c := range []struct {
		what   string
		env    []corev1.EnvVar
		from   []corev1.EnvFromSource
		reason string
		says   string
	}{
		{"undeclared secretKeyRef", []corev1.EnvVar{secretEnv("SMUGGLED", "creds", "token")}, nil, ReasonSecretNotDeclared, "declares no secret with env SMUGGLED"},
		{"configMapKeyRef", []corev1.EnvVar{{Name: "API_TOKEN", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{Key: "k"}}}}, nil, ReasonEnvRefused, "configMapKeyRef"},
		{"fieldRef", []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}, nil, ReasonEnvRefused, "fieldRef"},
		{"resourceFieldRef", []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}}}, nil, ReasonEnvRefused, "resourceFieldRef"},
		{"fileKeyRef", []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{FileKeyRef: &corev1.FileKeySelector{Key: "k"}}}}, nil, ReasonEnvRefused, "fileKeyRef"},
		{"envFrom a Secret", nil, []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}}}, ReasonEnvRefused, "envFrom"},
		{"envFrom a ConfigMap", nil, []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}}, ReasonEnvRefused, "envFrom"},
		{"an OAuth login's env", []corev1.EnvVar{secretEnv("LOGIN_TOKEN", "creds", "token")}, nil, ReasonEnvRefused, "OAuth login"},
		{"optional", []corev1.EnvVar{optional}, nil, ReasonEnvRefused, "optional"},
		{"twice", []corev1.EnvVar{secretEnv("API_TOKEN", "creds", "a"), secretEnv("API_TOKEN", "creds", "b")}, nil, ReasonEnvRefused, "listed twice"},
		{"a literal in a secret's variable", []corev1.EnvVar{{Name: "API_TOKEN", Value: "hunter2"}}, nil, ReasonEnvRefused, "reserved for the placeholder of secret.api"},
		{"a forbidden literal", []corev1.EnvVar{{Name: "AWS_SECRET_ACCESS_KEY", Value: "hunter2"}}, nil, ReasonEnvRefused, "forbid_env"},
	} {
		_, _, reason, msg := podEnv(corev1.Container{Env: c.env, EnvFrom: c.from}, p, "box")
		if reason != c.reason || !strings.Contains(msg, c.says) || strings.Contains(msg, "hunter2") {
			t.Errorf("%s: %s: %s; want %s saying %q", c.what, reason, msg, c.reason, c.says)
		}
	}
}

// TestPodVolumes: any volume or volume mount refuses the pod, a Secret
// volume and the service account token's projected one among them.
func TestPodVolumes(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main"}}}}
	if reason, msg := podVolumes(pod); reason != "" {
		t.Errorf("no volumes: %s: %s", reason, msg)
	}
	for _, v := range []corev1.Volume{
		{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}},
		{Name: "kube-api-access-x", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}},
		{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	} {
		p := pod.DeepCopy()
		p.Spec.Volumes = []corev1.Volume{v}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: v.Name, MountPath: "/x"}}
		if reason, msg := podVolumes(p); reason != ReasonInvalidPod || !strings.Contains(msg, v.Name) {
			t.Errorf("volume %s: %s: %s", v.Name, reason, msg)
		}
	}
}
