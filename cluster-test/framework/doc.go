// Package framework is the cluster test's harness: what the cases in cluster-test's _test.go
// files start and ask, none of it a case itself.
//
//   - a control plane (controlplane.go): etcd, kube-apiserver with its audit log and
//     kube-controller-manager, started through controller-runtime's envtest; processes,
//     certificates, kubeconfigs, artifacts; kubectl run as a person;
//   - CAPI per release (capi.go, management.go): a release's providers installed as clusterctl
//     installs them, a management cluster of the control plane, CAPI, the person and the policy
//     server (policy.go: `policy-host serve` or POLICY_SERVER behind policy.yaml's webhook);
//   - Cluster c1 and the objects the cases read and wait for (cluster.go), other bootstrap
//     providers' configs and templates (providers.go), a Cluster of a ClusterClass: its
//     providers stood in for and the topology controller's writes (topology.go);
//   - audit-log queries (audit.go): the requests since a time, who wrote what, what the policy
//     refused or warned, and the checks every case makes of them;
//   - the kubelet stand-in (kubelet.go) and Kubewarden as its charts install it (kubewarden.go);
//   - a case's steps and what each needs (steps.go).
//
// Paths are relative to cluster-test/, where `go test` runs the cases.
package framework
