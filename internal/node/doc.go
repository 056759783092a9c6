// Package node is sbx's Kubernetes node agent: a virtual-kubelet provider
// that registers a Node, holds its Lease, and runs each Pod bound to it
// as an sbx sandbox through pipeline.Start and sandbox.Start, the path
// every sandbox takes.
//
// The Node carries the taint sbx.dev/sandbox=true:NoSchedule and the
// label sbx.dev/node=true, so that only pods that ask for a sandbox land
// on it, and reports the host's CPUs and memory as its capacity. A pod
// names its sandbox block with the annotation sbx.dev/sandbox and
// declares the hash of the policy it was reviewed with in
// sbx.dev/policy-hash; the node compiles the sandbox from its own
// configuration directory and refuses the pod (phase Failed, reason
// PolicyMismatch, and a Warning Event) when the hashes differ, before
// anything boots. The pod's one container's command and arguments run in
// the sandbox; its output is what GetContainerLogs serves (kubectl logs)
// and its exit code the container's terminated state; kubectl exec runs
// beside it in the same sandbox (RunInContainer). Deleting the pod stops
// the VM.
//
// A container env entry named as a declared secret's env with
// valueFrom.secretKeyRef gives that secret its value, read from the
// Kubernetes Secret on the node and kept on the host; every other way of
// putting a value into the guest (other valueFrom kinds, envFrom,
// volumes, a literal in a secret's variable) refuses the pod (podEnv,
// decision 0016).
package node
