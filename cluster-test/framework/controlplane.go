package framework

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

// ControlPlane is etcd and kube-apiserver started by envtest from the binaries build.sh made:
// TLS on 127.0.0.1, RBAC, service-account tokens, and an audit log of CAPI's groups; and
// kube-controller-manager beside them.
type ControlPlane struct {
	env       *envtest.Environment
	admin     *rest.Config
	Client    client.Client
	Clientset *kubernetes.Clientset
	auditLog  string
	apiLog    *os.File
	// ControllerManager is kube-controller-manager's process.
	ControllerManager *Process
	// host and port of the API server, for the Cluster's controlPlaneEndpoint.
	Host string
	Port int
}

func StartControlPlane(t *testing.T, a *Artifacts, bin string) *ControlPlane {
	t.Helper()
	auditPolicy, err := filepath.Abs("testdata/audit-policy.yaml")
	Must(t, err)
	cp := &ControlPlane{auditLog: a.Path("audit.log")}
	apiLog := a.create(t, "kube-apiserver.log")
	cp.apiLog = apiLog
	etcdLog := a.create(t, "etcd.log")
	cp.env = &envtest.Environment{
		BinaryAssetsDirectory:    bin,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	cp.env.ControlPlane.Etcd = &envtest.Etcd{Out: etcdLog, Err: etcdLog}
	api := cp.env.ControlPlane.GetAPIServer()
	api.Out, api.Err = apiLog, apiLog
	api.SecureServing.Address = "127.0.0.1"
	api.Configure().
		// The private network namespace of `make cluster-test` has no default route to guess from.
		Set("advertise-address", "127.0.0.1").
		Set("audit-policy-file", auditPolicy).
		Set("audit-log-path", cp.auditLog).
		Set("audit-log-format", "json").
		Set("service-account-max-token-expiration", "24h").
		// A webhook or APIService named by its Service is reached at the Service's endpoints (its
		// EndpointSlices, kube-controller-manager's), not its ClusterIP, which no kube-proxy
		// routes here: Kubewarden's webhooks (TestKubewardenStack). CAPI's are registered by URL.
		Set("enable-aggregator-routing", "true")
	cfg, err := cp.env.Start()
	if err != nil {
		t.Fatalf("start etcd and kube-apiserver (logs: %s, %s): %v", a.Path("etcd.log"), a.Path("kube-apiserver.log"), err)
	}
	t.Cleanup(func() {
		if err := cp.env.Stop(); err != nil {
			t.Logf("stop control plane: %v", err)
		}
	})
	cp.admin = cfg
	cp.Client, err = client.New(cfg, client.Options{})
	Must(t, err)
	cp.Clientset, err = kubernetes.NewForConfig(cfg)
	Must(t, err)
	cp.Host, cp.Port = splitHostPort(t, api.SecureServing.ListenAddr.HostPort())
	cp.startControllerManager(t, a, bin, api.CertDir)
	return cp
}

// RestartAPIServer stops kube-apiserver (SIGTERM, as a node stops a control plane's static
// Pod for an upgrade: it stops listening at once, then drains its watches for up to a minute)
// and, down after it stopped listening, ends what is left of it (SIGKILL) and starts it again
// with the same command line: the same port, certificates, etcd and audit log, every client's
// credentials still good. It returns once /readyz answers. What talked to it meanwhile saw its
// connections refused. An audit event the kill cut short is dropped from the log's end.
func (cp *ControlPlane) RestartAPIServer(t *testing.T, down time.Duration) {
	t.Helper()
	pid, argv := cp.apiServerProcess(t)
	address := net.JoinHostPort(cp.Host, strconv.Itoa(cp.Port))
	Must(t, syscall.Kill(pid, syscall.SIGTERM))
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		c, err := net.DialTimeout("tcp", address, time.Second)
		if err == nil {
			_ = c.Close()
		}
		return err != nil, nil
	}); err != nil {
		t.Fatalf("kube-apiserver (pid %d) still listens on %s 30 s after SIGTERM", pid, address)
	}
	t.Logf("kube-apiserver stopped listening at %s; down for %s", time.Now().Format(time.RFC3339Nano), down)
	time.Sleep(down)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
		return os.IsNotExist(err), nil
	}); err != nil {
		t.Fatalf("kube-apiserver (pid %d) did not end within 30 s of SIGKILL", pid)
	}
	trimToLastLine(t, cp.auditLog)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = cp.apiLog, cp.apiLog
	Must(t, cmd.Start())
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
		}
	})
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		body, err := cp.Clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", nil
	})
	if err != nil {
		t.Fatalf("kube-apiserver restarted (pid %d) is not ready within 2 minutes (log: %s)", cmd.Process.Pid, cp.apiLog.Name())
	}
	t.Logf("kube-apiserver started again at %s (pid %d), ready", time.Now().Format(time.RFC3339Nano), cmd.Process.Pid)
}

// trimToLastLine cuts a file after its last newline: a line a killed writer left half written.
func trimToLastLine(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	Must(t, err)
	if end := bytes.LastIndexByte(data, '\n') + 1; end < len(data) {
		Must(t, os.Truncate(path, int64(end)))
		t.Logf("%s: dropped %d bytes of an event cut short", path, len(data)-end)
	}
}

// apiServerProcess finds this control plane's kube-apiserver among this process's children:
// the one writing this audit log. Its pid and command line.
func (cp *ControlPlane) apiServerProcess(t *testing.T) (int, []string) {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	Must(t, err)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || len(raw) == 0 {
			continue
		}
		argv := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if filepath.Base(argv[0]) == "kube-apiserver" && slices.Contains(argv, "--audit-log-path="+cp.auditLog) {
			return pid, argv
		}
	}
	t.Fatalf("no kube-apiserver process writes the audit log %s", cp.auditLog)
	return 0, nil
}

// startControllerManager runs kube-controller-manager beside kube-apiserver, as kubeadm runs it
// on a control plane node: the Deployment, ReplicaSet and EndpointSlice controllers, the
// garbage collector, ClusterRole aggregation, every namespace's default ServiceAccount and
// service-account token Secrets. With --use-service-account-credentials each controller acts
// as its own ServiceAccount in kube-system (the garbage collector as
// system:serviceaccount:kube-system:generic-garbage-collector, which the policy's rule 4
// names), with a token it requests for it; its legacy token Secrets are signed with envtest's
// service-account key, the one kube-apiserver verifies. The default controllers only
// (kubeadm adds bootstrapsigner and tokencleaner); no lease (one manager); serving on
// 127.0.0.1 only, for /healthz, which it answers without authentication (no
// --authentication-kubeconfig: envtest's kube-apiserver has no front-proxy CA to delegate to).
func (cp *ControlPlane) startControllerManager(t *testing.T, a *Artifacts, bin, apiCertDir string) {
	t.Helper()
	kubeconfig := a.Path("kubeconfig-kube-controller-manager")
	Must(t, os.WriteFile(kubeconfig, cp.adminKubeconfig(t), 0o600))
	rootCA := a.Path("kube-apiserver-ca.crt")
	Must(t, os.WriteFile(rootCA, cp.admin.CAData, 0o644))
	port := FreePort(t)
	cp.ControllerManager = StartProcess(t, a, "kube-controller-manager", filepath.Join(bin, "kube-controller-manager"), []string{
		"--kubeconfig=" + kubeconfig,
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + filepath.Join(apiCertDir, "sa-signer.key"),
		"--root-ca-file=" + rootCA,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", port),
		"--cert-dir=" + a.Path("kube-controller-manager-certs"),
	})
	// Its serving certificate is self-signed, as a kubelet's probe of it does not verify.
	probe := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	WaitHTTP(t, cp.ControllerManager, fmt.Sprintf("https://127.0.0.1:%d/healthz", port), 2*time.Minute, probe)
}

// waitServiceAccount waits for a ServiceAccount that kube-controller-manager creates (a
// namespace's default).
func (cp *ControlPlane) waitServiceAccount(t *testing.T, namespace, name string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := cp.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &corev1.ServiceAccount{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("no ServiceAccount %s/%s after a minute: kube-controller-manager's serviceaccount controller creates it (log: %s)", namespace, name, cp.ControllerManager.Log)
	}
}

// User is a person: a client certificate for name in groups, as kubectl uses it.
func (cp *ControlPlane) User(t *testing.T, a *Artifacts, name string, groups ...string) string {
	t.Helper()
	u, err := cp.env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	Must(t, err)
	kubeconfig, err := u.KubeConfig()
	Must(t, err)
	path := a.Path("kubeconfig-" + name)
	Must(t, os.WriteFile(path, kubeconfig, 0o600))
	return path
}

// serviceAccountKubeconfig writes a kubeconfig that authenticates as namespace/name with a
// token from the TokenRequest API, as a pod of that ServiceAccount would.
func (cp *ControlPlane) serviceAccountKubeconfig(t *testing.T, a *Artifacts, namespace, name string) string {
	t.Helper()
	ctx := context.Background()
	expiration := int64((12 * time.Hour).Seconds())
	token, err := cp.Clientset.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiration}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for serviceaccount %s/%s: %v", namespace, name, err)
	}
	path := a.Path(fmt.Sprintf("kubeconfig-%s-%s", namespace, name))
	writeKubeconfig(t, path, cp.admin.Host, cp.admin.CAData, &clientcmdapi.AuthInfo{Token: token.Status.Token})
	return path
}

// adminKubeconfig is the kubeconfig of envtest's admin (system:masters), used as the workload
// cluster's kubeconfig: the Cluster points back at this API server.
func (cp *ControlPlane) adminKubeconfig(t *testing.T) []byte {
	t.Helper()
	config := kubeconfig(cp.admin.Host, cp.admin.CAData, &clientcmdapi.AuthInfo{
		ClientCertificateData: cp.admin.CertData, ClientKeyData: cp.admin.KeyData,
	})
	out, err := clientcmd.Write(*config)
	Must(t, err)
	return out
}

func kubeconfig(server string, ca []byte, auth *clientcmdapi.AuthInfo) *clientcmdapi.Config {
	config := clientcmdapi.NewConfig()
	config.Clusters["test"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	config.AuthInfos["user"] = auth
	config.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "user"}
	config.CurrentContext = "test"
	return config
}

func writeKubeconfig(t *testing.T, path, server string, ca []byte, auth *clientcmdapi.AuthInfo) {
	t.Helper()
	Must(t, clientcmd.WriteToFile(*kubeconfig(server, ca, auth), path))
}

// bindClusterRole grants a ClusterRole to a user or a ServiceAccount ("namespace:name").
func (cp *ControlPlane) bindClusterRole(t *testing.T, role string, subject rbacv1.Subject) {
	t.Helper()
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cluster-test-%s-%s", role, strings.ReplaceAll(subject.Name, ":", "-"))},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{subject},
	}
	Must(t, cp.Client.Create(context.Background(), binding))
}

func (cp *ControlPlane) createNamespace(t *testing.T, name string) {
	t.Helper()
	Must(t, client.IgnoreAlreadyExists(cp.Client.Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})))
}

// CreateAll creates the objects as the admin.
func (cp *ControlPlane) CreateAll(t *testing.T, objects []*unstructured.Unstructured) {
	t.Helper()
	for _, obj := range objects {
		if err := cp.Client.Create(context.Background(), obj); err != nil {
			t.Fatalf("create %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
}

func ReadObjects(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var objects []*unstructured.Unstructured
	for _, doc := range bytes.Split(data, []byte("\n---")) {
		var obj map[string]any
		Must(t, yaml.Unmarshal(doc, &obj))
		if len(obj) == 0 {
			continue
		}
		objects = append(objects, &unstructured.Unstructured{Object: obj})
	}
	return objects
}

// Kubectl runs the kubectl build.sh made, with a person's kubeconfig.
type Kubectl struct {
	Bin        string
	Kubeconfig string
	// dir is where kubectl runs: the artifacts folder, so that files are named as a person
	// names them (kubectl prints the name in its errors).
	Dir string
}

// KubectlCacheEnv gives kubectl a discovery cache of the kubeconfig's own (KUBECACHEDIR). The
// default, ~/.kube/cache/discovery/<host_port>, is shared by every cluster the tests start, and
// one on a port an earlier cluster used (each run is a network namespace of its own) read that
// cluster's API versions: a CAPI v1.10 cluster's KubeadmConfig asked for as v1beta2, a 404.
func KubectlCacheEnv(kubeconfig string) string {
	return "KUBECACHEDIR=" + kubeconfig + ".kubectl-cache"
}

type KubectlResult struct {
	Stdout, Stderr string
	Err            error
}

func (k Kubectl) Run(t *testing.T, args ...string) KubectlResult {
	t.Helper()
	cmd := exec.Command(k.Bin, append([]string{"--kubeconfig", k.Kubeconfig}, args...)...)
	cmd.Dir = k.Dir
	cmd.Env = append(os.Environ(), KubectlCacheEnv(k.Kubeconfig))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("kubectl %s\n  stdout: %s\n  stderr: %s", strings.Join(args, " "), strings.TrimSpace(stdout.String()), strings.TrimSpace(stderr.String()))
	return KubectlResult{Stdout: stdout.String(), Stderr: stderr.String(), Err: err}
}

// Process is a server the test started; it is stopped by t.Cleanup, or earlier by stop.
type Process struct {
	name string
	Cmd  *exec.Cmd
	done chan struct{}
	Log  string
}

func StartProcess(t *testing.T, a *Artifacts, name, bin string, args []string, env ...string) *Process {
	t.Helper()
	logFile := a.create(t, name+".log")
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	fmt.Fprintf(logFile, "# %s %s\n", bin, strings.Join(args, " "))
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &Process{name: name, Cmd: cmd, done: make(chan struct{}), Log: a.Path(name + ".log")}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(p.stop)
	return p
}

func (p *Process) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// logTail is the end of the process's log, for a failure message: CI keeps the test's output,
// not the files beside it.
func (p *Process) logTail() string {
	data, err := os.ReadFile(p.Log)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > logTailLines {
		lines = lines[len(lines)-logTailLines:]
	}
	return "; its log ends:\n\t" + strings.Join(lines, "\n\t")
}

const logTailLines = 15

func (p *Process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// WaitHTTP polls url until it answers 200, failing early when the process exits.
func WaitHTTP(t *testing.T, p *Process, url string, timeout time.Duration, httpClient *http.Client) {
	t.Helper()
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if p.exited() {
			t.Fatalf("%s exited before it was ready (log: %s)%s", p.name, p.Log, p.logTail())
		}
		resp, err := httpClient.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("%s not ready at %s after %s (log: %s)%s", p.name, url, timeout, p.Log, p.logTail())
}

// Certificates: one CA the test makes, and serving certificates for 127.0.0.1 signed by it,
// for the managers' webhook servers and the policy server.
type Certificates struct {
	CAPEM []byte
	ca    *x509.Certificate
	key   *ecdsa.PrivateKey
}

func NewCA(t *testing.T) *Certificates {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Must(t, err)
	template := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "cluster-test-webhook-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	Must(t, err)
	ca, err := x509.ParseCertificate(der)
	Must(t, err)
	return &Certificates{CAPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), ca: ca, key: key}
}

// keyPEM is the CA's private key, for a Cluster's CA Secret.
func (c *Certificates) keyPEM(t *testing.T) []byte {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(c.key)
	Must(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}

// serving writes tls.crt and tls.key for 127.0.0.1 and localhost into dir.
func (c *Certificates) serving(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Must(t, err)
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	Must(t, err)
	template := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, c.ca, &key.PublicKey, c.key)
	Must(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	Must(t, err)
	Must(t, os.MkdirAll(dir, 0o755))
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	Must(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	Must(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	return certFile, keyFile
}

// Artifacts is the folder every process log, the audit log and the kubeconfigs go to; it is
// kept after the run (target/cluster-test/ unless CLUSTER_TEST_ARTIFACTS says otherwise).
type Artifacts struct{ Dir string }

func NewArtifacts(t *testing.T) *Artifacts {
	t.Helper()
	dir := os.Getenv("CLUSTER_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "target", "cluster-test")
	}
	dir, err := filepath.Abs(dir)
	Must(t, err)
	Must(t, os.RemoveAll(dir))
	Must(t, os.MkdirAll(dir, 0o755))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs of every process, the audit log and the kubeconfigs are kept in %s", dir)
		}
	})
	return &Artifacts{Dir: dir}
}

func (a *Artifacts) Path(name string) string { return filepath.Join(a.Dir, name) }

// Sub is a folder of its own, for a second cluster's logs.
func (a *Artifacts) Sub(t *testing.T, name string) *Artifacts {
	t.Helper()
	dir := a.Path(name)
	Must(t, os.MkdirAll(dir, 0o755))
	return &Artifacts{Dir: dir}
}

func (a *Artifacts) create(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.Create(a.Path(name))
	Must(t, err)
	t.Cleanup(func() { f.Close() })
	return f
}

func splitHostPort(t *testing.T, hostPort string) (string, int) {
	t.Helper()
	host, port, err := net.SplitHostPort(hostPort)
	Must(t, err)
	var n int
	_, err = fmt.Sscan(port, &n)
	Must(t, err)
	return host, n
}

func Must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// ArtifactsForTest is NewArtifacts' folder for this test alone, <artifacts>/<test name>: `make
// cluster-test` runs it after TestCluster, whose logs stay in <artifacts>.
func ArtifactsForTest(t *testing.T) *Artifacts {
	t.Helper()
	base := os.Getenv("CLUSTER_TEST_ARTIFACTS")
	if base == "" {
		base = filepath.Join("..", "target", "cluster-test")
	}
	t.Setenv("CLUSTER_TEST_ARTIFACTS", filepath.Join(base, t.Name()))
	return NewArtifacts(t)
}
