package clustertest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capi-bootstrap-rollout-policy/capi-bootstrap-rollout-policy/cluster-test/framework"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// bootstrapProvider is one of the other bootstrap providers as the test installs it from its
// Go module under capi/, with its pool on a CAPI v1.10.10 management cluster, or, for a
// release of CAPI's v1beta2 API (onCAPIv1beta2), on this module's CAPI release (v1.12.10).
type bootstrapProvider struct {
	name   string // the subtest
	folder string // capi/<folder>: the module that pins it, and capi/build.sh's binaries
	module string // its Go module
	framework.Provider
	config   schema.GroupVersionKind
	resource string
	manifest string // testdata/providers/<manifest>, NAME the config's name
	// controlPlane is the Cluster's controlPlaneRef and what the test sets up in place of the
	// control plane provider (which does not run) for the provider's worker join.
	controlPlane func(t *testing.T, m *framework.ManagementCluster) (ref string, gvk schema.GroupVersionKind, status map[string]any)
	// defaulted checks what the provider's defaulter did to the stored config.
	defaulted func(t *testing.T, stored *unstructured.Unstructured)
	// edit is a person's real edit of the manifest (old, new) and the path the policy names.
	edit       [2]string
	editedPath string
	// ownRefusals are the provider's own validating webhooks that refuse a change of the spec
	// too (name: what they answer), for the config and for its template: kube-apiserver calls
	// them beside the policy and answers with the first refusal it collects.
	ownRefusals map[string]string
	// dataOnAdoption: the provider's controller writes the bootstrap data as soon as the pool
	// adopts the config (it does not wait for the control plane, or the control plane is
	// initialized from the start): its writes are counted from the config's creation.
	dataOnAdoption bool
	// grants are RBAC objects the provider's own config/default lacks for a pool to work,
	// created before its manager starts, as the person installing it adds them.
	grants string
	// onCAPIv1beta2: the provider is built against CAPI's v1beta2 API (CAPI v1.11+), and its
	// pool runs on this module's CAPI release, the Cluster as TestCluster makes it (its control
	// plane initialized from the start); controlPlane then only adds what the join reads.
	onCAPIv1beta2 bool
	// drift: the provider renders its data Secret once; a pool of its on the no-roll
	// infrastructure is edited in place and drift's fix run (drift_test.go).
	drift bool
}

var bootstrapProviders = []bootstrapProvider{
	rke2("rke2-v0.21.0", "v1.10"),
	rke2("rke2-v0.20.1", "rke2-v0.20"),
	k3s("k3s-v0.3.1", "v1.10"),
	{
		name: "talos-v0.6.12", folder: "talos-v0.6", module: "github.com/siderolabs/cluster-api-bootstrap-provider-talos",
		Provider: framework.Provider{
			Name: "cabpt-manager", Kustomization: "config/default",
			Inventory: framework.Inventory{Name: "talos", Kind: "BootstrapProvider"},
			Flags:     framework.CABPTManagerFlags,
			// Its Deployment's args keep MachinePools off (${EXP_MACHINE_POOL:=false}): on, as
			// `EXP_MACHINE_POOL=true clusterctl init` turns them on for a fleet of pools.
			ExtraArgs: []string{"--feature-gates=MachinePool=true"},
		},
		config:   schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1alpha3", Kind: "TalosConfig"},
		resource: "talosconfigs", manifest: "talosconfig.yaml",
		controlPlane: func(t *testing.T, m *framework.ManagementCluster) (string, schema.GroupVersionKind, map[string]any) {
			// CABPT generates a worker's configuration from the Cluster (its endpoint, and the
			// secrets bundle it writes itself); it reads no control plane.
			framework.CreateTestControlPlane(t)(m)
			return fmt.Sprintf("{apiVersion: controlplane.cluster-test.rollout-policy.dev/v1alpha1, kind: TestControlPlane, name: %s}", framework.ClusterName),
				schema.GroupVersionKind{Group: "controlplane.cluster-test.rollout-policy.dev", Version: "v1alpha1", Kind: "TestControlPlane"},
				map[string]any{"ready": true, "initialized": true}
		},
		edit:       [2]string{`max-pods: "110"`, `max-pods: "64"`},
		editedPath: "spec.strategicPatches[0]: Forbidden: changed",
		ownRefusals: map[string]string{
			"vtalosconfig.cluster.x-k8s.io":         "TalosConfig.Spec is immutable",
			"vtalosconfigtemplate.cluster.x-k8s.io": "TalosConfigTemplate.Spec is immutable",
		},
		// Its controller waits for the Cluster's infrastructure only, which the test's Cluster
		// has none of.
		dataOnAdoption: true,
		// Its ClusterRole grants MachinePools in exp.cluster.x-k8s.io (config/rbac/role.yaml,
		// from its kubebuilder markers), CAPI's experimental group of old; CAPI v1.10 serves them
		// in cluster.x-k8s.io (the Go package it imports, sigs.k8s.io/cluster-api/exp/api/v1beta1,
		// says so). Without this grant its MachinePool informer is forbidden, its caches never
		// sync and the manager exits after two minutes.
		grants: `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: cabpt-machinepools}
rules:
- apiGroups: [cluster.x-k8s.io]
  resources: [machinepools, machinepools/status]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: cabpt-machinepools}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cabpt-machinepools}
subjects:
- {kind: ServiceAccount, name: default, namespace: cabpt-system}`,
	},
	k3sV1beta2(),
}

func k3s(name, folder string) bootstrapProvider {
	return bootstrapProvider{
		name: name, folder: folder, module: "github.com/k3s-io/cluster-api-k3s",
		Provider: framework.Provider{
			Name: "k3s-bootstrap-manager", Kustomization: "bootstrap/config/default",
			Inventory: framework.Inventory{Name: "k3s", Kind: "BootstrapProvider"},
			Flags:     k3sManagerFlags,
			// Its webhook server's port is not a flag: 9443, free in run.sh's network namespace.
			WebhookPort: 9443,
		},
		config:   schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KThreesConfig"},
		resource: "kthreesconfigs", manifest: "kthreesconfig.yaml",
		controlPlane: func(t *testing.T, m *framework.ManagementCluster) (string, schema.GroupVersionKind, map[string]any) {
			// k3s' worker join needs the join token k3s' control plane provider writes.
			m.CreateJoinToken(t)
			framework.CreateTestControlPlane(t)(m)
			return fmt.Sprintf("{apiVersion: controlplane.cluster-test.rollout-policy.dev/v1alpha1, kind: TestControlPlane, name: %s}", framework.ClusterName),
				schema.GroupVersionKind{Group: "controlplane.cluster-test.rollout-policy.dev", Version: "v1alpha1", Kind: "TestControlPlane"},
				map[string]any{"ready": true, "initialized": true}
		},
		defaulted: func(t *testing.T, stored *unstructured.Unstructured) {
			t.Helper()
			if v, _, _ := unstructured.NestedBool(stored.Object, "spec", "serverConfig", "disableCloudController"); !v {
				t.Error("k3s' defaulter did not set spec.serverConfig.disableCloudController")
			}
			if v, _, _ := unstructured.NestedString(stored.Object, "spec", "serverConfig", "cloudProviderName"); v != "external" {
				t.Errorf("spec.serverConfig.cloudProviderName = %q, want k3s' default external", v)
			}
		},
		edit:       [2]string{"max-pods=110", "max-pods=64"},
		editedPath: "spec.agentConfig.kubeletArgs[0]: Forbidden: changed",
	}
}

// k3sV1beta2 is k3s' bootstrap provider v0.4.0, of CAPI's v1beta2 API: its webhooks are
// v0.3.1's (the same defaulter), its controller reads the Cluster's v1beta2 status.
func k3sV1beta2() bootstrapProvider {
	bp := k3s("k3s-v0.4.0", "k3s-v0.4")
	bp.onCAPIv1beta2, bp.dataOnAdoption, bp.drift = true, true, true
	bp.controlPlane = func(t *testing.T, m *framework.ManagementCluster) (string, schema.GroupVersionKind, map[string]any) {
		// k3s' worker join needs the join token k3s' control plane provider writes.
		m.CreateJoinToken(t)
		return "", schema.GroupVersionKind{Group: "controlplane.cluster-test.rollout-policy.dev", Version: "v1alpha1", Kind: "TestControlPlane"},
			map[string]any{"initialization": map[string]any{"controlPlaneInitialized": true}}
	}
	return bp
}

func rke2(name, folder string) bootstrapProvider {
	return bootstrapProvider{
		name: name, folder: folder, module: "github.com/rancher/cluster-api-provider-rke2",
		Provider: framework.Provider{
			Name: "rke2-bootstrap-manager", Kustomization: "bootstrap/config/default",
			Inventory: framework.Inventory{Name: "rke2", Kind: "BootstrapProvider"},
		},
		config:   schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta1", Kind: "RKE2Config"},
		resource: "rke2configs", manifest: "rke2config.yaml",
		controlPlane: func(t *testing.T, m *framework.ManagementCluster) (string, schema.GroupVersionKind, map[string]any) {
			// RKE2's worker join reads the Cluster's RKE2ControlPlane (its servers' addresses) and
			// the join token its control plane provider writes. The CRD, from the same module,
			// without that provider's controller: the test sets its status as it would.
			dir, _ := framework.PinnedModule(t, filepath.Join("capi", folder), "github.com/rancher/cluster-api-provider-rke2")
			crd := framework.ReadObjects(t, framework.ReadFile(t, filepath.Join(dir, "controlplane/config/crd/bases/controlplane.cluster.x-k8s.io_rke2controlplanes.yaml")))
			crd[0].SetLabels(map[string]string{"cluster.x-k8s.io/v1beta1": "v1alpha1_v1beta1", "clusterctl.cluster.x-k8s.io": ""})
			m.CP.CreateAll(t, crd)
			framework.WaitEstablished(t, m.CP, []string{crd[0].GetName()})
			m.CreateJoinToken(t)
			m.CP.CreateAll(t, []*unstructured.Unstructured{framework.Object(t, fmt.Sprintf(`
apiVersion: controlplane.cluster.x-k8s.io/v1beta1
kind: RKE2ControlPlane
metadata: {name: %s, namespace: %s}
spec:
  version: v1.34.3+rke2r1
  rolloutStrategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 1}}
  machineTemplate:
    infrastructureRef: {apiVersion: infrastructure.cluster-test.rollout-policy.dev/v1alpha1, kind: TestMachineTemplate, name: %s}`,
				framework.ClusterName, framework.Namespace, framework.ClusterName))})
			return fmt.Sprintf("{apiVersion: controlplane.cluster.x-k8s.io/v1beta1, kind: RKE2ControlPlane, name: %s}", framework.ClusterName),
				schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta1", Kind: "RKE2ControlPlane"},
				map[string]any{"ready": true, "initialized": true, "availableServerIPs": []any{"127.0.0.1"}}
		},
		defaulted: func(t *testing.T, stored *unstructured.Unstructured) {
			t.Helper()
			if v, _, _ := unstructured.NestedString(stored.Object, "spec", "agentConfig", "format"); v != "cloud-config" {
				t.Errorf("spec.agentConfig.format = %q, want RKE2's default cloud-config", v)
			}
			data, _, _ := unstructured.NestedStringMap(stored.Object, "spec", "agentConfig", "additionalUserData", "data")
			if _, ok := data["runcmd"]; ok {
				t.Error("RKE2's defaulter did not drop additionalUserData.data.runcmd")
			}
			if want := "\n- echo one\n- echo two\n"; data["bootcmd"] != want {
				t.Errorf("additionalUserData.data.bootcmd = %q, want RKE2's rewrite %q", data["bootcmd"], want)
			}
			for _, path := range [][]string{{"airGapped"}, {"protectKernelDefaults"}, {"nodeLabels"}, {"additionalUserData", "strict"}} {
				if _, found, _ := unstructured.NestedFieldNoCopy(stored.Object, append([]string{"spec", "agentConfig"}, path...)...); found {
					t.Errorf("RKE2's defaulter did not prune spec.agentConfig.%s", strings.Join(path, "."))
				}
			}
		},
		edit:       [2]string{"[echo one, echo two]", "[echo one, echo three]"},
		editedPath: "spec.agentConfig.additionalUserData.data.bootcmd: Forbidden: changed",
	}
}

// TestRKE2DefaulterNumbers: RKE2's defaulter re-emits user data with gopkg.in/yaml.v3, which
// reads plain scalars by rules of its own, not YAML 1.2's (testdata/providers/
// rke2config-numbers.yaml: `30.0` re-emitted `30`, `010` octal, re-emitted `8`); the policy
// reads them as yaml.v3 does, so a person's label of a config stored before the defaulter is
// admitted. It failed while the policy used YAML 1.2's rules.
func TestRKE2DefaulterNumbers(t *testing.T) {
	ctrllog.SetLogger(logr.Discard())
	bin := framework.ClusterBinaries(t)
	bp := rke2("rke2-v0.21.0", "v1.10")
	bp.manifest = "rke2config-numbers.yaml"
	bp.run(t, framework.ArtifactsForTest(t), bin)
}

// k3sManagerFlags: k3s' manager has a flag for its metrics only; its webhook server listens on
// 9443 with its certificate in $TMPDIR/k8s-webhook-server/serving-certs, and it has no health
// endpoint (its metrics answer once it runs). Its kubeconfig is KUBECONFIG's.
func k3sManagerFlags(s *framework.ManagerSetup) ([]string, string) {
	tmp := s.Artifacts.Path(s.Name + "-tmp")
	s.CertDir = filepath.Join(tmp, "k8s-webhook-server", "serving-certs")
	s.Env = append(s.Env, "TMPDIR="+tmp, "KUBECONFIG="+s.Kubeconfig)
	return []string{fmt.Sprintf("--metrics-addr=127.0.0.1:%d", s.Health), "--enable-leader-election=false"},
		fmt.Sprintf("http://127.0.0.1:%d/metrics", s.Health)
}

// TestProviderWebhooks: for RKE2 (v0.21.0 and v0.20.1), k3s (v0.3.1) and Talos (CABPT
// v0.6.12), each on a CAPI v1.10.10 management cluster of its own, and k3s v0.4.0 (CAPI's
// v1beta2 API) on one of this module's CAPI v1.12.10, the provider's CRDs, RBAC
// and mutating and validating webhooks installed from its config/default and its manager
// running as its ServiceAccount: a config stored before the provider's defaulter would have
// changed it (Talos has none), adopted by its pool; then a person's metadata-only update, a
// re-apply, and the provider's own write (the worker join's bootstrap data) are admitted; a
// person's real edit is refused (for Talos by its own webhook as well).
func TestProviderWebhooks(t *testing.T) {
	ctrllog.SetLogger(logr.Discard())
	bin := framework.ClusterBinaries(t)
	a := framework.ArtifactsForTest(t)
	for _, bp := range bootstrapProviders {
		t.Run(bp.name, func(t *testing.T) { bp.run(t, a.Sub(t, bp.name), bin) })
	}
}

// startCluster is StartV1beta1Cluster with the provider's control plane, and what that
// control plane's status must be for a worker join.
func (bp bootstrapProvider) startCluster(t *testing.T, a *framework.Artifacts, bin string) (m *framework.ManagementCluster, controlPlane schema.GroupVersionKind, status map[string]any) {
	t.Helper()
	if bp.onCAPIv1beta2 {
		m = framework.StartManagementCluster(t, a, bin, framework.NewCA(t), nil)
		m.CreateCluster(t)
		_, controlPlane, status = bp.controlPlane(t, m)
		return m, controlPlane, status
	}
	m = framework.StartV1beta1Cluster(t, a, bin, func(m *framework.ManagementCluster) string {
		ref, gvk, s := bp.controlPlane(t, m)
		controlPlane, status = gvk, s
		return ref
	})
	return m, controlPlane, status
}

// install installs the provider from its module on m; its manager's identity.
func (bp bootstrapProvider) install(t *testing.T, a *framework.Artifacts, m *framework.ManagementCluster) string {
	t.Helper()
	p := bp.Provider
	p.Module, p.Version = framework.PinnedModule(t, filepath.Join("capi", bp.folder), bp.module)
	if bp.grants != "" {
		m.CP.CreateAll(t, framework.ReadObjects(t, []byte(bp.grants)))
	}
	installed := framework.InstallProvider(t, a, m.CP, m.CA, framework.CAPIBinaries(t, bp.folder), p)
	return "system:serviceaccount:" + strings.ReplaceAll(installed.ServiceAccount, "/", ":")
}

// run runs the provider's steps on a management cluster of its own: the config stored and
// adopted, a person's metadata-only update, a re-apply, the provider's own writes, a person's
// real edit, drift (bp.drift), the template's steps, and no controller write refused.
func (bp bootstrapProvider) run(t *testing.T, a *framework.Artifacts, bin string) {
	pool := bp.name
	// Set-up runs in the subtest itself: what it starts lives until the subtest ends.
	m, controlPlane, cpStatus := bp.startCluster(t, a, bin)
	identity := bp.install(t, a, m)
	if users := framework.StringList(m.Policy.Spec.Settings["controllerUsers"]); !slices.Contains(users, identity) {
		t.Errorf("POLICY: %s's manager runs as %s (its config/default), which policy.yaml's controllerUsers %v does not list", bp.name, identity, users)
	}

	manifest := strings.ReplaceAll(string(framework.ReadFile(t, filepath.Join("testdata", "providers", bp.manifest))), "NAME", pool)
	configFile := bp.config.Kind + ".yaml"
	framework.Must(t, os.WriteFile(a.Path(configFile), []byte(manifest), 0o644))
	template := m.WriteTemplate(t, manifest, pool)
	created := time.Now()
	stored := "a config stored before the defaulter, adopted by its pool"
	if bp.defaulted == nil {
		stored = "a config applied, adopted by its pool (the provider has no defaulter)"
	}
	step(t, stored, func(t *testing.T) { bp.storedAndAdopted(t, m, configFile, template) })
	step(t, "a person's metadata-only update is admitted, the defaulter rewriting the spec", func(t *testing.T) {
		bp.metadataOnlyUpdate(t, m, configFile)
	})
	step(t, "re-applying the manifest is admitted without a warning", func(t *testing.T) {
		since := time.Now()
		m.AdmittedWithoutWarning(t, "apply", "-f", configFile)
		m.AdmittedWithoutWarning(t, "apply", "--server-side", "--force-conflicts", "-f", configFile)
		m.CheckPersonAdmitted(t, since)
		m.CheckNotAnEdit(t, since, bp.resource, pool)
	})
	step(t, "the provider's own writes (the worker join's bootstrap data) are admitted", func(t *testing.T) {
		bp.ownWritesAdmitted(t, m, identity, created, controlPlane, cpStatus)
	})
	step(t, "a person's real edit is refused, naming the field", func(t *testing.T) {
		bp.realEditRefused(t, a, m, manifest, configFile)
	})
	if bp.drift {
		step(t, "an exempt identity's in-place edit of a config rendered once: drift finds every instance, now and future, stale; the fix it prints makes the pool current", func(t *testing.T) {
			driftRenderOnce(t, m, bp)
		})
	}
	if bp.ownRefusals == nil {
		templateSteps(t, m, template, bp.name, bp.edit, strings.TrimPrefix(bp.editedPath, "spec."))
	} else {
		bp.templateStepsWithOwnValidator(t, m, template)
	}
	step(t, "no controller write was refused by the policy", func(t *testing.T) {
		bp.noControllerRefused(t, m, identity)
	})
}

// storedAndAdopted applies configFile and the pool with the provider's defaulter (if it has
// one) out of the way, waits for the pool to adopt the config, applies the template and puts
// the defaulter back.
func (bp bootstrapProvider) storedAndAdopted(t *testing.T, m *framework.ManagementCluster, configFile string, template framework.BootstrapTemplate) {
	pool := bp.name
	restore := func() {}
	if bp.defaulted != nil {
		restore = m.WithoutDefaulter(t, bp.resource, strings.TrimSuffix(bp.resource, "s")+"templates")
	}
	for _, file := range []string{configFile, m.Pools(t, bp.config.GroupVersion().String(), bp.config.Kind, pool)} {
		if r := m.Person.Run(t, "apply", "-f", file); r.Err != nil {
			t.Fatalf("kubectl apply -f %s: %v\n%s", file, r.Err, r.Stderr)
		}
	}
	stored := m.WaitFor(t, bp.config, pool, 2*time.Minute, "adopted by its pool", func(u *unstructured.Unstructured) bool {
		return framework.ControlledByPool(u, pool)
	})
	t.Logf("%s as stored before the defaulter:\n%s", bp.config.Kind, framework.SpecYAML(t, stored))
	m.ApplyTemplate(t, template)
	restore()
}

// metadataOnlyUpdate: a person's label and annotation of the config are admitted without a
// warning and are no edit; bp.defaulted checks what the provider's defaulter rewrote.
func (bp bootstrapProvider) metadataOnlyUpdate(t *testing.T, m *framework.ManagementCluster, configFile string) {
	pool := bp.name
	since := time.Now()
	m.LabelAsPerson(t, bp.config, pool, configFile, bp.name)
	m.AdmittedWithoutWarning(t, "annotate", strings.ToLower(bp.config.Kind), pool, "-n", framework.Namespace, "fleet.example.com/owner=platform")
	stored := m.Get(t, bp.config, pool)
	t.Logf("%s after the person's label (the defaulter ran):\n%s", bp.config.Kind, framework.SpecYAML(t, stored))
	if bp.defaulted != nil {
		bp.defaulted(t, stored)
	}
	m.CheckNotAnEdit(t, since, bp.resource, pool)
}

// ownWritesAdmitted readies the pool's join (its infrastructure on CAPI's v1beta2 API, else
// the control plane's status cpStatus), waits for the provider's bootstrap data, and checks
// the provider's manager (identity) wrote the config, no write of it judged an edit.
func (bp bootstrapProvider) ownWritesAdmitted(t *testing.T, m *framework.ManagementCluster, identity string, created time.Time, controlPlane schema.GroupVersionKind, cpStatus map[string]any) {
	pool := bp.name
	since := time.Now()
	if bp.dataOnAdoption {
		since = created
	}
	if bp.onCAPIv1beta2 {
		m.ProvisionInfrastructure(t, pool)
	} else {
		m.MarkV1beta1Ready(t, controlPlane, cpStatus, pool)
	}
	m.WaitFor(t, bp.config, pool, 3*time.Minute, "given its bootstrap data by the provider", func(u *unstructured.Unstructured) bool {
		ready, _, _ := unstructured.NestedBool(u.Object, "status", "ready")
		secret, _, _ := unstructured.NestedString(u.Object, "status", "dataSecretName")
		return ready && secret != ""
	})
	var own int
	for _, e := range m.CheckNotAnEdit(t, since, bp.resource, pool) {
		if e.User.Username == identity {
			own++
		}
	}
	if own == 0 {
		t.Errorf("the audit log shows no write of %s by %s", pool, identity)
	}
}

// realEditRefused: a person's apply of the manifest with bp.edit made is refused, naming
// bp.editedPath and the pool (with ownRefusals, by the provider's webhook as well).
func (bp bootstrapProvider) realEditRefused(t *testing.T, a *framework.Artifacts, m *framework.ManagementCluster, manifest, configFile string) {
	pool := bp.name
	edited := strings.Replace(manifest, bp.edit[0], bp.edit[1], 1)
	framework.Must(t, os.WriteFile(a.Path("edited-"+configFile), []byte(edited), 0o644))
	if bp.ownRefusals != nil {
		bp.refusedByBoth(t, m, "edited-"+configFile, pool, bp.editedPath, fmt.Sprintf("The config is in use by MachinePool %s/%s", framework.Namespace, pool))
		return
	}
	r := m.Person.Run(t, "apply", "-f", "edited-"+configFile)
	for _, want := range []string{
		fmt.Sprintf("admission webhook %q denied the request", m.WebhookName()),
		bp.editedPath,
		fmt.Sprintf("The config is in use by MachinePool %s/%s", framework.Namespace, pool),
	} {
		if r.Err == nil || !strings.Contains(r.Stderr, want) {
			t.Errorf("want a refusal with %q: %v\n%s", want, r.Err, r.Stderr)
		}
	}
}

// noControllerRefused: over the whole run, no controller write was refused by the policy, the
// provider's manager (identity) included, nor by the provider's own webhooks.
func (bp bootstrapProvider) noControllerRefused(t *testing.T, m *framework.ManagementCluster, identity string) {
	m.CheckControllersAdmitted(t, time.Time{})
	events := m.EventsSince(t, time.Time{})
	for _, e := range framework.DeniedBy(events, m.WebhookName()) {
		if e.User.Username == identity {
			t.Errorf("the policy refused %s's own write: %s", bp.name, e)
		}
	}
	for webhook := range bp.ownRefusals {
		for _, e := range framework.DeniedBy(events, webhook) {
			if e.User.Username == identity || e.User.Username == m.CAPIManager || e.User.Username == m.CABPK {
				t.Errorf("%s's own webhook %s refused a controller's write: %s", bp.name, webhook, e)
			}
		}
	}
}

// refusedByBoth: a person's `kubectl apply -f file`, an edit that the provider's own webhook
// refuses as well as the policy. kube-apiserver calls both and prints the first refusal it
// collected, the provider's (no path, no rotation) or the policy's (want, each of them); both
// webhooks count the request as refused (kube-apiserver's rejection metrics), and the policy's
// refusal of the object named says want, read from policy-host serve's log when it runs.
func (bp bootstrapProvider) refusedByBoth(t *testing.T, m *framework.ManagementCluster, file, name string, want ...string) {
	t.Helper()
	webhooks := []string{m.WebhookName()}
	for webhook := range bp.ownRefusals {
		webhooks = append(webhooks, webhook)
	}
	before := m.WebhookRejections(t, webhooks...)
	r := m.Person.Run(t, "apply", "-f", file)
	if r.Err == nil {
		t.Fatalf("kubectl apply -f %s was admitted", file)
	}
	printed := ""
	for webhook, answer := range bp.ownRefusals {
		if strings.Contains(r.Stderr, fmt.Sprintf("admission webhook %q denied the request: %s", webhook, answer)) {
			printed = webhook
		}
	}
	if printed == "" {
		printed = m.WebhookName()
		for _, w := range append([]string{fmt.Sprintf("admission webhook %q denied the request", m.WebhookName())}, want...) {
			if !strings.Contains(r.Stderr, w) {
				t.Errorf("kubectl printed neither %s's own refusal nor the policy's with %q:\n%s", bp.name, w, r.Stderr)
			}
		}
	}
	t.Logf("kubectl printed the refusal of %s (kube-apiserver answers with the first refusal of the webhooks it called)", printed)
	after := m.WebhookRejections(t, webhooks...)
	refusedBy := 0
	for _, webhook := range webhooks {
		if after[webhook] > before[webhook] {
			refusedBy++
		} else if webhook == m.WebhookName() {
			t.Errorf("POLICY: kube-apiserver counts no refusal of the policy's webhook for %s (apiserver_admission_webhook_rejection_count %v -> %v)", file, before[webhook], after[webhook])
		}
	}
	if refusedBy < 2 {
		t.Errorf("want the edit refused by the policy and by %s's own webhook: rejection counts %v -> %v", bp.name, before, after)
	}
	// What the policy answered, whether kubectl printed it or not.
	messages, ok := m.PolicyRefusals(t, name)
	if !ok {
		t.Log("the policy server's log is not policy-host's: its refusal's text is not read")
		return
	}
	if len(messages) == 0 {
		t.Fatalf("POLICY: policy-host serve logged no refusal of %s", name)
	}
	for _, w := range want {
		if last := messages[len(messages)-1]; !strings.Contains(last, w) {
			t.Errorf("POLICY: the policy's refusal lacks %q: %s", w, last)
		}
	}
}

// templateStepsWithOwnValidator is templateSteps for a provider whose own webhook refuses a
// change of the template's spec too: the person's label, annotation and re-applies admitted by
// both, the edit refused by both.
func (bp bootstrapProvider) templateStepsWithOwnValidator(t *testing.T, m *framework.ManagementCluster, tmpl framework.BootstrapTemplate) {
	t.Helper()
	resource := strings.ToLower(tmpl.GVK.Kind) + "s"
	step(t, "a person's metadata-only update and re-applies of the "+tmpl.GVK.Kind+" are admitted", func(t *testing.T) {
		since := time.Now()
		m.LabelAsPerson(t, tmpl.GVK, tmpl.Name, tmpl.File, bp.name)
		m.AdmittedWithoutWarning(t, "annotate", strings.ToLower(tmpl.GVK.Kind), tmpl.Name, "-n", framework.Namespace, "fleet.example.com/owner=platform")
		m.AdmittedWithoutWarning(t, "apply", "-f", tmpl.File)
		m.AdmittedWithoutWarning(t, "apply", "--server-side", "--force-conflicts", "-f", tmpl.File)
		m.CheckPersonAdmitted(t, since)
		m.CheckNotAnEdit(t, since, resource, tmpl.Name)
	})
	step(t, "a person's real edit of the "+tmpl.GVK.Kind+" is refused by the policy and by the provider", func(t *testing.T) {
		text := string(framework.ReadFile(t, m.Artifacts.Path(tmpl.File)))
		if !strings.Contains(text, bp.edit[0]) {
			t.Fatalf("%s has no %q to edit", tmpl.File, bp.edit[0])
		}
		framework.Must(t, os.WriteFile(m.Artifacts.Path("edited-"+tmpl.File), []byte(strings.Replace(text, bp.edit[0], bp.edit[1], 1)), 0o644))
		bp.refusedByBoth(t, m, "edited-"+tmpl.File, tmpl.Name, "spec.template.spec."+strings.TrimPrefix(bp.editedPath, "spec."))
	})
}
