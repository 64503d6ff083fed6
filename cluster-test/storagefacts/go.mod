// The reflection over a bootstrap kind's Go types that writes and checks
// ../testdata/storage-facts.txt. Standard library only, so that every module of cluster-test
// (this folder's parent and capi/*, each pinning other releases of CAPI and its providers) can
// require it through a `replace` to this folder without changing its build list.
module github.com/capi-bootstrap-rollout-policy/capi-bootstrap-rollout-policy/cluster-test/storagefacts

go 1.24.0
