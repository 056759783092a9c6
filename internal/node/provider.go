package node

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/sandbox"
	"github.com/sbx-dev/sbx/policy"
)

const (
	// SandboxAnnotation names the sandbox block a pod runs.
	SandboxAnnotation = "sbx.dev/sandbox"
	// PolicyHashAnnotation is the hash of the policy the pod was
	// reviewed with (policy.Hash, as sbx apply records it in the state).
	PolicyHashAnnotation = "sbx.dev/policy-hash"

	// ReasonPolicyMismatch is the Event and status reason of a pod whose
	// declared policy hash is not the compiled sandbox's.
	ReasonPolicyMismatch = "PolicyMismatch"
	// ReasonInvalidPod is the reason of a pod the node cannot run as a
	// sandbox (no sandbox annotation, not one container, no command).
	ReasonInvalidPod = "InvalidSandboxPod"
	// ReasonStartFailed is the reason of a pod whose sandbox did not
	// boot.
	ReasonStartFailed = "SandboxStartFailed"
	// ReasonSecretNotDeclared is the reason of a pod that takes a
	// variable's value from a Kubernetes Secret when the sandbox declares
	// no secret with that env: the value would enter the guest.
	ReasonSecretNotDeclared = "SecretNotDeclared"
	// ReasonEnvRefused is the reason of a pod whose environment the node
	// will not give the sandbox: envFrom, a valueFrom other than a
	// secret's secretKeyRef, a literal the sandbox's policy refuses.
	ReasonEnvRefused = "EnvironmentRefused"
	// ReasonSecretUnavailable is the reason of a pod whose Secret the
	// node could not read (missing, no such key, forbidden).
	ReasonSecretUnavailable = "SecretUnavailable"

	// maxLog bounds the output kept per pod.
	maxLog = 4 << 20
)

// launcher is what the provider starts sandboxes with (Local).
type launcher interface {
	Policy(name string) (policy.Sandbox, error)
	Start(ctx context.Context, name, vmDir string, secrets map[string][]byte) (*sandbox.Sandbox, error)
	CommandEnv(name string) []string
	User(name string) string
}

// provider runs pods as sandboxes: virtual-kubelet's PodLifecycleHandler
// and PodNotifier.
type provider struct {
	launch   launcher
	secrets  typedcorev1.SecretsGetter
	recorder record.EventRecorder
	vmRoot   string

	mu     sync.Mutex
	pods   map[string]*runningPod
	notify func(*corev1.Pod)
}

type runningPod struct {
	mu  sync.Mutex
	pod *corev1.Pod
	// sb is the running sandbox and cmd the pod's command (exec runs
	// beside it, with its user, directory and environment); sb is nil
	// until the sandbox boots and after it stops.
	sb     *sandbox.Sandbox
	cmd    guestconn.Cmd
	cancel context.CancelFunc
	done   chan struct{}
	out    logBuffer
}

func key(namespace, name string) string { return namespace + "/" + name }

// CreatePod checks the pod and starts its sandbox in the background.
func (p *provider) CreatePod(ctx context.Context, pod *corev1.Pod) error {
	pod = pod.DeepCopy()
	rp := &runningPod{pod: pod, done: make(chan struct{})}
	p.mu.Lock()
	p.pods[key(pod.Namespace, pod.Name)] = rp
	p.mu.Unlock()

	name, cmd, refs, reason, msg := p.check(pod)
	if reason != "" {
		close(rp.done)
		p.fail(rp, reason, msg)
		return nil
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	rp.cancel = cancel
	p.update(rp, func(s *corev1.PodStatus) {
		s.Phase = corev1.PodPending
		now := metav1.Now()
		s.StartTime = &now
		s.ContainerStatuses = []corev1.ContainerStatus{containerStatus(pod, corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{Reason: "Booting", Message: "booting sandbox." + name},
		})}
	})
	go p.run(runCtx, rp, name, cmd, refs)
	return nil
}

// fail ends rp's pod Failed with reason and msg, and a Warning Event.
func (p *provider) fail(rp *runningPod, reason, msg string) {
	p.recorder.Event(rp.pod, corev1.EventTypeWarning, reason, msg)
	p.update(rp, func(s *corev1.PodStatus) {
		s.Phase, s.Reason, s.Message = corev1.PodFailed, reason, msg
		s.ContainerStatuses = []corev1.ContainerStatus{containerStatus(rp.pod, corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: reason, Message: msg, FinishedAt: metav1.Now()},
		})}
	})
}

// check returns the sandbox name, command and Secret references of pod
// (podEnv), or the reason and message it is refused with.
func (p *provider) check(pod *corev1.Pod) (name string, cmd guestconn.Cmd, refs map[string]secretRef, reason, msg string) {
	name = pod.Annotations[SandboxAnnotation]
	if name == "" {
		return "", cmd, nil, ReasonInvalidPod, "the pod names no sandbox (annotation " + SandboxAnnotation + ")"
	}
	if len(pod.Spec.Containers) != 1 || len(pod.Spec.InitContainers) != 0 || len(pod.Spec.EphemeralContainers) != 0 {
		return "", cmd, nil, ReasonInvalidPod, "a sandbox pod has exactly one container and no init or ephemeral containers"
	}
	c := pod.Spec.Containers[0]
	args := append(append([]string(nil), c.Command...), c.Args...)
	if len(c.Command) == 0 {
		return "", cmd, nil, ReasonInvalidPod, "the container has no command: a sandbox runs the command the pod gives"
	}
	pol, err := p.launch.Policy(name)
	if err != nil {
		return "", cmd, nil, ReasonInvalidPod, err.Error()
	}
	want := policy.Hash(pol)
	got := pod.Annotations[PolicyHashAnnotation]
	if got == "" {
		return "", cmd, nil, ReasonPolicyMismatch, fmt.Sprintf("the pod declares no policy hash (annotation %s); sandbox.%s's is %s", PolicyHashAnnotation, name, want)
	}
	if got != want {
		return "", cmd, nil, ReasonPolicyMismatch, fmt.Sprintf("the pod declares policy hash %s, but sandbox.%s compiles to %s on this node: refused", got, name, want)
	}
	if reason, msg := podVolumes(pod); reason != "" {
		return "", cmd, nil, reason, msg
	}
	env, refs, reason, msg := podEnv(c, pol, name)
	if reason != "" {
		return "", cmd, nil, reason, msg
	}
	env = append(p.launch.CommandEnv(name), env...)
	return name, guestconn.Cmd{Args: args, Env: env, Dir: c.WorkingDir, User: p.launch.User(name)}, refs, "", ""
}

// run boots the sandbox, runs the command and records its end.
func (p *provider) run(ctx context.Context, rp *runningPod, name string, cmd guestconn.Cmd, refs map[string]secretRef) {
	defer close(rp.done)
	var values map[string][]byte
	if len(refs) > 0 {
		var err error
		if values, err = readSecrets(ctx, p.secrets, rp.pod.Namespace, refs); err != nil {
			if ctx.Err() == nil {
				p.fail(rp, ReasonSecretUnavailable, err.Error())
			}
			return
		}
	}
	vmDir, err := os.MkdirTemp(p.vmRoot, "pod-")
	if err == nil {
		defer os.RemoveAll(vmDir)
	}
	var sb *sandbox.Sandbox
	if err == nil {
		sb, err = p.launch.Start(ctx, name, vmDir, values)
	}
	if err != nil {
		if ctx.Err() != nil {
			return // deleted while it booted: DeletePod reports
		}
		p.fail(rp, ReasonStartFailed, err.Error())
		return
	}

	started := metav1.Now()
	p.update(rp, func(s *corev1.PodStatus) {
		s.Phase = corev1.PodRunning
		s.PodIP, s.PodIPs, s.HostIP = "", nil, ""
		s.Conditions = []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: started},
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: started},
		}
		cs := containerStatus(rp.pod, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}})
		cs.Ready, cs.Started = true, ptr(true)
		s.ContainerStatuses = []corev1.ContainerStatus{cs}
	})
	rp.mu.Lock()
	rp.sb, rp.cmd = sb, cmd
	rp.mu.Unlock()
	cmd.Stdout, cmd.Stderr = &rp.out, &rp.out
	st, err := sb.Machine().Exec(ctx, cmd)
	rp.mu.Lock()
	rp.sb = nil
	rp.mu.Unlock()
	// The VM is stopped before the pod is reported terminated, so that
	// a finished pod holds no machine.
	stopErr := sb.Stop(context.WithoutCancel(ctx))
	if ctx.Err() != nil {
		return
	}
	term := &corev1.ContainerStateTerminated{StartedAt: started, FinishedAt: metav1.Now()}
	switch {
	case err != nil:
		term.ExitCode, term.Reason, term.Message = 1, "ExecFailed", err.Error()
	case st.Signal != "":
		term.ExitCode, term.Reason, term.Signal = 128, "Signaled", 0
		term.Message = "killed by " + st.Signal
	default:
		term.ExitCode = int32(st.Code)
		term.Reason = "Completed"
		if st.Code != 0 {
			term.Reason = "Error"
		}
	}
	if stopErr != nil && err == nil {
		term.Message = "stopping the sandbox: " + stopErr.Error()
	}
	p.update(rp, func(s *corev1.PodStatus) {
		s.Phase = corev1.PodSucceeded
		if term.ExitCode != 0 {
			s.Phase = corev1.PodFailed
		}
		s.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: term.FinishedAt, Reason: "PodCompleted"}}
		s.ContainerStatuses = []corev1.ContainerStatus{containerStatus(rp.pod, corev1.ContainerState{Terminated: term})}
	})
}

// UpdatePod changes nothing: a sandbox pod's spec is fixed.
func (p *provider) UpdatePod(ctx context.Context, pod *corev1.Pod) error { return nil }

// DeletePod stops the pod's sandbox and reports it terminated.
func (p *provider) DeletePod(ctx context.Context, pod *corev1.Pod) error {
	p.mu.Lock()
	rp := p.pods[key(pod.Namespace, pod.Name)]
	p.mu.Unlock()
	if rp == nil {
		return errdefs.NotFoundf("pod %s/%s is not known", pod.Namespace, pod.Name)
	}
	if rp.cancel != nil {
		rp.cancel()
	}
	<-rp.done // the sandbox is stopped
	p.update(rp, func(s *corev1.PodStatus) {
		for i := range s.ContainerStatuses {
			cs := &s.ContainerStatuses[i]
			if cs.State.Terminated == nil {
				cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Deleted", FinishedAt: metav1.Now()}}
				cs.Ready = false
			}
		}
		if s.Phase != corev1.PodSucceeded && s.Phase != corev1.PodFailed {
			s.Phase = corev1.PodFailed
			s.Reason = "Deleted"
		}
	})
	p.mu.Lock()
	delete(p.pods, key(pod.Namespace, pod.Name))
	p.mu.Unlock()
	return nil
}

// GetPod returns the pod with its status as the node knows it.
func (p *provider) GetPod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	p.mu.Lock()
	rp := p.pods[key(namespace, name)]
	p.mu.Unlock()
	if rp == nil {
		return nil, errdefs.NotFoundf("pod %s/%s is not known", namespace, name)
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return rp.pod.DeepCopy(), nil
}

// GetPodStatus returns GetPod's status.
func (p *provider) GetPodStatus(ctx context.Context, namespace, name string) (*corev1.PodStatus, error) {
	pod, err := p.GetPod(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return &pod.Status, nil
}

// GetPods returns every pod the node runs or ran.
func (p *provider) GetPods(ctx context.Context) ([]*corev1.Pod, error) {
	p.mu.Lock()
	rps := make([]*runningPod, 0, len(p.pods))
	for _, rp := range p.pods {
		rps = append(rps, rp)
	}
	p.mu.Unlock()
	pods := make([]*corev1.Pod, 0, len(rps))
	for _, rp := range rps {
		rp.mu.Lock()
		pods = append(pods, rp.pod.DeepCopy())
		rp.mu.Unlock()
	}
	return pods, nil
}

// NotifyPods registers the callback status changes are reported to.
func (p *provider) NotifyPods(ctx context.Context, f func(*corev1.Pod)) {
	p.mu.Lock()
	p.notify = f
	p.mu.Unlock()
}

// update changes rp's status with f and reports it.
func (p *provider) update(rp *runningPod, f func(*corev1.PodStatus)) {
	rp.mu.Lock()
	f(&rp.pod.Status)
	pod := rp.pod.DeepCopy()
	rp.mu.Unlock()
	p.mu.Lock()
	notify := p.notify
	p.mu.Unlock()
	if notify != nil {
		notify(pod)
	}
}

// logs returns the output of the pod's command so far.
func (p *provider) logs(ctx context.Context, namespace, name, container string, opts api.ContainerLogOpts) (io.ReadCloser, error) {
	p.mu.Lock()
	rp := p.pods[key(namespace, name)]
	p.mu.Unlock()
	if rp == nil {
		return nil, errdefs.NotFoundf("pod %s/%s is not known", namespace, name)
	}
	b := rp.out.Bytes()
	if opts.Tail > 0 {
		lines := strings.SplitAfter(string(b), "\n")
		if len(lines) > 0 && lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		if len(lines) > opts.Tail {
			lines = lines[len(lines)-opts.Tail:]
		}
		b = []byte(strings.Join(lines, ""))
	}
	if opts.LimitBytes > 0 && len(b) > opts.LimitBytes {
		b = b[:opts.LimitBytes]
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

func containerStatus(pod *corev1.Pod, st corev1.ContainerState) corev1.ContainerStatus {
	cs := corev1.ContainerStatus{State: st, Started: ptr(st.Running != nil)}
	if len(pod.Spec.Containers) > 0 {
		c := pod.Spec.Containers[0]
		cs.Name, cs.Image, cs.ImageID = c.Name, c.Image, c.Image
	}
	return cs
}

func ptr[T any](v T) *T { return &v }

// logBuffer keeps the first maxLog bytes written to it.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := maxLog - l.buf.Len(); room > 0 {
		if len(b) > room {
			l.buf.Write(b[:room])
		} else {
			l.buf.Write(b)
		}
	}
	return len(b), nil
}

func (l *logBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.buf.Bytes())
}
