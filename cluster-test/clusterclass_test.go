package clustertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capi-bootstrap-rollout-policy/capi-bootstrap-rollout-policy/cluster-test/framework"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ClusterClass quick-start (testdata/clusterclass) and Cluster c2 made from it, in a namespace
// of their own: one MachinePool topology and one MachineDeployment topology, both on the
// class's workers' bootstrap template.
const (
	topologyClass      = "quick-start"
	topologyPool       = "pool-0"
	topologyDeployment = "md-0"
	// The sysctl the class's bootstrap template sets, and what the class change sets instead.
	classContent   = "vm.max_map_count = 262144"
	changedContent = "vm.max_map_count = 1048576"
)

// topologyObjects is what the topology controller made for c2, read from the cluster: the
// pool and the KubeadmConfig it names, the MachineDeployment and the KubeadmConfigTemplate it
// names.
type topologyObjects struct {
	pool, config, deployment, template *unstructured.Unstructured
}

// topologyObjects: c2's objects; it has one MachinePool and one MachineDeployment at the end
// of every step.
func (c *testCluster) topologyObjects(t *testing.T) topologyObjects {
	t.Helper()
	ns := framework.TopologyNamespace
	one := func(kind string) *unstructured.Unstructured {
		list := c.ListIn(t, framework.MachinePoolGVK.GroupVersion().WithKind(kind), ns,
			client.MatchingLabels{"cluster.x-k8s.io/cluster-name": framework.TopologyCluster}, client.HasLabels{framework.TopologyOwnedLabel})
		if len(list) != 1 {
			t.Fatalf("%d %ss of Cluster %s/%s's topology, want 1", len(list), kind, ns, framework.TopologyCluster)
		}
		return &list[0]
	}
	var o topologyObjects
	o.pool = one("MachinePool")
	o.deployment = one("MachineDeployment")
	o.config = c.GetIn(t, framework.KubeadmConfigGVK, ns, bootstrapRef(o.pool))
	o.template = c.GetIn(t, framework.KubeadmConfigTemplateGVK, ns, bootstrapRef(o.deployment))
	return o
}

// bootstrapRef: the name in spec.template.spec.bootstrap.configRef of a pool, deployment or set.
func bootstrapRef(u *unstructured.Unstructured) string {
	name, _, _ := unstructured.NestedString(u.Object, "spec", "template", "spec", "bootstrap", "configRef", "name")
	return name
}

func dataSecretName(u *unstructured.Unstructured) string {
	name, _, _ := unstructured.NestedString(u.Object, "spec", "template", "spec", "bootstrap", "dataSecretName")
	return name
}

// firstFile: the content of the first of spec.files (a config) or spec.template.spec.files (a
// template).
func firstFile(u *unstructured.Unstructured) string {
	files, _, _ := unstructured.NestedSlice(u.Object, "spec", "files")
	if u.GetKind() == framework.KubeadmConfigTemplateGVK.Kind {
		files, _, _ = unstructured.NestedSlice(u.Object, "spec", "template", "spec", "files")
	}
	if len(files) == 0 {
		return ""
	}
	content, _ := files[0].(map[string]any)["content"].(string)
	return content
}

// topologyBringUp: a person applies ClusterClass quick-start and a Cluster of it; CAPI's
// topology controller makes the Cluster's infrastructure cluster and control plane, then (once
// the test's stand-in marked them provisioned and initialized at the Cluster's version) the
// MachineDeployment with its copy of the bootstrap template and the MachinePool with the
// KubeadmConfig made from it; CAPI adopts the config and CABPK writes its join data. Every write
// of the topology controller, of CAPI's other controllers and of CABPK is admitted, none warned.
func (c *testCluster) topologyBringUp(t *testing.T) {
	since := time.Now()
	ns := framework.TopologyNamespace
	c.CreateClusterSecretsIn(t, ns, framework.TopologyCluster)

	// The person's Git checkout: the class, its templates, the Cluster.
	for _, name := range []string{"templates.yaml", "quick-start-workers-a.yaml", "clusterclass.yaml"} {
		framework.Must(t, os.WriteFile(c.Artifacts.Path(name), framework.ReadFile(t, filepath.Join("testdata", "clusterclass", name)), 0o644))
		c.AdmittedWithoutWarning(t, "apply", "-f", name)
	}
	// CAPI's Cluster webhook warns of a Cluster whose class the ClusterClass controller has not
	// reconciled yet (its topology not fully validated): the person waits for the class first.
	c.WaitForIn(t, framework.ClusterClassGVK, ns, topologyClass, time.Minute, "reconciled", func(u *unstructured.Unstructured) bool {
		observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		return observed == u.GetGeneration()
	})
	c.applyTopologyCluster(t, topologyPool)

	c.ProvideTopology(t, ns, framework.TopologyCluster, []string{topologyPool}, 3*time.Minute)
	o := c.topologyObjects(t)
	configName := o.config.GetName()
	config := c.WaitForIn(t, framework.KubeadmConfigGVK, ns, configName, 3*time.Minute, "adopted by the pool, its join data written", func(u *unstructured.Unstructured) bool {
		token, _, _ := unstructured.NestedString(u.Object, framework.TokenPath...)
		secret, _, _ := unstructured.NestedString(u.Object, "status", "dataSecretName")
		return framework.ControlledByPool(u, o.pool.GetName()) && token != "" && secret == configName
	})
	t.Logf("the topology pool's KubeadmConfig as CAPI left it:\n%s", framework.ToYAML(t, []*unstructured.Unstructured{config}))
	if _, owned := config.GetLabels()[framework.TopologyOwnedLabel]; !owned || firstFile(config) != classContent+"\n" {
		t.Errorf("KubeadmConfig %s: labels %v, files[0].content %q; want the label %s and the class template's %q",
			configName, config.GetLabels(), firstFile(config), framework.TopologyOwnedLabel, classContent)
	}
	c.WaitForIn(t, framework.MachinePoolGVK, ns, o.pool.GetName(), 2*time.Minute, "dataSecretName copied from the config", func(u *unstructured.Unstructured) bool {
		return dataSecretName(u) == configName
	})
	c.waitMachineSetOn(t, o.deployment.GetName(), o.template.GetName())
	if _, owned := o.template.GetLabels()[framework.TopologyOwnedLabel]; !owned {
		t.Errorf("KubeadmConfigTemplate %s (the MachineDeployment's) lacks the label %s: %v", o.template.GetName(), framework.TopologyOwnedLabel, o.template.GetLabels())
	}

	// The topology controller's writes, from the audit log: all admitted, none an edit.
	made := map[string]bool{}
	lines := c.topologyWrites(t, since, func(e framework.AuditEvent, note string) {
		if note != "" {
			t.Errorf("the policy found an in-place edit in the topology controller's bring-up write %s: %s", e, note)
		}
		if !e.DryRun() {
			made[e.Resource()] = true
		}
	})
	t.Logf("the topology controller's writes (field manager %s):\n  %s", framework.TopologyFieldManager, strings.Join(lines, "\n  "))
	// The kinds the policy judges (v1.14's topology controller patches the Cluster itself
	// without a field manager of its own, and the audit log holds CAPI's groups only).
	for _, resource := range []string{"machinedeployments", "kubeadmconfigtemplates", "machinepools", "kubeadmconfigs"} {
		if !made[resource] {
			t.Errorf("the audit log shows no write of the topology controller to %s", resource)
		}
	}
	c.checkAdmittedUnwarned(t, since)
	if open := framework.FailedOpen(c.EventsSince(t, since), c.WebhookName()); len(open) > 0 {
		t.Errorf("%d requests were admitted without the policy's answer: first %s", len(open), open[0])
	}
}

// topologyWrites: the topology controller's writes since the time, each checked admitted and
// handed to check with the policy's controller-write audit annotation; one line each, for the
// log.
func (c *testCluster) topologyWrites(t *testing.T, since time.Time, check func(e framework.AuditEvent, note string)) []string {
	t.Helper()
	var lines []string
	for _, e := range c.TopologyWrites(t, since) {
		note := e.Annotations[c.WebhookName()+"/controller-write"]
		kind := "write"
		if e.DryRun() {
			kind = "dry run"
		}
		lines = append(lines, fmt.Sprintf("%-7s %s %s %s -> %d %s", kind, e.Verb, e.Resource(), e.ObjectRef.Name, e.Code(), note))
		if e.Code() >= 300 {
			t.Errorf("the topology controller's %s was not admitted: %s", kind, e)
		}
		check(e, note)
	}
	return lines
}

// applyTopologyCluster: the person applies c2 with the MachinePool topologies named (of class
// default-pool) and MachineDeployment md-0.
func (c *testCluster) applyTopologyCluster(t *testing.T, pools ...string) {
	t.Helper()
	classes := map[string]string{}
	for _, pool := range pools {
		classes[pool] = "default-pool"
	}
	cluster := c.TopologyClusterManifest(framework.TopologyNamespace, framework.TopologyCluster, topologyClass, "v1.34.3",
		map[string]string{topologyDeployment: "default-worker"}, classes)
	framework.Must(t, os.WriteFile(c.Artifacts.Path("c2.yaml"), []byte(cluster), 0o644))
	c.AdmittedWithoutWarning(t, "apply", "-f", "c2.yaml")
}

// waitMachineSetOn waits for a MachineSet of the MachineDeployment on the bootstrap template.
func (c *testCluster) waitMachineSetOn(t *testing.T, deployment, template string) *unstructured.Unstructured {
	t.Helper()
	var set *unstructured.Unstructured
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		for _, ms := range c.ListIn(t, framework.MachineSetGVK, framework.TopologyNamespace, client.MatchingLabels{"cluster.x-k8s.io/deployment-name": deployment}) {
			if bootstrapRef(&ms) == template {
				set = ms.DeepCopy()
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no MachineSet of MachineDeployment %s on KubeadmConfigTemplate %s after 2m (log: %s)", deployment, template, c.CAPILog)
	}
	return set
}

// topologyClassChange: the person changes the workers' bootstrap as CAPI's book says, a new
// template with the new file and the class pointed at it. The topology controller then patches
// the pool's KubeadmConfig in place, keeping its name (cluster-api #10496: updateMachinePool ->
// reconcileReferencedObject, a server-side apply), and rotates the MachineDeployment's template
// (a new copy, the MachineDeployment repointed, a new MachineSet). Each write is admitted: the
// in-place patch with the policy's controller-write audit annotation naming the changed path.
// The pool's spec stays as it was (configRef, dataSecretName): CAPI tells the infrastructure
// provider nothing; CABPK writes the new file into the same data Secret at its next token
// rotation.
func (c *testCluster) topologyClassChange(t *testing.T) {
	since := time.Now()
	ns := framework.TopologyNamespace
	before := c.topologyObjects(t)
	configName, oldTemplate := before.config.GetName(), before.template.GetName()
	secretName, _, _ := unstructured.NestedString(before.config.Object, "status", "dataSecretName")
	secretBefore := c.secretIn(t, ns, secretName)
	if !strings.Contains(string(secretBefore.Data["value"]), classContent) {
		t.Fatalf("the pool's data Secret %s does not carry the class's %q", secretName, classContent)
	}

	changed := c.classPointedAtNewTemplate(t)
	c.classChangeConfigAndTemplate(t, before, changed)
	c.classChangeDataSecret(t, secretName, secretBefore, changed)
	c.classChangePoolUnchanged(t, before, secretName)
	c.classChangeAudited(t, since, configName)
	c.classChangeOldTemplateDeleted(t, since, oldTemplate)
	c.checkAdmittedUnwarned(t, since)
}

// classPointedAtNewTemplate: the new template, and the class pointed at it, applied from the
// person's checkout; the time the class changed.
func (c *testCluster) classPointedAtNewTemplate(t *testing.T) (changed time.Time) {
	current := string(framework.ReadFile(t, c.Artifacts.Path("quick-start-workers-a.yaml")))
	next := strings.NewReplacer("name: quick-start-workers-a", "name: quick-start-workers-b", classContent, changedContent).Replace(current)
	framework.Must(t, os.WriteFile(c.Artifacts.Path("quick-start-workers-b.yaml"), []byte(next), 0o644))
	class := string(framework.ReadFile(t, c.Artifacts.Path("clusterclass.yaml")))
	framework.Must(t, os.WriteFile(c.Artifacts.Path("clusterclass.yaml"), []byte(strings.ReplaceAll(class, "name: quick-start-workers-a", "name: quick-start-workers-b")), 0o644))
	c.AdmittedWithoutWarning(t, "apply", "-f", "quick-start-workers-b.yaml")
	c.AdmittedWithoutWarning(t, "apply", "-f", "clusterclass.yaml")
	return time.Now()
}

// classChangeConfigAndTemplate: after the class changed, the pool's config is the same object,
// patched; the MachineDeployment's template is rotated, and a new MachineSet runs on it.
func (c *testCluster) classChangeConfigAndTemplate(t *testing.T, before topologyObjects, changed time.Time) {
	ns := framework.TopologyNamespace
	configName, oldTemplate := before.config.GetName(), before.template.GetName()
	config := c.WaitForIn(t, framework.KubeadmConfigGVK, ns, configName, 2*time.Minute, "patched with the new template's file", func(u *unstructured.Unstructured) bool {
		return firstFile(u) == changedContent+"\n"
	})
	t.Logf("the topology controller patched KubeadmConfig %s in place %s after the class changed", configName, time.Since(changed).Round(time.Second))
	if config.GetUID() != before.config.GetUID() {
		t.Errorf("KubeadmConfig %s was re-created (uid %s -> %s), not patched", configName, before.config.GetUID(), config.GetUID())
	}
	for _, line := range framework.LogLines(t, c.CAPILog, "Patching KubeadmConfig", configName) {
		t.Logf("CAPI's log: %s", line)
	}

	// The MachineDeployment's template: rotated, and a new MachineSet on it.
	deployment := c.WaitForIn(t, framework.MachineDeploymentGVK, ns, before.deployment.GetName(), 2*time.Minute, "pointed at a new template", func(u *unstructured.Unstructured) bool {
		return bootstrapRef(u) != oldTemplate
	})
	newTemplate := bootstrapRef(deployment)
	if tpl := c.GetIn(t, framework.KubeadmConfigTemplateGVK, ns, newTemplate); firstFile(tpl) != changedContent+"\n" {
		t.Errorf("the MachineDeployment's new template %s holds %q, want %q", newTemplate, firstFile(tpl), changedContent)
	}
	set := c.waitMachineSetOn(t, deployment.GetName(), newTemplate)
	t.Logf("MachineDeployment %s: template %s -> %s, MachineSet %s", deployment.GetName(), oldTemplate, newTemplate, set.GetName())
}

// classChangeDataSecret: the pool's data Secret keeps its name and object, and carries the new
// file once CABPK rotates the token.
func (c *testCluster) classChangeDataSecret(t *testing.T, secretName string, secretBefore *corev1.Secret, changed time.Time) {
	ns := framework.TopologyNamespace
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 2*time.Minute, true, func(context.Context) (bool, error) {
		return strings.Contains(string(c.secretIn(t, ns, secretName).Data["value"]), changedContent), nil
	})
	if err != nil {
		t.Errorf("the pool's data Secret %s never carried %q (CABPK log: %s)", secretName, changedContent, c.CABPKLog)
	} else {
		t.Logf("CABPK wrote the new file into data Secret %s %s after the class changed", secretName, time.Since(changed).Round(time.Second))
	}
	if s := c.secretIn(t, ns, secretName); s.UID != secretBefore.UID {
		t.Errorf("data Secret %s was re-created (uid %s -> %s)", secretName, secretBefore.UID, s.UID)
	}
}

// classChangePoolUnchanged: nothing changed in the pool's spec with the class, so nothing rolls
// out: the same config and data Secret named.
func (c *testCluster) classChangePoolUnchanged(t *testing.T, before topologyObjects, secretName string) {
	configName := before.config.GetName()
	pool := c.GetIn(t, framework.MachinePoolGVK, framework.TopologyNamespace, before.pool.GetName())
	b, _, _ := unstructured.NestedFieldNoCopy(before.pool.Object, "spec")
	a, _, _ := unstructured.NestedFieldNoCopy(pool.Object, "spec")
	if !framework.JSONEqual(a, b) {
		t.Errorf("MachinePool %s's spec changed with the class:\nbefore: %v\nafter:  %v", pool.GetName(), b, a)
	}
	if bootstrapRef(pool) != configName || dataSecretName(pool) != secretName {
		t.Errorf("MachinePool %s names config %s and data Secret %s, want %s and %s as before", pool.GetName(), bootstrapRef(pool), dataSecretName(pool), configName, secretName)
	}
}

// classChangeAudited: in the audit log since, the topology controller's writes, each admitted;
// its one patch of the config (configName) annotated with the path it changed; none of the pool.
func (c *testCluster) classChangeAudited(t *testing.T, since time.Time, configName string) {
	patched := 0
	lines := c.topologyWrites(t, since, func(e framework.AuditEvent, note string) {
		if e.DryRun() {
			return
		}
		if e.Resource() == "kubeadmconfigs" && e.ObjectRef.Name == configName {
			patched++
			if !strings.Contains(note, "would have rejected: [spec.files[0].content: Forbidden: changed]") {
				t.Errorf("the topology controller's patch of %s carries controller-write %q, want the path spec.files[0].content", configName, note)
			}
		}
		if e.Resource() == "machinepools" {
			t.Errorf("the topology controller wrote the MachinePool: %s", e)
		}
	})
	t.Logf("the topology controller's writes after the class changed:\n  %s", strings.Join(lines, "\n  "))
	if patched != 1 {
		t.Errorf("the audit log shows %d patches of the topology controller to KubeadmConfig %s, want 1", patched, configName)
	}
}

// classChangeOldTemplateDeleted: the rotated-out template copy (oldTemplate), once no MachineSet
// uses it, is deleted by CAPI, the DELETE admitted.
func (c *testCluster) classChangeOldTemplateDeleted(t *testing.T, since time.Time, oldTemplate string) {
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, time.Minute, true, func(context.Context) (bool, error) {
		return !slices.Contains(c.namesIn(t, framework.KubeadmConfigTemplateGVK, framework.TopologyNamespace), oldTemplate), nil
	})
	if err != nil {
		t.Errorf("KubeadmConfigTemplate %s, rotated out, is still there after a minute", oldTemplate)
	}
	deleted := false
	for _, e := range c.EventsSince(t, since) {
		if e.Verb == "delete" && e.Resource() == "kubeadmconfigtemplates" && e.ObjectRef.Name == oldTemplate && e.Code() < 300 {
			deleted = true
			t.Logf("deleted: %s", e)
			if e.User.Username != c.CAPIManager {
				t.Errorf("KubeadmConfigTemplate %s was deleted by %s, not CAPI", oldTemplate, e.User.Username)
			}
		}
	}
	if !deleted {
		t.Errorf("the audit log shows no admitted DELETE of KubeadmConfigTemplate %s", oldTemplate)
	}
}

// topologyPersonEdits: a person's kubectl edits of what the topology controller owns. The
// pool's KubeadmConfig is in use by its MachinePool: refused, the topology label exempting no one
// (README); the MachineDeployment's template copy: refused, naming the ClusterClass's template
// as what to change (rule 8); the class's own template: admitted with the warning that the
// class's MachineDeployments roll and its MachinePools do not (rule 8), a server-side dry run here, so nothing changes.
func (c *testCluster) topologyPersonEdits(t *testing.T) {
	since := time.Now()
	ns := framework.TopologyNamespace
	o := c.topologyObjects(t)
	const edited = "vm.max_map_count = 524288\n"
	files := fmt.Sprintf(`[{"path":"/etc/sysctl.d/90-fleet.conf","content":%q}]`, edited)

	r := c.Person.Run(t, "patch", "kubeadmconfig", o.config.GetName(), "-n", ns, "--type", "merge", "-p", `{"spec":{"files":`+files+`}}`)
	if r.Err == nil {
		t.Errorf("the person's edit of the topology pool's KubeadmConfig %s was admitted", o.config.GetName())
	}
	for _, want := range []string{
		fmt.Sprintf("admission webhook %q denied the request", c.WebhookName()),
		"spec.files[0].content: Forbidden: changed",
		fmt.Sprintf("in use by MachinePool %s/%s, which its Cluster's topology manages", ns, o.pool.GetName()),
		"Change the ClusterClass's bootstrap template instead",
		"add a new MachinePool topology to the Cluster and remove the old one",
		"Rotating configRef by hand stops the topology controller for the whole Cluster",
	} {
		if !strings.Contains(r.Stderr, want) {
			t.Errorf("kubectl's stderr for the config lacks %q:\n%s", want, r.Stderr)
		}
	}
	// Not the rotation it tells for a pool of the person's own: topologyPoolRotation shows why.
	if m := suggestedName.FindStringSubmatch(r.Stderr); m != nil {
		t.Errorf("the refusal for the topology pool's config suggests a rotation to %q:\n%s", m[1], r.Stderr)
	}

	r = c.Person.Run(t, "patch", "kubeadmconfigtemplate", o.template.GetName(), "-n", ns, "--type", "merge", "-p", `{"spec":{"template":{"spec":{"files":`+files+`}}}}`)
	if r.Err == nil {
		t.Errorf("the person's edit of the MachineDeployment's topology template %s was admitted", o.template.GetName())
	}
	for _, want := range []string{
		fmt.Sprintf("admission webhook %q denied the request", c.WebhookName()),
		"spec.template.spec.files[0].content: Forbidden: changed",
		"This KubeadmConfigTemplate is a Cluster's copy that CAPI's topology controller manages (label topology.cluster.x-k8s.io/owned): change the ClusterClass's template instead",
	} {
		if !strings.Contains(r.Stderr, want) {
			t.Errorf("kubectl's stderr for the template lacks %q:\n%s", want, r.Stderr)
		}
	}

	class := c.GetIn(t, framework.ClusterClassGVK, ns, topologyClass)
	pools, _, _ := unstructured.NestedSlice(class.Object, "spec", "workers", "machinePools")
	classTemplate, _, _ := unstructured.NestedString(pools[0].(map[string]any), "bootstrap", "templateRef", "name")
	r = c.Person.Run(t, "patch", "kubeadmconfigtemplate", classTemplate, "-n", ns, "--type", "merge", "--dry-run=server", "-p", `{"spec":{"template":{"spec":{"files":`+files+`}}}}`)
	if r.Err != nil {
		t.Errorf("the person's edit of the class's template %s was refused: %v\n%s", classTemplate, r.Err, r.Stderr)
	}
	if want := fmt.Sprintf("Warning: ClusterClass %s uses this template: MachineDeployments roll at next reconcile, MachinePools not rotated", topologyClass); !strings.Contains(r.Stderr, want) {
		t.Errorf("kubectl's stderr for the class's template lacks %q:\n%s", want, r.Stderr)
	}

	// Nothing changed.
	after := c.topologyObjects(t)
	for _, pair := range [][2]*unstructured.Unstructured{{o.config, after.config}, {o.template, after.template}} {
		if firstFile(pair[0]) != firstFile(pair[1]) || pair[0].GetUID() != pair[1].GetUID() {
			t.Errorf("%s %s changed although the edit was refused: %q -> %q", pair[0].GetKind(), pair[0].GetName(), firstFile(pair[0]), firstFile(pair[1]))
		}
	}
	c.CheckPersonAdmittedExceptEdits(t, since)
	c.CheckControllersAdmitted(t, since)
}

func (c *testCluster) secretIn(t *testing.T, namespace, name string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	framework.Must(t, c.CP.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, s))
	return s
}

func (c *testCluster) namesIn(t *testing.T, gvk schema.GroupVersionKind, namespace string) []string {
	t.Helper()
	var names []string
	for _, u := range c.ListIn(t, gvk, namespace) {
		names = append(names, u.GetName())
	}
	return names
}

// topologyPoolRotation: the person does to the topology pool what the policy's refusal tells
// for a pool of their own, and warns against here: a new KubeadmConfig, the pool's configRef
// pointed at it. The policy admits both (rule 1), and CAPI moves the pool's dataSecretName to
// it; but the topology controller refuses to reconcile the Cluster
// while its pool names a config it did not make (CAPI's current state: "... is not topology
// owned"), until the person points the pool back. This is what the refusal's "stops the
// topology controller" rests on.
func (c *testCluster) topologyPoolRotation(t *testing.T) {
	since := time.Now()
	ns := framework.TopologyNamespace
	o := c.topologyObjects(t)
	current := o.config.GetName()

	// The person's edit, refused, warns against the rotation; the person does it anyway.
	mine := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"files":             []any{map[string]any{"path": "/etc/sysctl.d/90-fleet.conf", "content": "vm.max_map_count = 2097152\n"}},
		"joinConfiguration": map[string]any{"nodeRegistration": map[string]any{"kubeletExtraArgs": []any{map[string]any{"name": "max-pods", "value": "110"}}}},
	}}}
	mine.SetGroupVersionKind(framework.KubeadmConfigGVK)
	mine.SetNamespace(ns)
	mine.SetName(current)
	framework.Must(t, os.WriteFile(c.Artifacts.Path("topology-config-edited.yaml"), framework.ToYAML(t, []*unstructured.Unstructured{mine}), 0o644))
	r := c.Person.Run(t, "apply", "--server-side", "--force-conflicts", "-f", "topology-config-edited.yaml")
	if r.Err == nil || !strings.Contains(r.Stderr, "Rotating configRef by hand stops the topology controller") {
		t.Fatalf("the edit of %s was not refused with the topology's remediation: %v\n%s", current, r.Err, r.Stderr)
	}
	name := current + "-mine"
	mine.SetName(name)
	framework.Must(t, os.WriteFile(c.Artifacts.Path(name+".yaml"), framework.ToYAML(t, []*unstructured.Unstructured{mine}), 0o644))
	c.AdmittedWithoutWarning(t, "create", "-f", name+".yaml")
	c.AdmittedWithoutWarning(t, "patch", "machinepool", o.pool.GetName(), "-n", ns, "--type", "merge",
		"-p", fmt.Sprintf(`{"spec":{"template":{"spec":{"bootstrap":{"configRef":{"name":%q}}}}}}`, name))

	// CAPI rolls it out; the topology controller stops.
	c.WaitForIn(t, framework.MachinePoolGVK, ns, o.pool.GetName(), 2*time.Minute, "moved to the person's config's data Secret", func(u *unstructured.Unstructured) bool {
		return bootstrapRef(u) == name && dataSecretName(u) == name
	})
	notOwned := fmt.Sprintf("KubeadmConfig %s/%s referenced from MachinePool %s/%s is not topology owned", ns, name, ns, o.pool.GetName())
	c.waitTopologyReconciled(t, "False", notOwned)

	// The person points the pool back; the topology controller reconciles again.
	c.AdmittedWithoutWarning(t, "patch", "machinepool", o.pool.GetName(), "-n", ns, "--type", "merge",
		"-p", fmt.Sprintf(`{"spec":{"template":{"spec":{"bootstrap":{"configRef":{"name":%q}}}}}}`, current))
	c.WaitForIn(t, framework.MachinePoolGVK, ns, o.pool.GetName(), 2*time.Minute, "back on its own config's data Secret", func(u *unstructured.Unstructured) bool {
		return bootstrapRef(u) == current && dataSecretName(u) == current
	})
	c.waitTopologyReconciled(t, "True", "")
	c.CheckPersonAdmittedExceptEdits(t, since)
	c.CheckControllersAdmitted(t, since)
	c.CheckControllersJudged(t, true)
}

// waitTopologyReconciled waits for c2's TopologyReconciled condition to have the status, its
// message holding the text.
func (c *testCluster) waitTopologyReconciled(t *testing.T, status, message string) {
	t.Helper()
	c.WaitForIn(t, framework.ClusterGVK, framework.TopologyNamespace, framework.TopologyCluster, 2*time.Minute,
		fmt.Sprintf("TopologyReconciled %s (%q)", status, message), func(u *unstructured.Unstructured) bool {
			conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, c := range conditions {
				condition, _ := c.(map[string]any)
				if condition["type"] == "TopologyReconciled" {
					text, _ := condition["message"].(string)
					return condition["status"] == status && strings.Contains(text, message)
				}
			}
			return false
		})
}

// topologyPoolReplacement: what rolls a class's bootstrap change out to a topology pool's
// instances: a second MachinePool topology, made by the topology controller from the class as
// it is now (its config and data Secret hold the class's template), then the old entry removed,
// and the topology controller deletes the old pool, CAPI its config. Every write admitted, none
// warned.
func (c *testCluster) topologyPoolReplacement(t *testing.T) {
	since := time.Now()
	ns := framework.TopologyNamespace
	old := c.topologyObjects(t)
	oldTopology := old.pool.GetLabels()[framework.TopologyPoolLabel]
	replacement := "pool-1"
	if oldTopology == replacement {
		replacement = topologyPool
	}
	class := c.GetIn(t, framework.ClusterClassGVK, ns, topologyClass)
	pools, _, _ := unstructured.NestedSlice(class.Object, "spec", "workers", "machinePools")
	classTemplate, _, _ := unstructured.NestedString(pools[0].(map[string]any), "bootstrap", "templateRef", "name")
	want := firstFile(c.GetIn(t, framework.KubeadmConfigTemplateGVK, ns, classTemplate))

	c.applyTopologyCluster(t, oldTopology, replacement)
	made := c.ProvideTopology(t, ns, framework.TopologyCluster, []string{replacement}, 2*time.Minute)
	pool := made[replacement]
	config := c.WaitForIn(t, framework.KubeadmConfigGVK, ns, bootstrapRef(pool), 2*time.Minute, "adopted by the new pool, its data Secret written", func(u *unstructured.Unstructured) bool {
		secret, _, _ := unstructured.NestedString(u.Object, "status", "dataSecretName")
		return framework.ControlledByPool(u, pool.GetName()) && secret != ""
	})
	secret, _, _ := unstructured.NestedString(config.Object, "status", "dataSecretName")
	if got := firstFile(config); got != want || !strings.Contains(string(c.secretIn(t, ns, secret).Data["value"]), strings.TrimSpace(want)) {
		t.Errorf("the new pool's config %s holds %q (data Secret %s), want the class template %s's %q", config.GetName(), got, secret, classTemplate, want)
	}

	c.applyTopologyCluster(t, replacement)
	// The old pool goes, and every config it owned: its own (CAPI deletes it), any other
	// (topologyPoolRotation's, rotated out: the garbage collector).
	owned := func() []string {
		var names []string
		for _, config := range c.ListIn(t, framework.KubeadmConfigGVK, ns) {
			for _, ref := range config.GetOwnerReferences() {
				if ref.Kind == "MachinePool" && ref.UID == old.pool.GetUID() {
					names = append(names, config.GetName())
				}
			}
		}
		return names
	}
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		return !slices.Contains(c.namesIn(t, framework.MachinePoolGVK, ns), old.pool.GetName()) && len(owned()) == 0, nil
	})
	if err != nil {
		t.Fatalf("MachinePool %s or its configs %v still there 2m after its topology was removed (log: %s)", old.pool.GetName(), owned(), c.CAPILog)
	}
	var deletes []string
	for _, e := range c.EventsSince(t, since) {
		if e.Verb == "delete" && e.Code() < 300 && (e.Resource() == "machinepools" || e.Resource() == "kubeadmconfigs") {
			deletes = append(deletes, fmt.Sprintf("%s %s %s", e.User.Username, e.Resource(), e.ObjectRef.Name))
		}
	}
	t.Logf("deleted:\n  %s", strings.Join(deletes, "\n  "))
	if !slices.Contains(deletes, fmt.Sprintf("%s machinepools %s", c.CAPIManager, old.pool.GetName())) {
		t.Errorf("the audit log shows no admitted DELETE of MachinePool %s by the topology controller", old.pool.GetName())
	}
	c.CheckPersonAdmitted(t, since)
	c.CheckControllersAdmitted(t, since)
	c.CheckControllersJudged(t, true)
	c.CheckNoWarningsTo(t, c.CAPILog)
}

// checkAdmittedUnwarned: since then, every write of the person and of CAPI's controllers was
// admitted, the controllers' judged by the policy, and neither CAPI's manager nor CABPK got a
// warning of the policy.
func (c *testCluster) checkAdmittedUnwarned(t *testing.T, since time.Time) {
	t.Helper()
	c.CheckPersonAdmitted(t, since)
	c.CheckControllersAdmitted(t, since)
	c.CheckControllersJudged(t, true)
	c.CheckNoWarningsTo(t, c.CAPILog)
	c.CheckNoWarningsTo(t, c.CABPKLog)
}
