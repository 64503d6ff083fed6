"""Context-aware mode: the cluster's answers replayed, and the lazy lookups."""
from scenario_base import *  # noqa: F401,F403
from scenarios_rules import *  # noqa: F401,F403

# --- Context-aware mode (replayed cluster) --------------------------------------------------------
CA = {"contextAware": True}


def live_pool(config_name, deleting=False, infrastructure=None):
    """A pool as the field masks leave it; `infrastructure`: its infrastructureRef, or the
    AWSMachinePool machine_pool() gives it."""
    p = machine_pool("v1beta2", ref("v1beta2", config_name), data_secret=config_name)
    m = {"name": p["metadata"]["name"], "uid": p["metadata"]["uid"]}
    if deleting:
        m["deletionTimestamp"] = "2026-11-29T08:00:00Z"
    spec = p["spec"]["template"]["spec"]
    return {"metadata": m, "spec": {"template": {"spec": {
        "bootstrap": spec["bootstrap"], "infrastructureRef": infrastructure or spec["infrastructureRef"]}}}}


scenario("context-aware-rotated-out-edit",
         "contextAware: the pool now references another config, so this owned one is rotated out: edit allowed with a warning",
         request("UPDATE", edited(old, edit_in_place), old),
         {"allowed": True, "warnings": 1, "warningsContain": [f"KubeadmConfig {CONFIG} is rotated out (no MachinePool references it): this edit reaches no node"]},
         settings=CA, session=[pools_exchange([live_pool("workers-spot-4c1d9e2b")])])
unadopted = kubeadm_config("v1beta2", owned=False, status=False)
scenario("context-aware-referenced-not-adopted",
         "contextAware: a config a pool references before adopting it (no ownerReference yet) is protected",
         request("UPDATE", edited(unadopted, edit_in_place), unadopted),
         {"allowed": False, "messageContains": [f"is invalid: [spec.files[0].content: Forbidden: changed", f"in use by MachinePool {NS}/{POOL}"]},
         settings=CA, session=[pools_exchange([live_pool(CONFIG)])])
scenario("context-aware-delete-referenced",
         "contextAware: deleting a config a live pool references is rejected (delete-and-recreate is an in-place edit in disguise)",
         request("DELETE", None, old),
         {"allowed": False, "messageContains": [f"[metadata.name: Forbidden: referenced by the configRef of MachinePool {NS}/{POOL}]", "re-creating it under the same name is no rotation"]},
         settings=CA, session=[pools_exchange([live_pool(CONFIG)])])
scenario("context-aware-delete-with-its-pool",
         "contextAware: the pool that references the config is being deleted itself: DELETE allowed",
         request("DELETE", None, old, user=sa(GC)), {"allowed": True, "warnings": 0},
         settings=CA, session=[pools_exchange([live_pool(CONFIG, deleting=True)])])
scenario("context-aware-recreate-consumed-name",
         "contextAware: creating a config under a name whose data secret a pool already consumed is flagged: it will not roll out",
         request("CREATE", kubeadm_config("v1beta2", owned=False, status=False)),
         {"allowed": True, "warnings": 1, "warningsContain": [f"KubeadmConfig {CONFIG}: MachinePool {POOL} already consumed this data secret name: no rotation"]},
         settings=CA, session=[pools_exchange([live_pool(CONFIG)])])
scenario("context-aware-lookup-fails",
         "contextAware: a failed lookup (RBAC) is no 500: the ownerReference rules decide, with a warning cut to 120 characters and the whole error in the audit log",
         request("UPDATE", edited(old, edit_in_place), old),
         {"allowed": False, "code": 403, "warningsContain": ["MachinePool lookup failed, judged by ownerReferences only"],
          "auditAnnotationsContain": {"warnings": "cannot list resource \"machinepools\""}},
         settings=CA, session=[pools_exchange([], error="machinepools.cluster.x-k8s.io is forbidden: User \"system:serviceaccount:kubewarden:policy-server\" cannot list resource \"machinepools\"")])
# Lazy lookups: CAPI's frequent writes change nothing the policy compares, so they make no host
# call at all. An empty replay session proves it: any lookup would fail and warn.
scenario("context-aware-token-rotation-no-lookup",
         "contextAware: CABPK's token rotation (every ~7.5 min per pool) looks nothing up: allowed, no warning with an empty session",
         request("UPDATE", edited(old, lambda o: o["spec"]["joinConfiguration"]["discovery"]["bootstrapToken"].update(token="m2p7qd.h4j8k2l6n1r5t9w3")), old, user=sa(KUBEADM_BOOTSTRAP)),
         {"allowed": True, "warnings": 0}, settings=CA, session=[])
scenario("context-aware-label-edit-no-lookup",
         "contextAware: a label and annotation edit looks nothing up: allowed, no warning with an empty session",
         request("UPDATE", edited(old, lambda o: (o["metadata"]["labels"].update(team="payments"), o["metadata"].update(annotations={"owner": "payments"}))), old),
         {"allowed": True, "warnings": 0}, settings=CA, session=[])
status_old = kubeadm_config("v1beta2", status=False)
scenario("context-aware-status-no-lookup",
         "contextAware: CABPK writing status (ready, data secret) looks nothing up: allowed, no warning with an empty session",
         request("UPDATE", edited(status_old, lambda o: o.update(status=kubeadm_status("v1beta2"))), status_old, user=sa(KUBEADM_BOOTSTRAP), sub_resource="status"),
         {"allowed": True, "warnings": 0}, settings=CA, session=[])
rot_old = machine_pool("v1beta2", ref("v1beta2", CONFIG))
rot_new = machine_pool("v1beta2", ref("v1beta2", "workers-spot-4c1d9e2b"))
scenario("context-aware-rotation-target-missing",
         "contextAware: rotating to a config that does not exist yet is allowed with a warning (the pool waits)",
         request("UPDATE", rot_new, rot_old),
         {"allowed": True, "warnings": 1, "warningsContain": ["configRef target KubeadmConfig workers-spot-4c1d9e2b does not exist yet: the MachinePool waits for it"]},
         settings=CA, session=[config_exchange("workers-spot-4c1d9e2b", [])])
other_owned = {"metadata": {"name": "workers-spot-4c1d9e2b", "ownerReferences": [
    {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool", "name": "workers-batch", "uid": "aa000000-0000-4000-8000-000000000099", "controller": True}]},
    "spec": kubeadm_spec("v1beta2", sysctl="other")}
scenario("context-aware-rotation-to-controlled-config",
         "contextAware: pointing a second MachinePool at a config another pool controls is rejected (CAPI cannot adopt it)",
         request("UPDATE", rot_new, rot_old),
         {"allowed": False, "messageContains": [f"[spec.template.spec.bootstrap.configRef.name: Forbidden: KubeadmConfig {NS}/workers-spot-4c1d9e2b is controlled by MachinePool {NS}/workers-batch]"]},
         settings=CA, session=[config_exchange("workers-spot-4c1d9e2b", [other_owned]),
                               config_exchange(CONFIG, [{"metadata": {"name": CONFIG}, "spec": kubeadm_spec("v1beta2")}])])
same = {"metadata": {"name": "workers-spot-4c1d9e2b"}, "spec": kubeadm_spec("v1beta2", token="")}
scenario("context-aware-rotation-same-content",
         "contextAware: rotating to a config with the same content (token aside) is a rotation for nothing: warning",
         request("UPDATE", rot_new, rot_old),
         {"allowed": True, "warnings": 1, "warningsContain": ["workers-spot-4c1d9e2b has the same content as workers-spot-8d2f0a1c: a rotation for nothing"]},
         settings=CA, session=[config_exchange("workers-spot-4c1d9e2b", [same]),
                               config_exchange(CONFIG, [{"metadata": {"name": CONFIG}, "spec": kubeadm_spec("v1beta2")}])])
