package framework

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// Provider is one of CAPI's managers as clusterctl installs it: the objects of its
// config/default kustomization, from the module go.mod pins, and the manager's own binary.
type Provider struct {
	Name string // the manager's binary in build.sh's folder
	// kustomization is its config/default, relative to the sigs.k8s.io/cluster-api module.
	Kustomization string
	ExtraArgs     []string
	Inventory     Inventory
	// module is the folder kustomization is relative to and version the release clusterctl's
	// inventory records; empty: the CAPI release the test installs (capiRelease).
	Module, Version string
	// flags, when set, are the manager's own flags for what CAPI's managers call
	// --kubeconfig, --webhook-port, --webhook-cert-dir and --health-addr (another provider
	// names them otherwise, or has none); it returns them with the URL that answers 200 once
	// the manager is ready, and may change s. WebhookPort 0 is a free port.
	Flags       func(s *ManagerSetup) (args []string, ready string)
	WebhookPort int
	// Variables are clusterctl's variables as `clusterctl init` reads them from the environment
	// (`CLUSTER_TOPOLOGY=true clusterctl init`): a `${NAME:=default}` in the manager's args is
	// the variable's value when it is set here, its default otherwise.
	Variables map[string]string
}

// ManagerSetup is what InstallProvider prepared for a manager's process.
type ManagerSetup struct {
	t                   *testing.T
	Artifacts           *Artifacts
	Name, Kubeconfig    string
	CertDir             string
	webhookPort, Health int
	Env                 []string
}

// Inventory is the provider's entry in clusterctl's inventory (a Provider object), which
// `clusterctl move` reads in both clusters.
type Inventory struct {
	Name string // providerName: cluster-api, kubeadm
	Kind string // type: CoreProvider, BootstrapProvider
}

// label is clusterctl's name for the provider (ManifestLabel): cluster-api, bootstrap-kubeadm.
func (i Inventory) label() string {
	if i.Kind == "CoreProvider" {
		return i.Name
	}
	return strings.ToLower(strings.TrimSuffix(i.Kind, "Provider")) + "-" + i.Name
}

// Installed is what InstallProvider did: the manager's process and the webhook
// configurations it registered (after the manager was ready).
type Installed struct {
	Process *Process
	// ServiceAccount is "namespace/name" of the manager's Deployment.
	ServiceAccount string
}

// InstallProvider builds the provider's config/default with kustomize, as CAPI's release
// builds the components clusterctl applies, and installs it on the API server: Namespace,
// CRDs (their conversion webhooks pointed at the manager), ServiceAccount and RBAC, and,
// once the manager runs with its ServiceAccount's token, its mutating and validating
// webhooks by URL. Deployment, Service and cert-manager's objects are replaced by the
// manager's process and the test's CA. As clusterctl init does, every object is labelled
// with clusterctl's labels (`clusterctl move` finds the kinds to move by them), and the
// provider is recorded in clusterctl's inventory.
func InstallProvider(t *testing.T, a *Artifacts, cp *ControlPlane, ca *Certificates, bin string, p Provider) *Installed {
	t.Helper()
	ctx := context.Background()
	if p.Module == "" {
		p.Module, p.Version = capiRelease(t)
	}
	objects := kustomizeBuild(t, filepath.Join(p.Module, p.Kustomization))
	// clusterctl creates Namespaces first, then CRDs (k3s' kustomization lists its Namespace
	// after the Roles in it).
	slices.SortStableFunc(objects, func(x, y *unstructured.Unstructured) int { return createOrder(x) - createOrder(y) })
	Must(t, os.WriteFile(a.Path(p.Name+"-components.yaml"), ToYAML(t, objects), 0o644))

	webhookPort := p.WebhookPort
	if webhookPort == 0 {
		webhookPort = FreePort(t)
	}
	webhookURL := fmt.Sprintf("https://127.0.0.1:%d", webhookPort)
	var deployment *unstructured.Unstructured
	var webhooks []*unstructured.Unstructured
	var crds []string
	for _, obj := range objects {
		labels := obj.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels["clusterctl.cluster.x-k8s.io"] = ""
		labels["cluster.x-k8s.io/provider"] = p.Inventory.label()
		obj.SetLabels(labels)
		switch obj.GetKind() {
		case "Deployment":
			deployment = obj
			continue
		case "Service", "Certificate", "Issuer":
			continue
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			pointWebhooksAt(t, obj, webhookURL, ca.CAPEM)
			webhooks = append(webhooks, obj)
			continue
		case "CustomResourceDefinition":
			pointConversionAt(t, obj, webhookURL, ca.CAPEM)
			crds = append(crds, obj.GetName())
		}
		if err := cp.Client.Create(ctx, obj); err != nil {
			t.Fatalf("install %s: create %s %s: %v", p.Name, obj.GetKind(), obj.GetName(), err)
		}
	}
	WaitEstablished(t, cp, crds)
	if deployment == nil {
		t.Fatalf("install %s: no Deployment in %s", p.Name, p.Kustomization)
	}

	// CAPI's manager is bound to an aggregated ClusterRole (capi-aggregated-manager-role).
	waitAggregated(t, cp)

	namespace := deployment.GetNamespace()
	sa, _, _ := unstructured.NestedString(deployment.Object, "spec", "template", "spec", "serviceAccountName")
	if sa == "" {
		// A pod that names none runs as its namespace's default, which kube-controller-manager
		// creates in every namespace.
		sa = "default"
		cp.waitServiceAccount(t, namespace, sa)
	}
	kubeconfig := cp.serviceAccountKubeconfig(t, a, namespace, sa)
	s := &ManagerSetup{t: t, Artifacts: a, Name: p.Name, Kubeconfig: kubeconfig, CertDir: a.Path(p.Name + "-serving-certs"),
		webhookPort: webhookPort, Health: FreePort(t), Env: []string{"POD_NAMESPACE=" + namespace}}
	flags := p.Flags
	if flags == nil {
		flags = capiManagerFlags
	}
	own, ready := flags(s)
	ca.serving(t, s.CertDir)
	args := append(append(managerArgs(t, deployment, p.Variables), own...), p.ExtraArgs...)
	proc := StartProcess(t, a, p.Name, filepath.Join(bin, p.Name), args, s.Env...)
	WaitHTTP(t, proc, ready, 2*time.Minute, nil)
	waitListening(t, proc, webhookPort)
	for _, obj := range webhooks {
		if err := cp.Client.Create(ctx, obj); err != nil {
			t.Fatalf("install %s: create %s %s: %v", p.Name, obj.GetKind(), obj.GetName(), err)
		}
	}
	cp.CreateAll(t, []*unstructured.Unstructured{{Object: map[string]any{
		"apiVersion": "clusterctl.cluster.x-k8s.io/v1alpha3",
		"kind":       "Provider",
		"metadata": map[string]any{
			"name": p.Inventory.label(), "namespace": namespace,
			"labels": map[string]any{"clusterctl.cluster.x-k8s.io": "", "cluster.x-k8s.io/provider": p.Inventory.label()},
		},
		"providerName": p.Inventory.Name,
		"type":         p.Inventory.Kind,
		"version":      p.Version,
	}}})
	return &Installed{Process: proc, ServiceAccount: namespace + "/" + sa}
}

func createOrder(obj *unstructured.Unstructured) int {
	switch obj.GetKind() {
	case "Namespace":
		return 0
	case "CustomResourceDefinition":
		return 1
	}
	return 2
}

// waitListening waits for the manager's webhook server: some managers are ready before it.
func waitListening(t *testing.T, p *Process, port int) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if p.exited() {
			t.Fatalf("%s exited (log: %s)%s", p.name, p.Log, p.logTail())
		}
		if conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			conn.Close()
			return
		}
	}
	t.Fatalf("%s's webhook server does not listen on port %d (log: %s)%s", p.name, port, p.Log, p.logTail())
}

// capiManagerFlags are the flags of CAPI's managers (and of providers that kept them).
func capiManagerFlags(s *ManagerSetup) ([]string, string) {
	return []string{
		"--kubeconfig=" + s.Kubeconfig,
		fmt.Sprintf("--webhook-port=%d", s.webhookPort),
		"--webhook-cert-dir=" + s.CertDir,
		fmt.Sprintf("--health-addr=127.0.0.1:%d", s.Health),
		fmt.Sprintf("--diagnostics-address=127.0.0.1:%d", FreePort(s.t)),
		"--insecure-diagnostics=true",
		// Outside a pod controller-runtime cannot tell the lease's namespace and CAPI has no
		// flag for it; one manager each needs no lease.
		"--leader-elect=false",
	}, fmt.Sprintf("http://127.0.0.1:%d/readyz", s.Health)
}

// waitAggregated waits for kube-controller-manager's clusterrole-aggregation controller: every
// ClusterRole with an aggregationRule holds the rules of every ClusterRole its selectors match.
func waitAggregated(t *testing.T, cp *ControlPlane) {
	t.Helper()
	var missing []string
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		roles := &rbacv1.ClusterRoleList{}
		if err := cp.Client.List(ctx, roles); err != nil {
			return false, nil
		}
		missing = nil
		for _, role := range roles.Items {
			if role.AggregationRule == nil {
				continue
			}
			for _, selector := range role.AggregationRule.ClusterRoleSelectors {
				s, err := metav1.LabelSelectorAsSelector(&selector)
				if err != nil {
					return false, err
				}
				for _, other := range roles.Items {
					if other.Name == role.Name || !s.Matches(labels.Set(other.Labels)) {
						continue
					}
					for _, rule := range other.Rules {
						if !slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return equality.Semantic.DeepEqual(r, rule) }) {
							missing = append(missing, fmt.Sprintf("%s lacks %s's %s", role.Name, other.Name, rule.String()))
						}
					}
				}
			}
		}
		return len(missing) == 0, nil
	})
	if err != nil {
		t.Fatalf("kube-controller-manager did not aggregate the ClusterRoles after a minute: %v (log: %s)", missing, cp.ControllerManager.Log)
	}
}

// managerArgs are the args of the Deployment's manager container with clusterctl's variables
// replaced as `clusterctl init` replaces them: `${CLUSTER_TOPOLOGY:=false}` becomes the
// variable's value in variables, else its default (`false`).
func managerArgs(t *testing.T, deployment *unstructured.Unstructured, variables map[string]string) []string {
	t.Helper()
	containers, _, _ := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "containers")
	variable := regexp.MustCompile(`\$\{([A-Z0-9_]+):=([^}]*)\}`)
	for _, c := range containers {
		container := c.(map[string]any)
		if container["name"] != "manager" {
			continue
		}
		var args []string
		for _, arg := range container["args"].([]any) {
			args = append(args, variable.ReplaceAllStringFunc(arg.(string), func(ref string) string {
				m := variable.FindStringSubmatch(ref)
				if value, ok := variables[m[1]]; ok {
					return value
				}
				return m[2]
			}))
		}
		return args
	}
	t.Fatalf("no manager container in Deployment %s", deployment.GetName())
	return nil
}

func pointWebhooksAt(t *testing.T, obj *unstructured.Unstructured, url string, ca []byte) {
	t.Helper()
	webhooks, _, _ := unstructured.NestedSlice(obj.Object, "webhooks")
	for _, w := range webhooks {
		webhook := w.(map[string]any)
		path, _, _ := unstructured.NestedString(webhook, "clientConfig", "service", "path")
		webhook["clientConfig"] = map[string]any{"url": url + path, "caBundle": base64.StdEncoding.EncodeToString(ca)}
	}
	Must(t, unstructured.SetNestedSlice(obj.Object, webhooks, "webhooks"))
	// cert-manager's CA injection is the test's CA above.
	obj.SetAnnotations(nil)
}

func pointConversionAt(t *testing.T, obj *unstructured.Unstructured, url string, ca []byte) {
	t.Helper()
	strategy, _, _ := unstructured.NestedString(obj.Object, "spec", "conversion", "strategy")
	if strategy != "Webhook" {
		return
	}
	path, _, _ := unstructured.NestedString(obj.Object, "spec", "conversion", "webhook", "clientConfig", "service", "path")
	Must(t, unstructured.SetNestedField(obj.Object, map[string]any{"url": url + path, "caBundle": base64.StdEncoding.EncodeToString(ca)},
		"spec", "conversion", "webhook", "clientConfig"))
	annotations := obj.GetAnnotations()
	delete(annotations, "cert-manager.io/inject-ca-from")
	obj.SetAnnotations(annotations)
}

func WaitEstablished(t *testing.T, cp *ControlPlane, names []string) {
	t.Helper()
	for _, name := range names {
		err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true,
			func(ctx context.Context) (bool, error) {
				crd := &apiextensionsv1.CustomResourceDefinition{}
				if err := cp.Client.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
					return false, nil
				}
				for _, c := range crd.Status.Conditions {
					if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
						return true, nil
					}
				}
				return false, nil
			})
		if err != nil {
			t.Fatalf("CRD %s not established: %v", name, err)
		}
	}
}

// kustomizeBuild is `kustomize build dir`.
func kustomizeBuild(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var objects []*unstructured.Unstructured
	for _, r := range resources.Resources() {
		data, err := r.MarshalJSON()
		Must(t, err)
		obj := &unstructured.Unstructured{}
		Must(t, obj.UnmarshalJSON(data))
		objects = append(objects, obj)
	}
	return objects
}

func ToYAML(t *testing.T, objects []*unstructured.Unstructured) []byte {
	t.Helper()
	var docs []string
	for _, obj := range objects {
		out, err := yaml.Marshal(obj.Object)
		Must(t, err)
		docs = append(docs, string(out))
	}
	return []byte(strings.Join(docs, "---\n"))
}

// capiRelease is the CAPI release the test installs: the directory of its sigs.k8s.io/cluster-api
// module, read-only in the Go module cache, and its version. run.sh sets CAPI_MODULE_DIR and
// CAPI_VERSION for each release it runs (build.sh built that release's managers and clusterctl
// into CLUSTER_BIN); without them it is the release go.mod pins.
func capiRelease(t *testing.T) (dir, version string) {
	t.Helper()
	dir, version = os.Getenv("CAPI_MODULE_DIR"), os.Getenv("CAPI_VERSION")
	if (dir == "") != (version == "") {
		t.Fatalf("CAPI_MODULE_DIR (%q) and CAPI_VERSION (%q) are set together or not at all", dir, version)
	}
	if dir != "" {
		return dir, version
	}
	return PinnedModule(t, ".", "sigs.k8s.io/cluster-api")
}

// PinnedModule is a module that the Go module in folder (this one: ".", or one under capi/)
// pins: its directory, read-only in the module cache, and its version. The folder comes from `go
// mod download -json`, never from `go list -m`, which names none for a module not downloaded yet
// (hack/go-modules.sh); the test runs with GOPROXY=off, so a module the builds did not fetch
// fails here, by name.
func PinnedModule(t *testing.T, folder, module string) (dir, version string) {
	t.Helper()
	list := exec.Command("go", "list", "-m", "-f", "{{.Version}}", module)
	list.Dir = folder
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list -m %s in %s: %v", module, folder, err)
	}
	version = strings.TrimSpace(string(out))
	download := exec.Command("go", "mod", "download", "-json", module+"@"+version)
	download.Dir = folder
	out, err = download.Output()
	var info struct{ Dir, Error string }
	if jsonErr := json.Unmarshal(out, &info); jsonErr != nil || info.Dir == "" {
		t.Fatalf("go mod download %s@%s in %s: %v %s", module, version, folder, err, info.Error)
	}
	return info.Dir, version
}

// coreKustomization is the core provider's config/default in the release's module: at its root
// up to v1.12, under core/ in v1.14 (which moved the core manager's main package there).
func coreKustomization(t *testing.T) string {
	t.Helper()
	dir, _ := capiRelease(t)
	if _, err := os.Stat(filepath.Join(dir, "core", "config", "default")); err == nil {
		return "core/config/default"
	}
	return "config/default"
}
