// Package k8stest starts a real Kubernetes control plane for tests: etcd,
// kube-apiserver and, when asked, kube-scheduler, on loopback ports, from
// the binaries .ci/k8s-testbin builds into $SBX_K8S_TESTBIN (default
// $HOME/.cache/sbx-test/k8s-1.37.2). Without them a test fails, so that a
// green run always means the control plane ran, unless
// SBX_SKIP_K8S_TESTS=1, which skips it saying so.
//
// Each Cluster has its own certificate authority, serving certificate,
// admin token and service-account key, made in memory; the API server
// authenticates the admin by a static token and presents a client
// certificate of the same authority to kubelets (KubeletClientCA). Its
// processes are stopped by their PIDs when the test ends.
package k8stest
