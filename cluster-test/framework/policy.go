package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// ClusterAdmissionPolicy is what the test reads of policy.yaml.
type ClusterAdmissionPolicy struct {
	Metadata metav1.ObjectMeta `json:"metadata"`
	Spec     struct {
		Module                string                                       `json:"module"`
		Mode                  string                                       `json:"mode"`
		Rules                 []admissionregistrationv1.RuleWithOperations `json:"rules"`
		FailurePolicy         *admissionregistrationv1.FailurePolicyType   `json:"failurePolicy"`
		MatchPolicy           *admissionregistrationv1.MatchPolicyType     `json:"matchPolicy"`
		MatchConditions       []admissionregistrationv1.MatchCondition     `json:"matchConditions"`
		TimeoutSeconds        *int32                                       `json:"timeoutSeconds"`
		ObjectSelector        *metav1.LabelSelector                        `json:"objectSelector"`
		NamespaceSelector     *metav1.LabelSelector                        `json:"namespaceSelector"`
		Settings              map[string]any                               `json:"settings"`
		ContextAwareResources []map[string]string                          `json:"contextAwareResources"`
	} `json:"spec"`
}

func ReadPolicy(t *testing.T) *ClusterAdmissionPolicy {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "policy.yaml"))
	Must(t, err)
	policy := &ClusterAdmissionPolicy{}
	Must(t, yaml.Unmarshal(data, policy))
	return policy
}

// PolicyID is the id kubewarden-controller gives a ClusterAdmissionPolicy, in policies.yml,
// the webhook's path and the ValidatingWebhookConfiguration's name.
func (p *ClusterAdmissionPolicy) PolicyID() string { return "clusterwide-" + p.Metadata.Name }

// KubewardenNamespace is where Kubewarden runs; the controller keeps it out of every webhook.
const KubewardenNamespace = "kubewarden"

// WebhookConfiguration is the ValidatingWebhookConfiguration kubewarden-controller writes for
// the ClusterAdmissionPolicy, with a URL instead of the policy-server's Service.
func (p *ClusterAdmissionPolicy) WebhookConfiguration(url string, ca []byte) *admissionregistrationv1.ValidatingWebhookConfiguration {
	sideEffects := admissionregistrationv1.SideEffectClassNone
	matchPolicy := admissionregistrationv1.Equivalent
	if p.Spec.MatchPolicy != nil {
		matchPolicy = *p.Spec.MatchPolicy
	}
	namespaceSelector := &metav1.LabelSelector{}
	if p.Spec.NamespaceSelector != nil {
		namespaceSelector = p.Spec.NamespaceSelector.DeepCopy()
	}
	namespaceSelector.MatchExpressions = append(namespaceSelector.MatchExpressions, metav1.LabelSelectorRequirement{
		Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: []string{KubewardenNamespace},
	})
	path := "/validate/" + p.PolicyID()
	endpoint := url + path
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: p.PolicyID()},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    p.PolicyID() + ".kubewarden.admission",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &endpoint, CABundle: ca},
			Rules:                   p.Spec.Rules,
			FailurePolicy:           p.Spec.FailurePolicy,
			MatchPolicy:             &matchPolicy,
			NamespaceSelector:       namespaceSelector,
			ObjectSelector:          p.Spec.ObjectSelector,
			SideEffects:             &sideEffects,
			TimeoutSeconds:          p.Spec.TimeoutSeconds,
			AdmissionReviewVersions: []string{"v1"},
			MatchConditions:         p.Spec.MatchConditions,
		}},
	}
}

// PolicyServer is the server behind the webhook: Kubewarden's policy-server when
// POLICY_SERVER names one, `policy-host serve` otherwise, on the same command line.
type PolicyServer struct {
	policy    *ClusterAdmissionPolicy
	Bin       string
	Args      []string
	Port      int
	readiness int
	certFile  string
	keyFile   string
	module    string
	// kubeconfig of the policy-server's ServiceAccount, for the context-aware lookups.
	Kubeconfig string
	Process    *Process
	starts     int
	// root is the whole test: a server started in a step outlives the step.
	root *testing.T
}

func NewPolicyServer(t *testing.T, a *Artifacts, certs *Certificates, policy *ClusterAdmissionPolicy, kubeconfig string) *PolicyServer {
	t.Helper()
	module := os.Getenv("ANNOTATED_POLICY")
	if module == "" {
		module = filepath.Join("..", "annotated-policy.wasm")
	}
	module, err := filepath.Abs(module)
	Must(t, err)
	if _, err := os.Stat(module); err != nil {
		t.Fatalf("no annotated policy module (make annotated-policy.wasm, or ANNOTATED_POLICY=): %v", err)
	}
	s := &PolicyServer{root: t, policy: policy, Port: FreePort(t), readiness: FreePort(t), module: module, Kubeconfig: kubeconfig}
	if bin := os.Getenv("POLICY_SERVER"); bin != "" {
		s.Bin = bin
	} else {
		s.Bin, s.Args = PolicyHostBinary(t), []string{"serve"}
	}
	if _, err := os.Stat(s.Bin); err != nil {
		t.Fatalf("no policy server at %s (make host, or POLICY_SERVER=/path/to/policy-server): %v", s.Bin, err)
	}
	s.certFile, s.keyFile = certs.serving(t, a.Path("policy-server-certs"))
	return s
}

func (s *PolicyServer) url() string { return fmt.Sprintf("https://127.0.0.1:%d", s.Port) }

// Start writes policies.yml with policy.yaml's settings, changed by overrides, in mode
// protect, and starts the server; it returns once the server is ready.
func (s *PolicyServer) Start(a *Artifacts, overrides map[string]any) {
	t := s.root
	t.Helper()
	settings := map[string]any{}
	for k, v := range s.policy.Spec.Settings {
		settings[k] = v
	}
	for k, v := range overrides {
		settings[k] = v
	}
	s.starts++
	policies := map[string]any{
		s.policy.PolicyID(): map[string]any{
			"module":                "file://" + s.module,
			"policyMode":            "protect",
			"allowedToMutate":       false,
			"settings":              settings,
			"contextAwareResources": s.policy.Spec.ContextAwareResources,
			// kubewarden-controller grants a ClusterAdmissionPolicy every host capability;
			// since Kubewarden 1.35 a policy-server denies those policies.yml does not list.
			"hostCapabilities": []string{"*"},
		},
	}
	out, err := yaml.Marshal(policies)
	Must(t, err)
	policiesFile := a.Path(fmt.Sprintf("policies-%d.yml", s.starts))
	Must(t, os.WriteFile(policiesFile, out, 0o644))
	downloads := a.Path("policy-downloads")
	Must(t, os.MkdirAll(downloads, 0o755))
	args := append(append([]string{}, s.Args...),
		"--policies", policiesFile,
		"--policies-download-dir", downloads,
		"--addr", "127.0.0.1",
		"--port", fmt.Sprint(s.Port),
		"--readiness-probe-port", fmt.Sprint(s.readiness),
		"--cert-file", s.certFile,
		"--key-file", s.keyFile,
	)
	// policy-server caches sigstore data in ./sigstore-data unless told otherwise: the test's
	// artifacts, not the checkout (policy-host ignores the variable).
	s.Process = StartProcess(t, a, fmt.Sprintf("policy-server-%d", s.starts), s.Bin, args,
		"KUBECONFIG="+s.Kubeconfig, "KUBEWARDEN_SIGSTORE_CACHE_DIR="+a.Path("sigstore-data"))
	s.waitReady(t)
}

func (s *PolicyServer) Stop() { s.Process.stop() }

// waitReady polls the readiness endpoint, which policy-server serves over plain HTTP.
func (s *PolicyServer) waitReady(t *testing.T) {
	t.Helper()
	WaitHTTP(t, s.Process, fmt.Sprintf("http://127.0.0.1:%d/readiness", s.readiness), 3*time.Minute, nil)
}

// LookupsRBAC is the ClusterRole and binding the README documents for context-aware mode.
func LookupsRBAC(t *testing.T) []byte {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	Must(t, err)
	block := regexp.MustCompile("(?s)```yaml\n(apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n.*?)```").FindSubmatch(readme)
	if block == nil {
		t.Fatal("README.md has no ClusterRole block for the context-aware lookups")
	}
	return block[1]
}

func RegisterWebhook(t *testing.T, cp *ControlPlane, policy *ClusterAdmissionPolicy, s *PolicyServer, ca []byte) {
	t.Helper()
	vwc := policy.WebhookConfiguration(s.url(), ca)
	out, err := json.MarshalIndent(vwc, "", "  ")
	Must(t, err)
	t.Logf("ValidatingWebhookConfiguration from policy.yaml:\n%s", out)
	Must(t, cp.Client.Create(context.Background(), vwc))
}

// Hang listens on the policy server's port and holds every connection without a byte in
// reply, until the returned function is called (or the test ends).
func Hang(t *testing.T, port int) func() {
	t.Helper()
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	Must(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
		}
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			l.Close()
			mu.Lock()
			defer mu.Unlock()
			for _, conn := range conns {
				conn.Close()
			}
		})
	}
	t.Cleanup(stop)
	return stop
}
