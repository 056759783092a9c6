package node

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/sbx-dev/sbx/internal/sandbox/sandboxnet"
	"github.com/sbx-dev/sbx/policy"
)

// secretRef is where a pod says a sandbox secret's value is: key Key of
// the Kubernetes Secret Name in the pod's namespace.
type secretRef struct {
	Env  string // the container's variable, the sandbox secret's env
	Name string // the Kubernetes Secret
	Key  string
}

// podEnv checks the container's environment against the sandbox's
// policy p and returns the literal variables the command runs with and,
// by sandbox secret name, the Kubernetes Secret keys their values come
// from. The rules (decision 0016):
//
//   - valueFrom.secretKeyRef is allowed only on a variable that is the
//     env of a secret p declares (not an OAuth login, whose tokens live
//     in a credential file), once, and not optional: the value becomes
//     that secret's, substituted on the host into requests to its hosts,
//     and the guest has the placeholder in the variable as it would
//     locally. On any other variable it is refused, so that a Secret's
//     value never reaches the guest as plain environment;
//   - every other valueFrom (configMapKeyRef, fieldRef,
//     resourceFieldRef, fileKeyRef) and envFrom are refused: the node
//     resolves no value into the guest's environment but literals;
//   - literal variables pass sandboxnet.CheckEnv: not a secret's
//     variable, no placeholder, not forbidden by forbid_env.
//
// A refusal is its reason and message; no value is ever in it.
func podEnv(c corev1.Container, p policy.Sandbox, sandbox string) (env []string, refs map[string]secretRef, reason, msg string) {
	if len(c.EnvFrom) > 0 {
		return nil, nil, ReasonEnvRefused, "the container uses envFrom, which a sandbox pod may not: name each variable, and take a secret's value only for a variable sandbox." + sandbox + " declares as a secret's env"
	}
	byEnv := map[string]policy.SecretBinding{}
	for _, s := range p.Secrets {
		byEnv[s.Env] = s
	}
	refs = map[string]secretRef{}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env = append(env, e.Name+"="+e.Value)
			continue
		}
		ref := e.ValueFrom.SecretKeyRef
		if ref == nil {
			return nil, nil, ReasonEnvRefused, fmt.Sprintf("environment variable %s takes its value from a %s, which a sandbox pod may not: only a secretKeyRef, for a variable the sandbox declares as a secret's env, is resolved (on the host)", e.Name, valueSourceKind(e.ValueFrom))
		}
		s, ok := byEnv[e.Name]
		if !ok {
			return nil, nil, ReasonSecretNotDeclared, fmt.Sprintf("environment variable %s takes its value from Secret %s key %s, but sandbox.%s declares no secret with env %s: the value would reach the guest as plain environment, so the pod is refused (declared: %s)", e.Name, ref.Name, ref.Key, sandbox, e.Name, declaredEnvs(p))
		}
		if s.OAuth != nil {
			return nil, nil, ReasonEnvRefused, fmt.Sprintf("environment variable %s is secret.%s's, an OAuth login whose tokens the host keeps in a credential file: its value cannot come from a Kubernetes Secret", e.Name, s.Name)
		}
		if ref.Optional != nil && *ref.Optional {
			return nil, nil, ReasonEnvRefused, fmt.Sprintf("environment variable %s's secretKeyRef is optional: a sandbox secret needs its value, so it may not be", e.Name)
		}
		if _, dup := refs[s.Name]; dup {
			return nil, nil, ReasonEnvRefused, fmt.Sprintf("environment variable %s is listed twice", e.Name)
		}
		refs[s.Name] = secretRef{Env: e.Name, Name: ref.Name, Key: ref.Key}
	}
	if err := sandboxnet.CheckEnv(p, env); err != nil {
		return nil, nil, ReasonEnvRefused, "the container's environment: " + err.Error()
	}
	return env, refs, "", ""
}

func valueSourceKind(v *corev1.EnvVarSource) string {
	switch {
	case v.ConfigMapKeyRef != nil:
		return "configMapKeyRef"
	case v.FieldRef != nil:
		return "fieldRef"
	case v.ResourceFieldRef != nil:
		return "resourceFieldRef"
	case v.FileKeyRef != nil:
		return "fileKeyRef"
	}
	return "value source"
}

func declaredEnvs(p policy.Sandbox) string {
	var envs []string
	for _, s := range p.Secrets {
		envs = append(envs, s.Env)
	}
	if len(envs) == 0 {
		return "none"
	}
	return fmt.Sprint(envs)
}

// podVolumes refuses a pod with volumes or volume mounts: a sandbox's
// mounts are its spec's, served by the host's file servers, and a
// Secret, ConfigMap, projected or downward-API volume would put values
// in the guest that the spec never declared.
func podVolumes(pod *corev1.Pod) (reason, msg string) {
	var names []string
	for _, v := range pod.Spec.Volumes {
		names = append(names, v.Name)
	}
	for _, c := range pod.Spec.Containers {
		for _, m := range c.VolumeMounts {
			names = append(names, m.Name)
		}
	}
	if len(names) == 0 {
		return "", ""
	}
	slices.Sort(names)
	return ReasonInvalidPod, fmt.Sprintf("the pod has volumes (%v): a sandbox's mounts come from its spec, and no Secret, ConfigMap, projected or other volume enters the guest (a service account token is one: set automountServiceAccountToken: false)", slices.Compact(names))
}

// readSecrets reads the values refs name from the Secrets of namespace
// ns; the error names the Secret and key, never a value.
func readSecrets(ctx context.Context, c typedcorev1.SecretsGetter, ns string, refs map[string]secretRef) (map[string][]byte, error) {
	values := map[string][]byte{}
	got := map[string]*corev1.Secret{}
	for _, name := range slices.Sorted(maps.Keys(refs)) {
		r := refs[name]
		sec, ok := got[r.Name]
		if !ok {
			var err error
			sec, err = c.Secrets(ns).Get(ctx, r.Name, metav1.GetOptions{})
			if err != nil {
				for _, v := range values {
					clear(v)
				}
				if errors.IsForbidden(err) {
					return nil, fmt.Errorf("environment variable %s: the node may not read Secret %s/%s (it needs get on it): %w", r.Env, ns, r.Name, err)
				}
				return nil, fmt.Errorf("environment variable %s: Secret %s/%s: %w", r.Env, ns, r.Name, err)
			}
			got[r.Name] = sec
		}
		v, ok := sec.Data[r.Key]
		if !ok {
			for _, v := range values {
				clear(v)
			}
			return nil, fmt.Errorf("environment variable %s: Secret %s/%s has no key %s", r.Env, ns, r.Name, r.Key)
		}
		values[name] = v
	}
	return values, nil
}
