package node

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	vknode "github.com/virtual-kubelet/virtual-kubelet/node"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

const (
	// TaintKey is the key of the node's NoSchedule taint: only pods
	// that tolerate it (sandbox pods) are scheduled to it.
	TaintKey = "sbx.dev/sandbox"
	// NodeLabel is the label a sandbox pod's nodeSelector names.
	NodeLabel = "sbx.dev/node"

	notReadyTaint = "node.kubernetes.io/not-ready"
)

// Options configure Run.
type Options struct {
	// Name is the Node's name.
	Name string
	// Client talks to the API server.
	Client kubernetes.Interface
	// Sandboxes starts the pods' sandboxes.
	Sandboxes *Local
	// Listen is the address of the kubelet API the API server reads
	// logs from (host:port, an IP host), which the Node advertises;
	// empty serves none.
	Listen string
	// ClientCA is the PEM file of the authority whose client
	// certificates the kubelet API accepts (the API server's
	// --kubelet-client-certificate); it must be set with Listen.
	ClientCA string
	// VMDir is where the pods' VM directories are made; empty means the
	// temporary directory. Unix socket paths are short: keep it short.
	VMDir string
	// Ready, when set, is called once the Node is registered and
	// schedulable and the pod controller runs.
	Ready func()
}

// Run registers the Node, keeps its Lease and status, and runs the pods
// bound to it until ctx ends; then it stops their sandboxes.
func Run(ctx context.Context, o Options) error {
	if o.Name == "" || o.Client == nil || o.Sandboxes == nil {
		return errors.New("node: a name, a client and a configuration are needed")
	}
	if (o.Listen == "") != (o.ClientCA == "") {
		return errors.New("node: the kubelet API needs both a listen address and a client CA")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	n, err := nodeObject(o)
	if err != nil {
		return err
	}

	broadcaster := record.NewBroadcaster()
	defer broadcaster.Shutdown()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: o.Client.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "sbx-node", Host: o.Name})

	p := &provider{launch: o.Sandboxes, secrets: o.Client.CoreV1(), recorder: recorder, vmRoot: o.VMDir, pods: map[string]*runningPod{}}

	nc, err := vknode.NewNodeController(vknode.NewNaiveNodeProvider(), n, o.Client.CoreV1().Nodes(),
		vknode.WithNodeEnableLeaseV1(o.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease), 40))
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}

	// Only this node's pods are watched; the ConfigMap, Secret and
	// Service informers are never started (the downward API is not
	// resolved), so no cluster-wide watch of them is made.
	podFactory := informers.NewSharedInformerFactoryWithOptions(o.Client, time.Minute,
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.FieldSelector = "spec.nodeName=" + o.Name
		}))
	idle := informers.NewSharedInformerFactory(o.Client, 0)
	pc, err := vknode.NewPodController(vknode.PodControllerConfig{
		PodClient:                 o.Client.CoreV1(),
		PodInformer:               podFactory.Core().V1().Pods(),
		EventRecorder:             recorder,
		Provider:                  p,
		ConfigMapInformer:         idle.Core().V1().ConfigMaps(),
		SecretInformer:            idle.Core().V1().Secrets(),
		ServiceInformer:           idle.Core().V1().Services(),
		SkipDownwardAPIResolution: true,
	})
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}

	errc := make(chan error, 3)
	if o.Listen != "" {
		srv, err := kubeletServer(o, p)
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", o.Listen)
		if err != nil {
			return fmt.Errorf("node: kubelet API: %w", err)
		}
		go func() {
			if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("node: kubelet API: %w", err)
			}
		}()
		defer srv.Close()
	}

	go func() {
		if err := nc.Run(ctx); err != nil && ctx.Err() == nil {
			errc <- fmt.Errorf("node: %w", err)
		}
	}()
	select {
	case <-nc.Ready():
	case err := <-errc:
		return err
	case <-ctx.Done():
		return nil
	}
	if err := clearNotReady(ctx, o.Client, o.Name); err != nil {
		return err
	}
	podFactory.Start(ctx.Done())
	go func() {
		if err := pc.Run(ctx, 4); err != nil && ctx.Err() == nil {
			errc <- fmt.Errorf("node: %w", err)
		}
	}()
	select {
	case <-pc.Ready():
	case err := <-errc:
		return err
	case <-ctx.Done():
		return nil
	}
	if o.Ready != nil {
		o.Ready()
	}
	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	cancel()
	p.stopAll()
	return err
}

// stopAll stops every sandbox still running.
func (p *provider) stopAll() {
	p.mu.Lock()
	rps := make([]*runningPod, 0, len(p.pods))
	for _, rp := range p.pods {
		rps = append(rps, rp)
	}
	p.mu.Unlock()
	for _, rp := range rps {
		if rp.cancel != nil {
			rp.cancel()
		}
		<-rp.done
	}
}

// nodeObject is the Node as the node registers it.
func nodeObject(o Options) (*corev1.Node, error) {
	mem, err := memTotal()
	if err != nil {
		return nil, err
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(mem, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(110, resource.DecimalSI),
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: o.Name,
			Labels: map[string]string{
				NodeLabel:                "true",
				"type":                   "virtual-kubelet",
				"kubernetes.io/role":     "agent",
				"kubernetes.io/hostname": o.Name,
				"kubernetes.io/os":       runtime.GOOS,
				"kubernetes.io/arch":     runtime.GOARCH,
			},
		},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: TaintKey, Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			NodeInfo:    corev1.NodeSystemInfo{OperatingSystem: runtime.GOOS, Architecture: runtime.GOARCH, KubeletVersion: "sbx"},
			Capacity:    res,
			Allocatable: res,
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "SandboxesReady", Message: "sbx runs sandboxes", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()},
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "SufficientMemory", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()},
				{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "NoDiskPressure", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()},
				{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "SufficientPID", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()},
				{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse, Reason: "RouteCreated", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()},
			},
		},
	}
	if o.Listen != "" {
		host, port, err := net.SplitHostPort(o.Listen)
		if err != nil {
			return nil, fmt.Errorf("node: listen address %q: %w", o.Listen, err)
		}
		pn, err := strconv.Atoi(port)
		if err != nil || pn == 0 {
			return nil, fmt.Errorf("node: listen address %q needs a port", o.Listen)
		}
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: host}}
		n.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(pn)
	}
	return n, nil
}

// clearNotReady removes the not-ready taint the API server's admission
// adds to every new Node (the controller-manager's node lifecycle
// controller would remove it once the Node is Ready, which it is).
func clearNotReady(ctx context.Context, c kubernetes.Interface, name string) error {
	for {
		n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("node: %w", err)
		}
		var keep []corev1.Taint
		for _, t := range n.Spec.Taints {
			if t.Key != notReadyTaint {
				keep = append(keep, t)
			}
		}
		if len(keep) == len(n.Spec.Taints) {
			return nil
		}
		n.Spec.Taints = keep
		_, err = c.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// kubeletServer is the kubelet API (container logs) over TLS with a
// certificate of its own, accepting only clients whose certificate
// o.ClientCA signed.
func kubeletServer(o Options, p *provider) (*http.Server, error) {
	caPEM, err := os.ReadFile(o.ClientCA)
	if err != nil {
		return nil, fmt.Errorf("node: client CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("node: client CA %s holds no certificate", o.ClientCA)
	}
	cert, err := servingCert(o.Name, o.Listen)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	api.AttachPodRoutes(api.PodHandlerConfig{
		GetContainerLogs: p.logs,
		RunInContainer:   p.exec,
		GetPods:          p.GetPods,
	}, mux, false)
	return &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{cert},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    pool,
			MinVersion:   tls.VersionTLS12,
		},
	}, nil
}

// servingCert is a self-signed certificate for the kubelet API's address.
func servingCert(name, listen string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{name},
	}
	if host, _, err := net.SplitHostPort(listen); err == nil {
		if ip := net.ParseIP(host); ip != nil {
			tmpl.IPAddresses = []net.IP{ip}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// memTotal is the host's memory in bytes, from /proc/meminfo.
func memTotal() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("node: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("node: /proc/meminfo: %w", err)
			}
			return kb * 1024, nil
		}
	}
	return 0, errors.New("node: no MemTotal in /proc/meminfo")
}
