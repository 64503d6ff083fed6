"""kubectl replace --force of a config in use, and server-side apply over client-side apply."""
from scenario_base import *  # noqa: F401,F403
from scenarios_context_aware import *  # noqa: F401,F403
from scenarios_templates import *  # noqa: F401,F403
from scenarios_apiserver import *  # noqa: F401,F403
from scenarios_stored_versions import *  # noqa: F401,F403

# --- kubectl replace --force of a config in use: a DELETE, then a CREATE under the same name with
# another spec. CAPI adopts the new object, CABPK regenerates the same-named data secret from it
# and the pool's dataSecretName does not change: nothing rolls out. Without lookups the
# DELETE is warned (deleteOwnedConfigs, default warn) and the CREATE cannot be told from a new
# config; with contextAware the DELETE is refused while a live pool references the config.
OWNED_DELETE = f"MachinePool {POOL} owns it: a same-name re-create is no rotation; rotate configRef (contextAware: true refuses)"
in_use = kubeadm_config("v1beta2")
replace_delete = request("DELETE", None, in_use)
replace_delete["options"].update(propagationPolicy="Background")
scenario("replace-force-delete-in-use",
         "the DELETE of kubectl replace --force of a config a pool uses, default mode: allowed with a warning naming the pool",
         replace_delete, {"allowed": True, "warnings": 1, "warningsContain": [OWNED_DELETE]})
replaced = kubeadm_config("v1beta2", owned=False, status=False, sysctl="net.ipv4.ip_forward = 1\nvm.max_map_count = 524288")
replaced["metadata"]["uid"] = "c41f0e6a-2b7d-4f3e-9a15-6d8e0b2c4a71"
del replaced["metadata"]["generation"]
del replaced["metadata"]["resourceVersion"]  # kubectl clears it; the API server sets it after admission
replaced["metadata"]["creationTimestamp"] = "2026-12-03T10:41:07Z"
del replaced["spec"]["joinConfiguration"]["discovery"]
replace_create = request("CREATE", replaced)
replace_create["options"].update(fieldManager="kubectl-replace")
scenario("replace-force-create-same-name",
         "the CREATE that follows (no ownerReference, a fresh uid): without lookups it looks like any new config, the first step of a rotation: allowed",
         replace_create, {"allowed": True, "warnings": 0})
scenario("context-aware-replace-force-delete",
         "contextAware: the same DELETE is refused while the pool references the config (nothing deleted, the data secret unchanged)",
         replace_delete,
         {"allowed": False, "code": 403, "messageContains": [f"[metadata.name: Forbidden: referenced by the configRef of MachinePool {NS}/{POOL}]"]},
         settings=CA, session=[pools_exchange([live_pool(CONFIG)])])
scenario("context-aware-delete-rotated-out",
         "contextAware: a person deleting an owned config no pool references any more (rotated out): allowed, no warning",
         request("DELETE", None, in_use), {"allowed": True, "warnings": 0},
         settings=CA, session=[pools_exchange([live_pool("workers-spot-4c1d9e2b")])])
scenario("context-aware-delete-lookup-fails",
         "contextAware: the pool list is refused (RBAC): the ownerReference decides as without lookups, a warning besides the lookup's",
         request("DELETE", None, in_use),
         {"allowed": True, "warnings": 2, "warningsContain": ["MachinePool lookup failed, judged by ownerReferences only", f"MachinePool {POOL} owns it: a same-name re-create"]},
         settings=CA, session=[pools_exchange([], error="machinepools.cluster.x-k8s.io is forbidden: User \"system:serviceaccount:kubewarden:policy-server\" cannot list resource \"machinepools\"")])
scenario("delete-owned-config-garbage-collector",
         "the garbage collector deleting a config whose pool is gone: allowed, no warning",
         request("DELETE", None, in_use, user=sa(GC)), {"allowed": True, "warnings": 0})
scenario("delete-owned-config-capi-manager",
         "CAPI's MachinePool controller deleting the config of a pool being deleted: allowed, no warning",
         request("DELETE", None, in_use, user=sa(CAPI_MANAGER)), {"allowed": True, "warnings": 0})
scenario("delete-owned-config-warn-mode",
         "deleteOwnedConfigs: warn (the default) spelled out: allowed with the warning",
         request("DELETE", None, in_use), {"allowed": True, "warnings": 1, "warningsContain": [OWNED_DELETE]},
         settings={"deleteOwnedConfigs": "warn"})
scenario("delete-owned-config-reject-mode",
         "deleteOwnedConfigs: reject refuses a person's DELETE of an owned config without lookups, in use or rotated out",
         replace_delete,
         {"allowed": False, "code": 403, "messageContains": [
             f'KubeadmConfig.bootstrap.cluster.x-k8s.io "{CONFIG}" is invalid: [metadata.ownerReferences: Forbidden: owned by MachinePool {NS}/{POOL}]',
             "re-create it under the same name (kubectl replace --force)",
             f"set spec.template.spec.bootstrap.configRef.name of MachinePool {NS}/{POOL} to it"]},
         settings={"deleteOwnedConfigs": "reject"})
scenario("delete-owned-config-allow-mode",
         "deleteOwnedConfigs: allow says nothing",
         request("DELETE", None, in_use), {"allowed": True, "warnings": 0}, settings={"deleteOwnedConfigs": "allow"})
scenario("delete-owned-config-reject-mode-garbage-collector",
         "deleteOwnedConfigs: reject never refuses the garbage collector",
         request("DELETE", None, in_use, user=sa(GC)), {"allowed": True, "warnings": 0}, settings={"deleteOwnedConfigs": "reject"})
scenario("delete-owned-config-reject-mode-namespace-controller",
         "deleteOwnedConfigs: reject never refuses the namespace controller deleting a namespace's objects",
         request("DELETE", None, in_use, user=sa("system:serviceaccount:kube-system:namespace-controller")),
         {"allowed": True, "warnings": 0}, settings={"deleteOwnedConfigs": "reject"})
scenario("delete-owned-config-reject-mode-capi-manager",
         "deleteOwnedConfigs: reject never refuses CAPI's controllers (controllerUsers)",
         request("DELETE", None, in_use, user=sa(CAPI_MANAGER)), {"allowed": True, "warnings": 0}, settings={"deleteOwnedConfigs": "reject"})
scenario("delete-owned-config-reject-mode-exempt-user",
         "deleteOwnedConfigs: reject, an exemptUsers identity cleaning a rotated-out config up: allowed, audited",
         request("DELETE", None, in_use),
         {"allowed": True, "auditAnnotationsContain": {"exemption": "would have rejected: KubeadmConfig.bootstrap.cluster.x-k8s.io"}},
         settings={"deleteOwnedConfigs": "reject", "exemptUsers": [ALICE["username"]]})
scenario("clusterctl-move-delete-config-delete-owned-reject",
         "deleteOwnedConfigs: reject, clusterctl move's DELETE of an annotated owned config: allowed and audited as ever",
         request("DELETE", None, for_move(in_use)),
         {"allowed": True, "warnings": 0, "auditAnnotationsContain": MOVE_AUDIT},
         settings={"deleteOwnedConfigs": "reject"})
cluster_owner = [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": capi.CLUSTER, "uid": "0c9b8a7d-6e5f-4a3b-9c2d-1e0f9a8b7c6d"}]
owned_template = kubeadm_template("v1beta2", owners=cluster_owner)
scenario("kubeadmconfigtemplate-v1beta2-delete-cluster-owned",
         "a person's DELETE of a template its Cluster owns (as CAPI's MachineDeployment controller sets it), default mode: allowed with a warning",
         request("DELETE", None, owned_template),
         {"allowed": True, "warnings": 1, "warningsContain": [f"Cluster {capi.CLUSTER} owns it: a same-name re-create is no rotation; rotate configRef (contextAware: true refuses)"]})
scenario("kubeadmconfigtemplate-v1beta2-delete-reject-mode",
         "deleteOwnedConfigs: reject refuses a person's DELETE of a template its Cluster owns",
         request("DELETE", None, owned_template),
         {"allowed": False, "code": 403, "messageContains": [f"[metadata.ownerReferences: Forbidden: owned by Cluster {NS}/{capi.CLUSTER}]", "copy it under another name"]},
         settings={"deleteOwnedConfigs": "reject"})
scenario("settings-delete-owned-configs-refused",
         "a value deleteOwnedConfigs does not know is refused when the policy is loaded",
         request("DELETE", None, in_use), {"settingsError": "deleteOwnedConfigs: unknown value \"block\" (expected one of reject, warn, allow)"},
         settings={"deleteOwnedConfigs": "block"})


# Found by the cluster test: `kubectl apply --server-side` over a client-side applied
# object first patches the last-applied annotation alone (field manager kubectl-last-applied),
# then managedFields; read through v1beta1 the objects those write carry none of the dropped
# fields the annotation names, which is no change of them: no warning.
ssa_upgrade = read_through_v1beta1(applied(v1beta1_repository(True), server_side=False))
scenario("kubeadmconfig-v1beta1-last-applied-patch-v1beta2-stored",
         "kubectl apply --server-side's own patch of the last-applied annotation of a v1beta1 config stored as v1beta2: the dropped field it names is not sent, no warning",
         request("UPDATE", edited(ssa_upgrade, lambda o: o["metadata"]["annotations"].update({LAST_APPLIED: o["metadata"]["annotations"][LAST_APPLIED].replace('"namespace"', '"namespace"')})), ssa_upgrade),
         {"allowed": True, "warnings": 0, "messageAbsent": True})
