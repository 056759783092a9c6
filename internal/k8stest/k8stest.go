package k8stest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const (
	// Version is the Kubernetes release the binaries are built from.
	Version = "1.37.2"
	// BinEnv names the directory of the binaries.
	BinEnv = "SBX_K8S_TESTBIN"
	// SkipEnv, set to 1, skips the tests that need them when they are
	// missing.
	SkipEnv = "SBX_SKIP_K8S_TESTS"
)

// Binaries are the programs a Cluster runs (kubectl is for the tests).
var Binaries = []string{"etcd", "kube-apiserver", "kube-scheduler", "kubectl"}

// BinDir is the directory of the binaries: $SBX_K8S_TESTBIN, else
// $HOME/.cache/sbx-test/k8s-VERSION.
func BinDir() string {
	if d := os.Getenv(BinEnv); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "sbx-test", "k8s-"+Version)
}

// Require returns BinDir when it holds every binary. Otherwise it fails
// t, naming the command that builds them, or skips it when
// SBX_SKIP_K8S_TESTS=1.
func Require(t testing.TB) string {
	t.Helper()
	dir := BinDir()
	var missing []string
	for _, b := range Binaries {
		if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.Mode()&0o111 == 0 {
			missing = append(missing, b)
		}
	}
	if len(missing) == 0 {
		return dir
	}
	msg := fmt.Sprintf("no %s in %s: build them with .ci/k8s-testbin (or name their directory with %s)", strings.Join(missing, ", "), dir, BinEnv)
	if os.Getenv(SkipEnv) == "1" {
		t.Skip(msg + "; skipped: " + SkipEnv + "=1")
	}
	t.Fatal(msg + "; set " + SkipEnv + "=1 to skip the tests that need them")
	return ""
}

// Options say what Start runs.
type Options struct {
	// Scheduler also runs kube-scheduler.
	Scheduler bool
}

// Cluster is a running control plane.
type Cluster struct {
	// Bin is the binaries' directory.
	Bin string
	// Dir holds the certificates, the kubeconfig and the processes' logs.
	Dir string
	// Kubeconfig is the path of a kubeconfig for the admin.
	Kubeconfig string
	// Config is the admin's client configuration.
	Config *rest.Config
	// Client is a clientset for the admin.
	Client kubernetes.Interface
	// KubeletClientCA is the PEM file of the authority that signed the
	// client certificate the API server presents to kubelets.
	KubeletClientCA string

	procs []*proc
}

type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// Start starts etcd and kube-apiserver (and kube-scheduler with
// opts.Scheduler), waits until the API server is ready, creates the
// default namespace's "default" ServiceAccount (which the
// controller-manager, not run here, would make) and returns the cluster.
// Its processes are stopped when t ends.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	bin := Require(t)
	dir, err := os.MkdirTemp("", "sbx-k8s-")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Bin: bin, Dir: dir}
	t.Cleanup(func() {
		c.stop(t)
		if !t.Failed() {
			os.RemoveAll(dir)
		}
	})
	if err := c.start(t, opts); err != nil {
		t.Fatalf("starting the control plane: %v", err)
	}
	return c
}

func (c *Cluster) start(t testing.TB, opts Options) error {
	ports, err := freePorts(4)
	if err != nil {
		return err
	}
	etcdPort, peerPort, apiPort, schedPort := ports[0], ports[1], ports[2], ports[3]
	pki, err := writePKI(c.Dir)
	if err != nil {
		return err
	}
	c.KubeletClientCA = pki.ca
	token := pki.token
	server := "https://127.0.0.1:" + strconv.Itoa(apiPort)
	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: %q, certificate-authority: %q}}]
users: [{name: admin, user: {token: %q}}]
contexts: [{name: admin, context: {cluster: local, user: admin}}]
current-context: admin
`, server, pki.ca, token)
	if err := os.WriteFile(c.Kubeconfig, []byte(kc), 0o600); err != nil {
		return err
	}

	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	if err := c.run("etcd", "--name=t", "--data-dir="+filepath.Join(c.Dir, "etcd-data"), "--unsafe-no-fsync",
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=t="+peerURL); err != nil {
		return err
	}
	if err := c.waitHealthy(etcdURL+"/health", nil, ""); err != nil {
		return err
	}
	if err := c.run("kube-apiserver", "--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port="+strconv.Itoa(apiPort),
		"--tls-cert-file="+pki.serverCert, "--tls-private-key-file="+pki.serverKey,
		"--token-auth-file="+pki.tokens,
		"--kubelet-client-certificate="+pki.kubeletCert, "--kubelet-client-key="+pki.kubeletKey,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+pki.saPub, "--service-account-signing-key-file="+pki.saKey,
		"--service-cluster-ip-range=10.0.0.0/24", "--authorization-mode=Node,RBAC",
		"--endpoint-reconciler-type=none", "--cert-dir="+filepath.Join(c.Dir, "certdir")); err != nil {
		return err
	}
	if err := c.waitHealthy(server+"/readyz", pki.caPool, token); err != nil {
		return err
	}
	cfg := &rest.Config{Host: server, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAFile: pki.ca}, QPS: 100, Burst: 200}
	c.Config = cfg
	if c.Client, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	if err := retry(ctx, func() error {
		_, err := c.Client.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("creating the default ServiceAccount: %w", err)
	}
	if opts.Scheduler {
		if err := c.run("kube-scheduler", "--kubeconfig="+c.Kubeconfig,
			"--authentication-kubeconfig="+c.Kubeconfig, "--authorization-kubeconfig="+c.Kubeconfig,
			"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(schedPort), "--leader-elect=false"); err != nil {
			return err
		}
		if err := c.waitHealthy("https://127.0.0.1:"+strconv.Itoa(schedPort)+"/healthz", nil, ""); err != nil {
			return err
		}
	}
	return nil
}

// Kubectl runs the built kubectl against the cluster and returns its
// standard output, or an error with its standard error.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.Bin, "kubectl"), append([]string{"--kubeconfig=" + c.Kubeconfig}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// KubectlRun runs the built kubectl against the cluster with stdin as
// its standard input and returns its output and exit code; err is only
// for a kubectl that could not run.
func (c *Cluster) KubectlRun(ctx context.Context, stdin io.Reader, args ...string) (stdout, stderr string, code int, err error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.Bin, "kubectl"), append([]string{"--kubeconfig=" + c.Kubeconfig}, args...)...)
	var o, e strings.Builder
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &o, &e
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return o.String(), e.String(), exit.ExitCode(), nil
	}
	return o.String(), e.String(), 0, err
}

func (c *Cluster) run(name string, args ...string) error {
	logPath := filepath.Join(c.Dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.Command(filepath.Join(c.Bin, name), args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		return err
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	c.procs = append(c.procs, p)
	return nil
}

// waitHealthy polls url until it answers 200, or a started process
// exits, for up to two minutes.
func (c *Cluster) waitHealthy(url string, pool *x509.CertPool, token string) error {
	tr := &http.Transport{TLSClientConfig: tlsConfig(pool)}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		for _, p := range c.procs {
			select {
			case <-p.done:
				return fmt.Errorf("%s exited: %v", p.name, p.cmd.ProcessState)
			default:
			}
		}
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = errors.New(resp.Status)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %w", url, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop ends every process by its PID: SIGTERM, then SIGKILL after ten
// seconds.
func (c *Cluster) stop(t testing.TB) {
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			p.cmd.Process.Kill()
			<-p.done
		}
	}
	if t.Failed() {
		c.logTails(t)
	}
	c.procs = nil
}

func (c *Cluster) logTails(t testing.TB) {
	for _, p := range c.procs {
		b, _ := os.ReadFile(p.log)
		if len(b) > 4000 {
			b = b[len(b)-4000:]
		}
		t.Logf("%s (%s), last lines:\n%s", p.name, p.log, b)
	}
}

func retry(ctx context.Context, f func() error) error {
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

type pkiFiles struct {
	ca, serverCert, serverKey, kubeletCert, kubeletKey, saKey, saPub, tokens, token string
	caPool                                                                          *x509.CertPool
}

// writePKI makes the cluster's authority and the certificates, key and
// token file the API server reads.
func writePKI(dir string) (*pkiFiles, error) {
	p := &pkiFiles{}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sbx-k8stest-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(48 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, _ := x509.ParseCertificate(caDER)
	p.caPool = x509.NewCertPool()
	p.caPool.AddCert(caCert)
	p.ca = filepath.Join(dir, "ca.crt")
	if err := writePEM(p.ca, "CERTIFICATE", caDER); err != nil {
		return nil, err
	}
	leaf := func(name string, serial int64, tmpl *x509.Certificate) (string, string, error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return "", "", err
		}
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(48*time.Hour)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			return "", "", err
		}
		kder, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return "", "", err
		}
		cert, keyPath := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
		if err := writePEM(cert, "CERTIFICATE", der); err != nil {
			return "", "", err
		}
		return cert, keyPath, writePEM(keyPath, "PRIVATE KEY", kder)
	}
	if p.serverCert, p.serverKey, err = leaf("apiserver", 2, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(10, 0, 0, 1)},
		DNSNames:    []string{"localhost", "kubernetes.default.svc"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}); err != nil {
		return nil, err
	}
	if p.kubeletCert, p.kubeletKey, err = leaf("apiserver-kubelet-client", 3, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}); err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	sader, err := x509.MarshalECPrivateKey(saKey)
	if err != nil {
		return nil, err
	}
	p.saKey = filepath.Join(dir, "sa.key")
	if err := writePEM(p.saKey, "EC PRIVATE KEY", sader); err != nil {
		return nil, err
	}
	pubder, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	p.saPub = filepath.Join(dir, "sa.pub")
	if err := writePEM(p.saPub, "PUBLIC KEY", pubder); err != nil {
		return nil, err
	}
	tok := make([]byte, 16)
	rand.Read(tok)
	p.token = fmt.Sprintf("%x", tok)
	p.tokens = filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(p.tokens, []byte(p.token+",admin,admin-uid,system:masters\n"), 0o600); err != nil {
		return nil, err
	}
	return p, nil
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
