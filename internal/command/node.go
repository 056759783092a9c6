package command

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sbx-dev/sbx/internal/node"
)

const nodeUsage = `
Usage: sbx node [options] -name NAME

  Run this host as a Kubernetes node of sandboxes (a virtual-kubelet
  provider) until interrupted. It registers the Node NAME with the taint
  sbx.dev/sandbox=true:NoSchedule, the label sbx.dev/node=true and this
  host's CPUs and memory as capacity, keeps its Lease, and runs each pod
  scheduled to it as a sandbox of the configuration in -config: the
  annotation sbx.dev/sandbox names the sandbox block, and
  sbx.dev/policy-hash must be the hash of its compiled policy (as "sbx
  apply" records it in .sbx/state.json), or the pod is refused with a
  PolicyMismatch event before anything boots. The pod's one container's
  command and args run in the sandbox; its exit code ends the pod
  (Succeeded or Failed), and
  deleting the pod stops the VM. The lock file is read, never changed.

Options:

  -name NAME          The Node's name.
  -config DIR         The configuration directory (default: the current
                      directory).
  -kubeconfig FILE    The kubeconfig to reach the API server with (default:
                      $KUBECONFIG, else ~/.kube/config).
  -listen ADDR        Serve the kubelet API (kubectl logs) on ADDR, an
                      IP:port the API server reaches; the Node advertises it.
  -client-ca FILE     The authority of the API server's kubelet client
                      certificate; required with -listen, and only its
                      certificates are accepted.
  -vm-dir DIR         Where the pods' VM directories are made (default: the
                      temporary directory).
`

func runNode(ctx context.Context, env *Env, args []string) int {
	var name, dir, kubeconfig, listen, clientCA, vmDir string
	flags := newFlagSet("node")
	flags.StringVar(&name, "name", "", "")
	flags.StringVar(&dir, "config", ".", "")
	flags.StringVar(&kubeconfig, "kubeconfig", "", "")
	flags.StringVar(&listen, "listen", "", "")
	flags.StringVar(&clientCA, "client-ca", "", "")
	flags.StringVar(&vmDir, "vm-dir", "", "")
	pos, code, ok := parseArgs(env, flags, nodeUsage, args)
	if !ok {
		return code
	}
	v := newView(env, false)
	if len(pos) != 0 || name == "" {
		v.errorf("sbx node takes -name NAME and no arguments")
		return ExitError
	}
	if kubeconfig == "" {
		kubeconfig, _ = env.getenv("KUBECONFIG")
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		v.errorDetail("Cannot read the kubeconfig", err.Error())
		return ExitError
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		v.errorDetail("Cannot make a Kubernetes client", err.Error())
		return ExitError
	}
	local, err := node.LoadLocal(ctx, dir, env.Environ)
	if err != nil {
		v.errorDetail("Cannot load the configuration", quoteErr(err))
		return ExitError
	}
	err = node.Run(ctx, node.Options{
		Name: name, Client: client, Sandboxes: local, Listen: listen, ClientCA: clientCA, VMDir: vmDir,
		Ready: func() { fmt.Fprintf(env.Stderr, "node %s is ready\n", name) },
	})
	if err != nil {
		v.errorDetail(fmt.Sprintf("Node %s stopped", name), quoteErr(err))
		return ExitError
	}
	return ExitOK
}
