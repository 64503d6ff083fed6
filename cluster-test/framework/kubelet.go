package framework

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
)

// Node stands in for a kubelet and the scheduler, for Kubewarden's Pods only: no container
// runtime, no kubelet and no scheduler run in the cluster test. It registers a Node (its Lease
// renewed, as a kubelet heartbeats, so that kube-controller-manager's node lifecycle controller
// neither taints it nor evicts its Pods), binds the Pods of the namespace it serves whose image
// it has a binary for (those of Kubewarden's own images: the controller's, and each
// policy-server Pod the controller's PolicyServer Deployment makes) to it, as the scheduler
// does, and runs them, as the kubelet does:
//
//   - the real binary for the container's image, with the container's command (its first word
//     replaced by the binary) and args, and the container's env;
//   - the Pod's volumes written under a folder of the test that stands for the Pod's root
//     filesystem: Secrets, ConfigMaps, emptyDirs and the projected service-account token (a
//     TokenRequest bound to the Pod, as the kubelet asks for it), each at its mountPath; an env
//     value that is an absolute path is rewritten into that folder, TMPDIR is its /tmp, and
//     KUBECONFIG a kubeconfig with the Pod's token (in-cluster config would reach the
//     `kubernetes` Service's ClusterIP, which no kube-proxy routes);
//   - an IP of the test's own network namespace (run.sh's CLUSTER_TEST_POD_NETWORK, never
//     127.0.0.0/8, which EndpointSlices refuse), the stand-in for the Pod's own network
//     namespace: the process listens on it (see podListenFlags), kube-apiserver reaches it
//     through the Service's EndpointSlice that kube-controller-manager writes;
//   - the Pod's status: phase Running, its IP, containerStatuses, and Ready as the container's
//     readinessProbe (an httpGet, probed as the kubelet probes it) answers; the process
//     restarted when it exits (restartPolicy Always);
//   - on the Pod's deletion the process is stopped (SIGTERM, then SIGKILL after the grace
//     period) and the Pod deleted for good (grace period 0), as the kubelet confirms a deletion.
//
// It never answers an admission request: the processes it runs do.
type Node struct {
	root      *testing.T
	a         *Artifacts
	cp        *ControlPlane
	name      string
	namespace string
	// binaries: an image's repository name (its last path element, no tag) -> the binary.
	binaries map[string]string
	network  netip.Prefix
	nodeIP   netip.Addr
	log      *os.File

	mu     sync.Mutex
	nextIP netip.Addr
	pods   map[types.UID]*runningPod
	// services: the stand-in for cluster DNS and kube-proxy, by Service name.
	services map[string]*serviceProxy
	done     chan struct{}
	wg       sync.WaitGroup
}

// runningPod is a Pod the node runs.
type runningPod struct {
	name, ip, dir string
	uid           types.UID
	container     corev1.Container
	bin           string
	args, env     []string
	process       *Process
	restarts      int32
	ready         bool
	started       metav1.Time
	// exitedAt: when the process was last seen exited, for the restart's back-off.
	exitedAt time.Time
	// restartPolicy is the Pod's; finished is set once a Pod that is not restarted has exited.
	restartPolicy corev1.RestartPolicy
	finished      bool
	// hosts is the Pod's /etc/hosts (the Services stand-in), bind-mounted in its mount namespace.
	hosts string
}

// podListenFlags: what each image's process is told so that it listens on its Pod's IP, as it
// would in a network namespace of its own (otherwise the controller's probe port, 8081, and
// every policy-server replica's ports would collide). The controller's webhook server has no
// flag for its host and listens on every address, at 9443, as in its Pod. The controller runs
// without leader election: outside a Pod controller-runtime cannot tell the Lease's namespace
// (it reads it from the in-cluster service-account folder), as for CAPI's managers.
var podListenFlags = map[string]func(ip string) (args, env []string){
	"kubewarden-controller": func(ip string) ([]string, []string) {
		return []string{"--health-probe-bind-address=" + ip + ":8081", "--metrics-bind-address=" + ip + ":8088", "--leader-elect=false"}, nil
	},
	"policy-server": func(ip string) ([]string, []string) {
		return nil, []string{"KUBEWARDEN_BIND_ADDRESS=" + ip}
	},
}

// StartNode registers the node and runs the Pods of namespace it has binaries for, until the
// test ends.
func StartNode(t *testing.T, a *Artifacts, cp *ControlPlane, namespace string, binaries map[string]string) *Node {
	t.Helper()
	network := os.Getenv("CLUSTER_TEST_POD_NETWORK")
	if network == "" {
		t.Fatal("CLUSTER_TEST_POD_NETWORK is not set: run.sh gives the test's network namespace the Pods' addresses (run the test with run.sh)")
	}
	prefix, err := netip.ParsePrefix(network)
	Must(t, err)
	n := &Node{
		root: t, a: a, cp: cp, name: "cluster-test-node", namespace: namespace, binaries: binaries,
		network: prefix.Masked(), log: a.create(t, "node.log"),
		pods: map[types.UID]*runningPod{}, services: map[string]*serviceProxy{}, done: make(chan struct{}),
	}
	n.nodeIP = n.network.Addr().Next()
	n.nextIP = n.nodeIP.Next()
	n.register(t)
	n.wg.Add(1)
	go n.run()
	t.Cleanup(func() {
		close(n.done)
		n.wg.Wait()
		n.mu.Lock()
		defer n.mu.Unlock()
		for _, p := range n.pods {
			p.process.stop()
		}
		for _, svc := range n.services {
			for _, l := range svc.listeners {
				l.Close()
			}
		}
	})
	return n
}

func (n *Node) logf(format string, args ...any) {
	fmt.Fprintf(n.log, "%s %s\n", time.Now().UTC().Format(time.RFC3339Nano), fmt.Sprintf(format, args...))
}

// register creates the Node, Ready, and its Lease, as a kubelet registers itself.
func (n *Node) register(t *testing.T) {
	t.Helper()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: map[string]string{
			corev1.LabelHostname: n.name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64",
		}},
		Spec: corev1.NodeSpec{PodCIDR: n.network.String(), PodCIDRs: []string{n.network.String()}},
	}
	Must(t, registerNode(context.Background(), n.cp.Clientset, node, n.nodeIP.String()))
}

// registerNode creates the Node, Ready at the address given, and its Lease, as a kubelet
// registers itself (the kubelet stand-in's node, and each instance of the infrastructure
// stand-in, infrastructure.go).
func registerNode(ctx context.Context, cs kubernetes.Interface, node *corev1.Node, ip string) error {
	if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return err
	}
	// kube-controller-manager's node controllers write the new Node too (taints, the lifecycle
	// controller's view): a 409 here is theirs, retried on the Node as it now is.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		current, err := cs.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		current.Status = readyStatus(node.Name, ip)
		_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, current, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return err
	}
	_, err = cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: node.Name, Namespace: corev1.NamespaceNodeLease},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To(node.Name), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &metav1.MicroTime{Time: time.Now()},
		},
	}, metav1.CreateOptions{})
	return err
}

// readyStatus is a Node's status as the stand-in reports it: Ready, its addresses and capacity.
func readyStatus(name, ip string) corev1.NodeStatus {
	now := metav1.Now()
	status := corev1.NodeStatus{
		Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "the cluster test's kubelet stand-in", LastHeartbeatTime: now, LastTransitionTime: now,
		}},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}, {Type: corev1.NodeHostName, Address: name}},
		Capacity:  corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi")},
		NodeInfo:  corev1.NodeSystemInfo{OperatingSystem: "linux", Architecture: "amd64", KubeletVersion: "v1.34.3"},
	}
	// What a kubelet reports beside Ready (CAPI's Machine NodeHealthy waits for all four).
	for _, c := range []struct {
		t      corev1.NodeConditionType
		reason string
	}{{corev1.NodeMemoryPressure, "KubeletHasSufficientMemory"}, {corev1.NodeDiskPressure, "KubeletHasNoDiskPressure"}, {corev1.NodePIDPressure, "KubeletHasSufficientPID"}} {
		status.Conditions = append(status.Conditions, corev1.NodeCondition{
			Type: c.t, Status: corev1.ConditionFalse, Reason: c.reason, LastHeartbeatTime: now, LastTransitionTime: now,
		})
	}
	status.Allocatable = status.Capacity
	return status
}

// run is the node's loop: the Lease renewed every 10 s, the Pods synced every 250 ms.
func (n *Node) run() {
	defer n.wg.Done()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	renewed := time.Now()
	for {
		select {
		case <-n.done:
			return
		case <-tick.C:
		}
		ctx := context.Background()
		if time.Since(renewed) > 10*time.Second {
			if err := n.renewLease(ctx); err != nil {
				n.logf("renew lease: %v", err)
			} else {
				renewed = time.Now()
			}
		}
		if err := n.sync(ctx); err != nil {
			n.logf("sync: %v", err)
		}
	}
}

func (n *Node) renewLease(ctx context.Context) error { return renewLease(ctx, n.cp.Clientset, n.name) }

// renewLease renews a Node's Lease, as a kubelet heartbeats.
func renewLease(ctx context.Context, cs kubernetes.Interface, name string) error {
	leases := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	lease, err := leases.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	return err
}

// image is the repository name of an image reference: ghcr.io/kubewarden/policy-server:v1.35.0
// is policy-server.
func image(ref string) string {
	ref = path.Base(ref)
	if i := strings.IndexAny(ref, ":@"); i >= 0 {
		ref = ref[:i]
	}
	return ref
}

// ours: the binary for a Pod's single container, or "".
func (n *Node) ours(pod *corev1.Pod) string {
	if len(pod.Spec.Containers) != 1 || len(pod.Spec.InitContainers) > 0 {
		return ""
	}
	return n.binaries[image(pod.Spec.Containers[0].Image)]
}

func (n *Node) sync(ctx context.Context) error {
	pods, err := n.cp.Clientset.CoreV1().Pods(n.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	seen := map[types.UID]bool{}
	for i := range pods.Items {
		pod := &pods.Items[i]
		seen[pod.UID] = true
		bin := n.ours(pod)
		if bin == "" {
			continue
		}
		running := n.pods[pod.UID]
		switch {
		case pod.DeletionTimestamp != nil:
			n.terminate(ctx, pod, running)
		case pod.Spec.NodeName == "":
			n.bind(ctx, pod)
		case pod.Spec.NodeName != n.name:
		case running == nil:
			if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
				continue
			}
			p, err := n.start(ctx, pod, bin)
			if err != nil {
				n.logf("start pod %s: %v", pod.Name, err)
				n.root.Errorf("the kubelet stand-in cannot run Pod %s/%s: %v", pod.Namespace, pod.Name, err)
				continue
			}
			n.pods[pod.UID] = p
			n.updateStatus(ctx, pod, p)
		default:
			n.check(ctx, pod, running)
		}
	}
	// Pods deleted for good (by someone else than the node): stop their processes.
	for uid, p := range n.pods {
		if !seen[uid] {
			n.logf("pod %s is gone: stopping its process", p.name)
			p.process.stop()
			delete(n.pods, uid)
		}
	}
	return nil
}

// bind is the scheduler's part: the Pod goes to the node.
func (n *Node) bind(ctx context.Context, pod *corev1.Pod) {
	err := n.cp.Clientset.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: n.name},
	}, metav1.CreateOptions{})
	if err != nil {
		n.logf("bind pod %s: %v", pod.Name, err)
		return
	}
	n.logf("bound pod %s to %s", pod.Name, n.name)
}

// start prepares the Pod's folder, volumes and env and starts its container's process.
func (n *Node) start(ctx context.Context, pod *corev1.Pod, bin string) (*runningPod, error) {
	ip, err := n.allocateIP()
	if err != nil {
		return nil, err
	}
	c := pod.Spec.Containers[0]
	p := &runningPod{
		name: pod.Name, uid: pod.UID, ip: ip.String(), container: c, bin: bin,
		dir: n.a.Path(filepath.Join("pods", pod.Name)), started: metav1.Now(), restartPolicy: pod.Spec.RestartPolicy,
	}
	for _, sub := range []string{"tmp", "home"} {
		if err := os.MkdirAll(filepath.Join(p.dir, sub), 0o755); err != nil {
			return nil, err
		}
	}
	token, err := n.writeVolumes(ctx, pod, c, p.dir)
	if err != nil {
		return nil, err
	}
	if token == "" {
		if token, err = n.podToken(ctx, pod, nil); err != nil {
			return nil, err
		}
	}
	kubeconfig := filepath.Join(p.dir, "kubeconfig")
	writeKubeconfig(n.root, kubeconfig, n.cp.admin.Host, n.cp.admin.CAData, &clientcmdapi.AuthInfo{Token: token})

	// The command: the image's entrypoint is the binary; an absolute path (a mounted file's) is
	// rewritten into the Pod's folder.
	args := append(slices.Clone(c.Command), c.Args...)
	if len(c.Command) > 0 {
		args = args[1:]
	}
	for i, arg := range args {
		if strings.HasPrefix(arg, "/") {
			args[i] = filepath.Join(p.dir, arg)
		} else if flag, value, ok := strings.Cut(arg, "="); ok && strings.HasPrefix(flag, "-") && strings.HasPrefix(value, "/") {
			args[i] = flag + "=" + filepath.Join(p.dir, value)
		}
	}
	if p.hosts, err = n.writeHosts(ctx, pod, p); err != nil {
		return nil, err
	}
	env := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Join(p.dir, "home"), "TMPDIR=" + filepath.Join(p.dir, "tmp"),
		"KUBECONFIG=" + kubeconfig, "HOSTNAME=" + pod.Name,
	}
	for _, e := range c.Env {
		value, err := n.envValue(pod, p, e)
		if err != nil {
			return nil, err
		}
		env = append(env, e.Name+"="+value)
	}
	if listen := podListenFlags[image(c.Image)]; listen != nil {
		extraArgs, extraEnv := listen(p.ip)
		args = append(args, extraArgs...)
		env = append(env, extraEnv...)
	}
	p.args, p.env = args, env
	if err := n.run1(p); err != nil {
		return nil, err
	}
	return p, nil
}

// run1 starts (or restarts) the Pod's process, its log in pod-<name>[-<restart>].log.
func (n *Node) run1(p *runningPod) error {
	name := "pod-" + p.name
	if p.restarts > 0 {
		name = fmt.Sprintf("%s-%d", name, p.restarts)
	}
	logFile, err := os.Create(n.a.Path(name + ".log"))
	if err != nil {
		return err
	}
	// The Pod's /etc/hosts in a mount namespace of its own (the Services stand-in).
	cmd := exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "sh", "-c",
		`mount --bind "$0" /etc/hosts && exec "$@"`, p.hosts, p.bin}, p.args...)...)
	cmd.Dir = p.dir
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	fmt.Fprintf(logFile, "# pod %s, IP %s\n# env: %s\n# %s %s\n", p.name, p.ip, strings.Join(p.env, " "), p.bin, strings.Join(p.args, " "))
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return err
	}
	proc := &Process{name: name, Cmd: cmd, done: make(chan struct{}), Log: n.a.Path(name + ".log")}
	go func() { _ = cmd.Wait(); logFile.Close(); close(proc.done) }()
	p.process = proc
	n.logf("started pod %s (IP %s): %s %s", p.name, p.ip, p.bin, strings.Join(p.args, " "))
	return nil
}

func (n *Node) allocateIP() (netip.Addr, error) {
	ip := n.nextIP
	if !n.network.Contains(ip) {
		return netip.Addr{}, fmt.Errorf("no address left in %s", n.network)
	}
	n.nextIP = ip.Next()
	return ip, nil
}

// check restarts an exited process and keeps the Pod's Ready condition as the probe answers.
func (n *Node) check(ctx context.Context, pod *corev1.Pod, p *runningPod) {
	if p.finished {
		return
	}
	if p.process.exited() && !p.restarted() {
		p.finished, p.ready = true, false
		n.logf("pod %s: process exited (%v), restartPolicy %s: not restarted", p.name, p.process.Cmd.ProcessState, p.restartPolicy)
		n.updateStatus(ctx, pod, p)
		return
	}
	if p.process.exited() {
		if p.ready {
			p.ready = false
			n.updateStatus(ctx, pod, p)
		}
		// The kubelet's back-off, shorter: 1 s doubling up to 30 s (the kubelet's: 10 s to 5 min).
		backoff := min(time.Second<<min(p.restarts, 5), 30*time.Second)
		if p.exitedAt.IsZero() {
			p.exitedAt = time.Now()
			n.logf("pod %s: process exited (%v), restarting in %s", p.name, p.process.Cmd.ProcessState, backoff)
		}
		if time.Since(p.exitedAt) < backoff {
			return
		}
		p.exitedAt = time.Time{}
		p.restarts++
		if err := n.run1(p); err != nil {
			n.logf("restart pod %s: %v", p.name, err)
		}
		n.updateStatus(ctx, pod, p)
		return
	}
	ready := n.probe(p)
	if ready != p.ready || podReady(pod) != ready || pod.Status.PodIP != p.ip {
		p.ready = ready
		n.updateStatus(ctx, pod, p)
	}
}

// restarted: whether the kubelet restarts the exited container, by the Pod's restartPolicy.
func (p *runningPod) restarted() bool {
	switch p.restartPolicy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return p.process.Cmd.ProcessState.ExitCode() != 0
	}
	return true
}

// probe runs the container's readinessProbe (httpGet), as the kubelet does; none: ready.
func (n *Node) probe(p *runningPod) bool {
	probe := p.container.ReadinessProbe
	if probe == nil || probe.HTTPGet == nil {
		return true
	}
	port := probe.HTTPGet.Port.IntValue()
	if port == 0 {
		for _, cp := range p.container.Ports {
			if cp.Name == probe.HTTPGet.Port.String() {
				port = int(cp.ContainerPort)
			}
		}
	}
	scheme := strings.ToLower(string(probe.HTTPGet.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	client := &http.Client{Timeout: time.Second, Transport: insecureTransport}
	resp, err := client.Get(fmt.Sprintf("%s://%s:%d%s", scheme, p.ip, port, probe.HTTPGet.Path))
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 400
}

// insecureTransport: the kubelet does not verify a probe's certificate.
var insecureTransport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// updateStatus writes the Pod's status as the kubelet reports it.
func (n *Node) updateStatus(ctx context.Context, pod *corev1.Pod, p *runningPod) {
	status := corev1.ConditionFalse
	if p.ready {
		status = corev1.ConditionTrue
	}
	now := metav1.Now()
	condition := func(t corev1.PodConditionType, s corev1.ConditionStatus) corev1.PodCondition {
		for _, c := range pod.Status.Conditions {
			if c.Type == t && c.Status == s {
				return c
			}
		}
		return corev1.PodCondition{Type: t, Status: s, LastTransitionTime: now}
	}
	updated := pod.DeepCopy()
	updated.Status.Phase = corev1.PodRunning
	state := corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: p.started}}
	if p.finished {
		code := int32(p.process.Cmd.ProcessState.ExitCode())
		reason := "Completed"
		updated.Status.Phase = corev1.PodSucceeded
		if code != 0 {
			updated.Status.Phase, reason = corev1.PodFailed, "Error"
		}
		state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, StartedAt: p.started, FinishedAt: now}}
	}
	updated.Status.HostIP = n.nodeIP.String()
	updated.Status.HostIPs = []corev1.HostIP{{IP: n.nodeIP.String()}}
	updated.Status.PodIP = p.ip
	updated.Status.PodIPs = []corev1.PodIP{{IP: p.ip}}
	updated.Status.StartTime = &p.started
	updated.Status.Conditions = []corev1.PodCondition{
		condition(corev1.PodReadyToStartContainers, corev1.ConditionTrue),
		condition(corev1.PodInitialized, corev1.ConditionTrue),
		condition(corev1.ContainersReady, status),
		condition(corev1.PodReady, status),
		condition(corev1.PodScheduled, corev1.ConditionTrue),
	}
	updated.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: p.container.Name, Image: p.container.Image, ImageID: p.container.Image, Ready: p.ready,
		Started: ptr.To(!p.finished), RestartCount: p.restarts, State: state,
	}}
	if _, err := n.cp.Clientset.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		n.logf("update status of pod %s: %v", pod.Name, err)
		return
	}
	n.logf("pod %s: Running, IP %s, ready %t, restarts %d", pod.Name, p.ip, p.ready, p.restarts)
}

// terminate stops a deleted Pod's process within its grace period and deletes the Pod for good.
func (n *Node) terminate(ctx context.Context, pod *corev1.Pod, p *runningPod) {
	if p != nil {
		n.logf("pod %s deleted: stopping its process", pod.Name)
		p.process.stop()
		delete(n.pods, pod.UID)
	}
	err := n.cp.Clientset.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &pod.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) {
		n.logf("delete pod %s: %v", pod.Name, err)
	}
}

// envValue is an env var's value in the Pod: an absolute path rewritten into the Pod's folder.
func (n *Node) envValue(pod *corev1.Pod, p *runningPod, e corev1.EnvVar) (string, error) {
	if e.ValueFrom == nil {
		if strings.HasPrefix(e.Value, "/") {
			return filepath.Join(p.dir, e.Value), nil
		}
		return e.Value, nil
	}
	if f := e.ValueFrom.FieldRef; f != nil {
		switch f.FieldPath {
		case "metadata.name":
			return pod.Name, nil
		case "metadata.namespace":
			return pod.Namespace, nil
		case "status.podIP":
			return p.ip, nil
		case "spec.nodeName":
			return n.name, nil
		case "spec.serviceAccountName":
			return pod.Spec.ServiceAccountName, nil
		}
	}
	return "", fmt.Errorf("env %s: the kubelet stand-in supports values and fieldRefs to name, namespace, podIP, nodeName and serviceAccountName only", e.Name)
}

// serviceProxy stands in for cluster DNS and kube-proxy for one Service of the node's
// namespace: an address of the pod network (its ClusterIP here), named in every Pod's
// /etc/hosts as `<service>.<namespace>.svc[.cluster.local]`, and a proxy on it for each of the
// Service's ports to a ready endpoint of its EndpointSlices (kube-controller-manager's), as
// kube-proxy forwards a ClusterIP's connections.
type serviceProxy struct {
	ip        string
	listeners []net.Listener
}

// writeHosts writes the Pod's hosts file, starting a proxy for each Service not proxied yet.
func (n *Node) writeHosts(ctx context.Context, pod *corev1.Pod, p *runningPod) (string, error) {
	services, err := n.cp.Clientset.CoreV1().Services(pod.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	hosts := fmt.Sprintf("127.0.0.1\tlocalhost\n%s\t%s\n", p.ip, pod.Name)
	for _, svc := range services.Items {
		proxy := n.services[svc.Name]
		if proxy == nil {
			if proxy, err = n.proxyService(svc); err != nil {
				return "", err
			}
			n.services[svc.Name] = proxy
		}
		name := svc.Name + "." + svc.Namespace
		hosts += fmt.Sprintf("%s\t%s.svc.cluster.local %s.svc %s %s\n", proxy.ip, name, name, name, svc.Name)
	}
	file := filepath.Join(p.dir, "etc-hosts")
	return file, os.WriteFile(file, []byte(hosts), 0o644)
}

func (n *Node) proxyService(svc corev1.Service) (*serviceProxy, error) {
	ip, err := n.allocateIP()
	if err != nil {
		return nil, err
	}
	proxy := &serviceProxy{ip: ip.String()}
	for _, port := range svc.Spec.Ports {
		l, err := net.Listen("tcp", net.JoinHostPort(proxy.ip, fmt.Sprint(port.Port)))
		if err != nil {
			return nil, err
		}
		proxy.listeners = append(proxy.listeners, l)
		n.logf("service %s/%s port %d: proxied at %s", svc.Namespace, svc.Name, port.Port, l.Addr())
		go n.forward(l, svc.Namespace, svc.Name, port.Name)
	}
	return proxy, nil
}

// forward accepts the connections to a Service's port and copies each to a ready endpoint.
func (n *Node) forward(l net.Listener, namespace, service, portName string) {
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			target, err := n.endpoint(namespace, service, portName)
			if err != nil {
				n.logf("service %s/%s: %v", namespace, service, err)
				return
			}
			upstream, err := net.Dial("tcp", target)
			if err != nil {
				n.logf("service %s/%s: %v", namespace, service, err)
				return
			}
			defer upstream.Close()
			go func() { _, _ = io.Copy(upstream, conn) }()
			_, _ = io.Copy(conn, upstream)
		}()
	}
}

// endpoint is a ready address and port of the Service's EndpointSlices for the port's name.
func (n *Node) endpoint(namespace, service, portName string) (string, error) {
	list, err := n.cp.Clientset.DiscoveryV1().EndpointSlices(namespace).List(context.Background(),
		metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service})
	if err != nil {
		return "", err
	}
	for _, slice := range list.Items {
		for _, port := range slice.Ports {
			name := ""
			if port.Name != nil {
				name = *port.Name
			}
			if port.Port == nil || name != portName {
				continue
			}
			for _, e := range slice.Endpoints {
				if e.Conditions.Ready != nil && *e.Conditions.Ready && len(e.Addresses) > 0 {
					return net.JoinHostPort(e.Addresses[0], fmt.Sprint(*port.Port)), nil
				}
			}
		}
	}
	return "", fmt.Errorf("no ready endpoint for port %q", portName)
}

// writeVolumes writes each volume the container mounts at its mountPath under dir; it returns
// the projected service-account token, if the Pod has one.
func (n *Node) writeVolumes(ctx context.Context, pod *corev1.Pod, c corev1.Container, dir string) (token string, err error) {
	for _, mount := range c.VolumeMounts {
		i := slices.IndexFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == mount.Name })
		if i < 0 {
			return "", fmt.Errorf("volumeMount %s names no volume", mount.Name)
		}
		if mount.SubPath != "" {
			return "", fmt.Errorf("volumeMount %s: subPath is not supported by the kubelet stand-in", mount.Name)
		}
		v := pod.Spec.Volumes[i]
		target := filepath.Join(dir, mount.MountPath)
		if err := os.MkdirAll(target, 0o755); err != nil {
			return "", err
		}
		files := map[string][]byte{}
		switch {
		case v.EmptyDir != nil:
		case v.Secret != nil:
			secret, err := n.cp.Clientset.CoreV1().Secrets(pod.Namespace).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
			if err != nil {
				return "", fmt.Errorf("volume %s: %w", v.Name, err)
			}
			if files, err = keysToPaths(secret.Data, v.Secret.Items); err != nil {
				return "", fmt.Errorf("volume %s: %w", v.Name, err)
			}
		case v.ConfigMap != nil:
			data, err := n.configMapData(ctx, pod.Namespace, v.ConfigMap.Name)
			if err != nil {
				return "", fmt.Errorf("volume %s: %w", v.Name, err)
			}
			if files, err = keysToPaths(data, v.ConfigMap.Items); err != nil {
				return "", fmt.Errorf("volume %s: %w", v.Name, err)
			}
		case v.Projected != nil:
			for _, source := range v.Projected.Sources {
				switch {
				case source.ServiceAccountToken != nil:
					t, err := n.podToken(ctx, pod, source.ServiceAccountToken)
					if err != nil {
						return "", err
					}
					token = t
					files[source.ServiceAccountToken.Path] = []byte(t)
				case source.ConfigMap != nil:
					data, err := n.configMapData(ctx, pod.Namespace, source.ConfigMap.Name)
					if err != nil {
						return "", fmt.Errorf("volume %s: %w", v.Name, err)
					}
					more, err := keysToPaths(data, source.ConfigMap.Items)
					if err != nil {
						return "", fmt.Errorf("volume %s: %w", v.Name, err)
					}
					for k, d := range more {
						files[k] = d
					}
				case source.DownwardAPI != nil:
					for _, item := range source.DownwardAPI.Items {
						if item.FieldRef == nil || item.FieldRef.FieldPath != "metadata.namespace" {
							return "", fmt.Errorf("volume %s: the kubelet stand-in writes only metadata.namespace of the downward API", v.Name)
						}
						files[item.Path] = []byte(pod.Namespace)
					}
				default:
					return "", fmt.Errorf("volume %s: a projected source the kubelet stand-in does not write", v.Name)
				}
			}
		default:
			return "", fmt.Errorf("volume %s: a kind the kubelet stand-in does not write", v.Name)
		}
		for name, data := range files {
			file := filepath.Join(target, name)
			if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
				return "", err
			}
			if err := os.WriteFile(file, data, 0o600); err != nil {
				return "", err
			}
		}
	}
	return token, nil
}

func (n *Node) configMapData(ctx context.Context, namespace, name string) (map[string][]byte, error) {
	cm, err := n.cp.Clientset.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return data, nil
}

// keysToPaths: every key as a file of its name, or only the items, at their paths.
func keysToPaths(data map[string][]byte, items []corev1.KeyToPath) (map[string][]byte, error) {
	files := map[string][]byte{}
	if len(items) == 0 {
		for k, v := range data {
			files[k] = v
		}
		return files, nil
	}
	for _, item := range items {
		v, ok := data[item.Key]
		if !ok {
			return nil, fmt.Errorf("no key %s", item.Key)
		}
		files[item.Path] = v
	}
	return files, nil
}

// podToken is a token of the Pod's ServiceAccount bound to the Pod, as the kubelet requests it.
func (n *Node) podToken(ctx context.Context, pod *corev1.Pod, projection *corev1.ServiceAccountTokenProjection) (string, error) {
	expiration := int64((12 * time.Hour).Seconds())
	spec := authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &expiration,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}
	if projection != nil && projection.Audience != "" {
		spec.Audiences = []string{projection.Audience}
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	token, err := n.cp.Clientset.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("TokenRequest for serviceaccount %s/%s bound to pod %s: %w", pod.Namespace, sa, pod.Name, err)
	}
	return token.Status.Token, nil
}
