package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var (
	DockerMachinePoolGVK = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta2", Kind: "DockerMachinePool"}
	DockerMachineGVK     = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta2", Kind: "DockerMachine"}
	MachineGVK           = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Machine"}
	// TestMachineGVK: the infrastructure machine of a MachineDeployment's or MachineSet's
	// Machine, which CAPI clones from a TestMachineTemplate (testdata/infrastructure.yaml).
	TestMachineGVK = schema.GroupVersionKind{Group: "infrastructure.cluster-test.rollout-policy.dev", Version: "v1alpha1", Kind: "TestMachine"}
)

const (
	// LaunchedWithAnnotation records, on an instance's DockerMachine, the bootstrap data Secret
	// the instance booted with: what only the cloud side knows (CAPA's bootstrap-data-hash tag,
	// CAPZ's custom-data hash). No CAPI object says it; only the test reads it, never the CLI.
	LaunchedWithAnnotation = "cluster-test.rollout-policy.dev/launched-with-data-secret"
	// instanceFinalizer holds an instance's DockerMachine until the stand-in has terminated it.
	instanceFinalizer = "cluster-test.rollout-policy.dev/instance"
	// poolNameLabel and clusterNameLabel select a pool's infrastructure machines and Machines.
	poolNameLabel    = "cluster.x-k8s.io/pool-name"
	clusterNameLabel = "cluster.x-k8s.io/cluster-name"
)

// NoRollInfrastructure stands in for an infrastructure provider whose MachinePool takes new
// bootstrap data for new instances only: CAPD's DockerMachinePool, as CAPZ's AzureMachinePool
// and CAPOCI's OCIMachinePool (docs/infrastructure.md). It acts on the DockerMachinePools of
// one namespace (testdata/docker-infrastructure.yaml), polling the management cluster as
// CAPD's controller reconciles them:
//
//   - it keeps the owner MachinePool's spec.replicas instances, waiting, as CAPD does, until
//     CAPI copied a data Secret into the pool's spec.template.spec.bootstrap.dataSecretName;
//   - an instance is launched with the pool's dataSecretName as it is at that moment, recorded
//     in the DockerMachine's LaunchedWithAnnotation; later changes of the pool's data Secret
//     reach no existing instance;
//   - each instance is a DockerMachine labelled with the pool and Cluster names (CAPI's
//     MachinePool controller makes its MachinePool Machine, the pool's
//     status.infrastructureMachineKind naming the kind), its spec.providerID in the pool's
//     spec.providerIDList, and a Node of that providerID in the workload cluster (this API
//     server), registered and heartbeated as a kubelet does (kubelet.go): CAPI gives the
//     Machine its nodeRef and it goes Ready;
//   - a DockerMachine being deleted (CAPI deletes it after draining its Machine's Node) is the
//     instance's termination: its Node's heartbeat stops, its finalizer is removed, and the
//     pool, one instance short, launches a new one; more instances than replicas: the Machines
//     of the newest are deleted, as CAPD scales down;
//   - a TestMachine (the infrastructure machine CAPI makes for a MachineDeployment's or
//     MachineSet's Machine) is booted once its Machine has bootstrap data, as CAPD boots a
//     DockerMachine: its providerID set, its Node registered and heartbeated, provisioned;
//     deleted, it is terminated as a DockerMachine is.
//
// Its writes are the API server's admin's, logged in infrastructure.log.
type NoRollInfrastructure struct {
	namespace string
	client    client.Client
	cs        kubernetes.Interface
	log       *os.File
	done      chan struct{}
	wg        sync.WaitGroup

	mu     sync.Mutex
	passes int
	// nodes: the Nodes of the running instances, heartbeated.
	nodes    map[string]bool
	launched int
	// hold: new instances register no Node (their Machines never go Ready) until released;
	// held: those instances' addresses, by name.
	hold bool
	held map[string]string
}

// HoldNotReady makes the instances launched from now on register no Node, so that their
// Machines never become Ready, as an instance that fails to boot; off, the held ones register
// theirs at the next pass.
func (s *NoRollInfrastructure) HoldNotReady(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold = on
}

// release registers the Nodes of the held instances, once holding is off.
func (s *NoRollInfrastructure) release(ctx context.Context) {
	s.mu.Lock()
	if s.hold || len(s.held) == 0 {
		s.mu.Unlock()
		return
	}
	held := s.held
	s.held = map[string]string{}
	s.mu.Unlock()
	for name, ip := range held {
		if err := s.registerInstanceNode(ctx, name, ip); err != nil {
			s.logf("release %s: %v", name, err)
			s.mu.Lock()
			s.held[name] = ip
			s.mu.Unlock()
			continue
		}
		s.logf("released %s: its Node registered", name)
	}
}

// NoRollPoolManifest is a person's manifest of MachinePool pool in namespace, of Cluster
// cluster, with replicas instances on the stand-in's DockerMachinePool of the same name, its
// configRef naming the bootstrap config configName of configGroup's configKind.
func NoRollPoolManifest(pool, namespace, cluster string, replicas int, configGroup, configKind, configName string) string {
	return fmt.Sprintf(`apiVersion: cluster.x-k8s.io/v1beta2
kind: MachinePool
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  clusterName: %[3]s
  replicas: %[4]d
  template:
    spec:
      clusterName: %[3]s
      version: v1.34.3
      bootstrap:
        configRef: {apiGroup: %[5]s, kind: %[6]s, name: %[7]s}
      infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: DockerMachinePool, name: %[1]s}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: DockerMachinePool
metadata: {name: %[1]s, namespace: %[2]s}
spec: {template: {}}
`, pool, namespace, cluster, replicas, configGroup, configKind, configName)
}

// StartNoRollInfrastructure installs the DockerMachinePool and DockerMachine CRDs (once per
// management cluster) and runs the stand-in on namespace's pools until t ends.
func (m *ManagementCluster) StartNoRollInfrastructure(t *testing.T, namespace string) *NoRollInfrastructure {
	t.Helper()
	crds := ReadObjects(t, ReadFile(t, "testdata/docker-infrastructure.yaml"))
	var names []string
	for _, crd := range crds {
		names = append(names, crd.GetName())
		existing := &unstructured.Unstructured{}
		existing.SetGroupVersionKind(crd.GroupVersionKind())
		if err := m.CP.Client.Get(context.Background(), client.ObjectKeyFromObject(crd), existing); apierrors.IsNotFound(err) {
			m.CP.CreateAll(t, []*unstructured.Unstructured{crd})
		}
	}
	WaitEstablished(t, m.CP, names)
	cfg := rest.CopyConfig(m.CP.admin)
	cfg.QPS, cfg.Burst = 1000, 1000
	c, err := client.New(cfg, client.Options{})
	Must(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	Must(t, err)
	s := &NoRollInfrastructure{
		namespace: namespace, client: c, cs: cs, log: m.Artifacts.create(t, "infrastructure-"+namespace+".log"),
		done: make(chan struct{}), nodes: map[string]bool{}, held: map[string]string{},
	}
	s.wg.Add(1)
	go s.run()
	t.Cleanup(func() {
		close(s.done)
		s.wg.Wait()
	})
	return s
}

func (s *NoRollInfrastructure) logf(format string, args ...any) {
	fmt.Fprintf(s.log, "%s %s\n", time.Now().UTC().Format(time.RFC3339Nano), fmt.Sprintf(format, args...))
}

// run: the pools reconciled every 250 ms, the Nodes' Leases renewed every 10 s.
func (s *NoRollInfrastructure) run() {
	defer s.wg.Done()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	renewed := time.Now()
	for {
		select {
		case <-s.done:
			return
		case <-tick.C:
		}
		ctx := context.Background()
		s.release(ctx)
		if err := s.reconcile(ctx); err != nil {
			s.logf("reconcile: %v", err)
		}
		if time.Since(renewed) > 10*time.Second {
			s.mu.Lock()
			var nodes []string
			for node := range s.nodes {
				nodes = append(nodes, node)
			}
			s.mu.Unlock()
			for _, node := range nodes {
				if err := renewLease(ctx, s.cs, node); err != nil {
					s.logf("renew lease of node %s: %v", node, err)
				}
			}
			renewed = time.Now()
		}
		s.mu.Lock()
		s.passes++
		s.mu.Unlock()
	}
}

// Synced returns once the stand-in has reconciled every pool twice since the call: what it does
// with what the cluster holds now is done.
func (s *NoRollInfrastructure) Synced(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	start := s.passes
	s.mu.Unlock()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, false, func(context.Context) (bool, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.passes >= start+2, nil
	})
	if err != nil {
		t.Fatalf("the infrastructure stand-in made no two passes in a minute (log: %s)", s.log.Name())
	}
}

func (s *NoRollInfrastructure) reconcile(ctx context.Context) error {
	pools := &unstructured.UnstructuredList{}
	pools.SetGroupVersionKind(DockerMachinePoolGVK.GroupVersion().WithKind("DockerMachinePoolList"))
	if err := s.client.List(ctx, pools, client.InNamespace(s.namespace)); err != nil {
		return err
	}
	for i := range pools.Items {
		if err := s.reconcilePool(ctx, &pools.Items[i]); err != nil {
			s.logf("pool %s: %v", pools.Items[i].GetName(), err)
		}
	}
	return s.reconcileMachines(ctx)
}

// reconcileMachines boots the TestMachines whose Machine has bootstrap data, and terminates
// the deleted ones.
func (s *NoRollInfrastructure) reconcileMachines(ctx context.Context) error {
	infra := &unstructured.UnstructuredList{}
	infra.SetGroupVersionKind(TestMachineGVK.GroupVersion().WithKind("TestMachineList"))
	if err := s.client.List(ctx, infra, client.InNamespace(s.namespace)); err != nil {
		return err
	}
	if len(infra.Items) == 0 {
		return nil
	}
	machines := &unstructured.UnstructuredList{}
	machines.SetGroupVersionKind(MachineGVK.GroupVersion().WithKind("MachineList"))
	if err := s.client.List(ctx, machines, client.InNamespace(s.namespace)); err != nil {
		return err
	}
	secretOf := map[string]string{}
	for _, m := range machines.Items {
		name, _, _ := unstructured.NestedString(m.Object, "spec", "infrastructureRef", "name")
		secretOf[name], _, _ = unstructured.NestedString(m.Object, "spec", "bootstrap", "dataSecretName")
	}
	for i := range infra.Items {
		tm := &infra.Items[i]
		if tm.GetDeletionTimestamp() != nil {
			if err := s.terminate(ctx, tm); err != nil {
				s.logf("terminate %s: %v", tm.GetName(), err)
			}
			continue
		}
		if id, _, _ := unstructured.NestedString(tm.Object, "spec", "providerID"); id != "" || secretOf[tm.GetName()] == "" {
			continue
		}
		if err := s.boot(ctx, tm, secretOf[tm.GetName()]); err != nil {
			s.logf("boot %s: %v", tm.GetName(), err)
		}
	}
	return nil
}

// boot starts the instance of a Machine's TestMachine with the Machine's data Secret.
func (s *NoRollInfrastructure) boot(ctx context.Context, tm *unstructured.Unstructured, secret string) error {
	s.mu.Lock()
	s.launched++
	n := s.launched
	s.mu.Unlock()
	name := tm.GetName()
	ip := fmt.Sprintf("10.1.%d.%d", n/250, n%250+1)
	if err := s.registerInstanceNode(ctx, name, ip); err != nil {
		return err
	}
	finalizers := append(slices.Clone(tm.GetFinalizers()), instanceFinalizer)
	if err := s.mergePatch(ctx, tm, false, map[string]any{
		"metadata": map[string]any{"finalizers": finalizers, "annotations": map[string]any{LaunchedWithAnnotation: secret}},
		"spec":     map[string]any{"providerID": instanceProviderID(name)},
	}); err != nil {
		return err
	}
	if err := s.mergePatch(ctx, tm, true, map[string]any{"status": map[string]any{
		"initialization": map[string]any{"provisioned": true},
		// CAPI v1.12 reads an infrastructure machine's readiness from status.ready.
		"ready":     true,
		"addresses": []any{map[string]any{"type": "InternalIP", "address": ip}, map[string]any{"type": "Hostname", "address": name}},
	}}); err != nil {
		return err
	}
	s.logf("booted %s (%s) with data secret %s", name, instanceProviderID(name), secret)
	return nil
}

func (s *NoRollInfrastructure) reconcilePool(ctx context.Context, pool *unstructured.Unstructured) error {
	if pool.GetDeletionTimestamp() != nil {
		return nil
	}
	owner := ""
	for _, ref := range pool.GetOwnerReferences() {
		if ref.Kind == "MachinePool" {
			owner = ref.Name
		}
	}
	if owner == "" {
		return nil // CAPI's MachinePool controller has not taken it on yet
	}
	mp := &unstructured.Unstructured{}
	mp.SetGroupVersionKind(MachinePoolGVK)
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: owner}, mp); err != nil {
		return err
	}
	secret, _, _ := unstructured.NestedString(mp.Object, "spec", "template", "spec", "bootstrap", "dataSecretName")
	if secret == "" {
		return nil // as CAPD: no instance before the pool has bootstrap data
	}
	replicas, found, _ := unstructured.NestedInt64(mp.Object, "spec", "replicas")
	if !found {
		replicas = 1
	}
	cluster, _, _ := unstructured.NestedString(mp.Object, "spec", "clusterName")

	machines := &unstructured.UnstructuredList{}
	machines.SetGroupVersionKind(DockerMachineGVK.GroupVersion().WithKind("DockerMachineList"))
	if err := s.client.List(ctx, machines, client.InNamespace(s.namespace), client.MatchingLabels{poolNameLabel: owner, clusterNameLabel: cluster}); err != nil {
		return err
	}
	var live []*unstructured.Unstructured
	for i := range machines.Items {
		dm := &machines.Items[i]
		if dm.GetDeletionTimestamp() != nil {
			if err := s.terminate(ctx, dm); err != nil {
				s.logf("terminate %s: %v", dm.GetName(), err)
			}
			continue
		}
		live = append(live, dm)
	}
	for int64(len(live)) < replicas {
		dm, err := s.launch(ctx, pool, owner, cluster, secret)
		if err != nil {
			return fmt.Errorf("launch: %w", err)
		}
		live = append(live, dm)
	}
	if extra := int64(len(live)) - replicas; extra > 0 {
		sort.SliceStable(live, func(i, j int) bool {
			return live[i].GetCreationTimestamp().Time.Before(live[j].GetCreationTimestamp().Time)
		})
		for _, dm := range live[len(live)-int(extra):] {
			s.deleteMachineOf(ctx, dm)
		}
		live = live[:len(live)-int(extra)]
	}

	var providerIDs []any
	var ids []string
	for _, dm := range live {
		id, _, _ := unstructured.NestedString(dm.Object, "spec", "providerID")
		ids = append(ids, id)
	}
	for _, id := range Sorted(ids) {
		providerIDs = append(providerIDs, id)
	}
	current, _, _ := unstructured.NestedSlice(pool.Object, "spec", "providerIDList")
	if !JSONEqual(current, providerIDs) {
		if err := s.mergePatch(ctx, pool, false, map[string]any{"spec": map[string]any{"providerIDList": providerIDs}}); err != nil {
			return err
		}
		s.logf("pool %s: providerIDList %v", pool.GetName(), ids)
	}
	status := map[string]any{
		"initialization": map[string]any{"provisioned": true},
		// CAPI v1.12's MachinePool controller reads an infrastructure pool's readiness from
		// status.ready (controllers/external.IsReady), and copies spec.providerIDList only then.
		"ready":                     true,
		"replicas":                  int64(len(live)),
		"readyReplicas":             int64(len(live)),
		"infrastructureMachineKind": DockerMachineGVK.Kind,
	}
	have, _, _ := unstructured.NestedMap(pool.Object, "status")
	for k, v := range status {
		if !JSONEqual(have[k], v) {
			return s.mergePatch(ctx, pool, true, map[string]any{"status": status})
		}
	}
	return nil
}

// launch starts an instance of the pool with the data Secret given: its Node registers, its
// DockerMachine records the Secret.
func (s *NoRollInfrastructure) launch(ctx context.Context, pool *unstructured.Unstructured, mp, cluster, secret string) (*unstructured.Unstructured, error) {
	s.mu.Lock()
	s.launched++
	n := s.launched
	s.mu.Unlock()
	name := fmt.Sprintf("%s-%s-%d", s.namespace, mp, n)
	providerID := instanceProviderID(name)
	ip := fmt.Sprintf("10.0.%d.%d", n/250, n%250+1)
	s.mu.Lock()
	hold := s.hold
	if hold {
		s.held[name] = ip
	}
	s.mu.Unlock()
	if !hold {
		if err := s.registerInstanceNode(ctx, name, ip); err != nil {
			return nil, err
		}
	}
	dm := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"providerID": providerID, "bootstrapped": true},
	}}
	dm.SetGroupVersionKind(DockerMachineGVK)
	dm.SetName(name)
	dm.SetNamespace(s.namespace)
	dm.SetLabels(map[string]string{poolNameLabel: mp, clusterNameLabel: cluster})
	dm.SetAnnotations(map[string]string{LaunchedWithAnnotation: secret})
	dm.SetFinalizers([]string{instanceFinalizer})
	// Owned by the pool, not controlled: CAPI's Machine controller makes the Machine it makes
	// for the instance its controller (as CAPD's DockerMachines are owned).
	dm.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: DockerMachinePoolGVK.GroupVersion().String(), Kind: DockerMachinePoolGVK.Kind, Name: pool.GetName(), UID: pool.GetUID()}})
	if err := s.client.Create(ctx, dm); err != nil {
		return nil, fmt.Errorf("DockerMachine %s: %w", name, err)
	}
	if err := s.mergePatch(ctx, dm, true, map[string]any{"status": map[string]any{
		"initialization": map[string]any{"provisioned": true},
		"addresses":      []any{map[string]any{"type": "InternalIP", "address": ip}, map[string]any{"type": "Hostname", "address": name}},
	}}); err != nil {
		return nil, err
	}
	s.logf("pool %s: launched %s (%s) with data secret %s", pool.GetName(), name, providerID, secret)
	return dm, nil
}

// instanceProviderID is the providerID of the instance name: its DockerMachine's and its Node's.
func instanceProviderID(name string) string { return "docker:////" + name }

// registerInstanceNode registers the Node of the instance name, as its kubelet does at boot.
func (s *NoRollInfrastructure) registerInstanceNode(ctx context.Context, name, ip string) error {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			corev1.LabelHostname: name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64",
		}},
		Spec: corev1.NodeSpec{ProviderID: instanceProviderID(name)},
	}
	if err := registerNode(ctx, s.cs, node, ip); err != nil {
		return fmt.Errorf("node %s: %w", name, err)
	}
	s.mu.Lock()
	s.nodes[name] = true
	s.mu.Unlock()
	return nil
}

// terminate ends a deleted DockerMachine's instance: its Node's heartbeat stops (CAPI deletes
// the Node once the DockerMachine is gone), then the finalizer goes.
func (s *NoRollInfrastructure) terminate(ctx context.Context, dm *unstructured.Unstructured) error {
	if !slices.Contains(dm.GetFinalizers(), instanceFinalizer) {
		return nil
	}
	s.mu.Lock()
	delete(s.nodes, dm.GetName())
	delete(s.held, dm.GetName())
	s.mu.Unlock()
	finalizers := slices.DeleteFunc(slices.Clone(dm.GetFinalizers()), func(f string) bool { return f == instanceFinalizer })
	patch := map[string]any{"metadata": map[string]any{"finalizers": finalizers, "resourceVersion": dm.GetResourceVersion()}}
	if err := s.mergePatch(ctx, dm, false, patch); err != nil {
		return err
	}
	s.logf("terminated %s", dm.GetName())
	return nil
}

// deleteMachineOf deletes the MachinePool Machine of an instance (CAPI drains its Node, then
// deletes the DockerMachine), as CAPD scales a pool down.
func (s *NoRollInfrastructure) deleteMachineOf(ctx context.Context, dm *unstructured.Unstructured) {
	for _, ref := range dm.GetOwnerReferences() {
		if ref.Kind != "Machine" {
			continue
		}
		machine := &unstructured.Unstructured{}
		machine.SetGroupVersionKind(MachineGVK)
		machine.SetNamespace(s.namespace)
		machine.SetName(ref.Name)
		if err := s.client.Delete(ctx, machine); err != nil && !apierrors.IsNotFound(err) {
			s.logf("scale down: delete Machine %s: %v", ref.Name, err)
			return
		}
		s.logf("scale down: deleted Machine %s of %s", ref.Name, dm.GetName())
	}
}

func (s *NoRollInfrastructure) mergePatch(ctx context.Context, u *unstructured.Unstructured, status bool, patch map[string]any) error {
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	if status {
		return s.client.Status().Patch(ctx, u, client.RawPatch("application/merge-patch+json", data))
	}
	return s.client.Patch(ctx, u, client.RawPatch("application/merge-patch+json", data))
}

// Instance is one instance of a pool as the test sees it: its DockerMachine, the Secret it was
// launched with, and its MachinePool Machine.
type Instance struct {
	Name         string
	Launched     time.Time
	LaunchedWith string
	Deleting     bool
	// Machine: the MachinePool Machine's name ("" before CAPI made it); Ready its Ready
	// condition, NodeRef its node.
	Machine, NodeRef string
	Ready            bool
}

// PoolInstances: the instances of the MachinePool named, oldest first, as the DockerMachines
// and Machines of the namespace say.
func (m *ManagementCluster) PoolInstances(t *testing.T, namespace, pool string) []Instance {
	t.Helper()
	var out []Instance
	machines := map[string]unstructured.Unstructured{}
	for _, machine := range m.listAll(t, MachineGVK, namespace, pool) {
		infra, _, _ := unstructured.NestedString(machine.Object, "spec", "infrastructureRef", "name")
		machines[infra] = machine
	}
	for _, dm := range m.listAll(t, DockerMachineGVK, namespace, pool) {
		i := Instance{
			Name: dm.GetName(), Launched: dm.GetCreationTimestamp().Time, LaunchedWith: dm.GetAnnotations()[LaunchedWithAnnotation],
			Deleting: dm.GetDeletionTimestamp() != nil,
		}
		if machine, ok := machines[dm.GetName()]; ok {
			i.Machine = machine.GetName()
			i.NodeRef, _, _ = unstructured.NestedString(machine.Object, "status", "nodeRef", "name")
			i.Ready = MachineReady(&machine)
			i.Deleting = i.Deleting || machine.GetDeletionTimestamp() != nil
		}
		out = append(out, i)
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Launched.Before(out[b].Launched) })
	return out
}

// listAll: the objects of a kind labelled with the pool's name, those being deleted included.
func (m *ManagementCluster) listAll(t *testing.T, gvk schema.GroupVersionKind, namespace, pool string) []unstructured.Unstructured {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	Must(t, m.CP.Client.List(context.Background(), list, client.InNamespace(namespace), client.MatchingLabels{poolNameLabel: pool}))
	return list.Items
}

// MachineReady: the Machine is not being deleted and its Ready condition is True.
func MachineReady(machine *unstructured.Unstructured) bool {
	if machine.GetDeletionTimestamp() != nil {
		return false
	}
	conditions, _, _ := unstructured.NestedSlice(machine.Object, "status", "conditions")
	for _, c := range conditions {
		if c, ok := c.(map[string]any); ok && c["type"] == "Ready" {
			return c["status"] == "True"
		}
	}
	return false
}

// ReadyMachines: how many Machines of the pool are Ready (MachineReady); safe to call from a
// goroutine of the test's own (it reports errors, never fails the test).
func (m *ManagementCluster) ReadyMachines(ctx context.Context, namespace, pool string) (int, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(MachineGVK.GroupVersion().WithKind("MachineList"))
	if err := m.CP.Client.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{poolNameLabel: pool}); err != nil {
		return 0, err
	}
	n := 0
	for i := range list.Items {
		if MachineReady(&list.Items[i]) {
			n++
		}
	}
	return n, nil
}

// CreateClusterIn creates a Cluster as CreateCluster creates c1: its namespace, CA and
// kubeconfig Secrets (the workload cluster is this API server) and its control plane, marked
// initialized.
func (m *ManagementCluster) CreateClusterIn(t *testing.T, namespace, cluster string) {
	t.Helper()
	m.CreateClusterSecretsIn(t, namespace, cluster)
	controlPlane := Object(t, fmt.Sprintf(`
apiVersion: controlplane.cluster-test.rollout-policy.dev/v1alpha1
kind: TestControlPlane
metadata: {name: %s, namespace: %s}
spec: {version: v1.34.3}`, cluster, namespace))
	Must(t, m.CP.Client.Create(context.Background(), controlPlane))
	m.MarkStatus(t, controlPlane, map[string]any{"initialization": map[string]any{"controlPlaneInitialized": true}})
	m.CP.CreateAll(t, []*unstructured.Unstructured{Object(t, fmt.Sprintf(`
apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata: {name: %s, namespace: %s}
spec:
  controlPlaneEndpoint: {host: %q, port: %d}
  controlPlaneRef: {apiGroup: controlplane.cluster-test.rollout-policy.dev, kind: TestControlPlane, name: %s}`,
		cluster, namespace, m.CP.Host, m.CP.Port, cluster))})
}
