"""Rules 1 to 6 without lookups, the bypass catalogue, other providers and kinds."""
from scenario_base import *  # noqa: F401,F403

# --- Rule 1: rotation -------------------------------------------------------------------------
for v in ("v1beta1", "v1beta2"):
    scenario(f"machinepool-{v}-rotate-configref",
             f"{v}: rotating configRef to a new KubeadmConfig is how a bootstrap change rolls out: allowed",
             request("UPDATE", machine_pool(v, ref(v, "workers-spot-4c1d9e2b")), machine_pool(v, ref(v, CONFIG))),
             {"allowed": True, "warnings": 0})
    scenario(f"machinepool-{v}-create",
             f"{v}: creating a MachinePool with a complete configRef: allowed, nothing flagged",
             request("CREATE", machine_pool(v, ref(v, CONFIG), data_secret=None)),
             {"allowed": True, "warnings": 0})
scenario("machinepool-v1beta2-rotate-to-eksconfig",
         "rotation to another provider's kind (KubeadmConfig -> EKSConfig) is a rotation: allowed",
         request("UPDATE", machine_pool("v1beta2", ref("v1beta2", "workers-spot-eks-1", kind="EKSConfig")), machine_pool("v1beta2", ref("v1beta2", CONFIG))),
         {"allowed": True, "warnings": 0})
scenario("machinepool-v1beta1-apiversion-bump",
         "CAPI bumping configRef.apiVersion (v1beta1 -> v1beta2, same group and name) is not a rotation: allowed silently",
         request("UPDATE", machine_pool("v1beta1", ref("v1beta1", CONFIG, api_version="v1beta2")), machine_pool("v1beta1", ref("v1beta1", CONFIG, api_version="v1beta1")), user=sa(CAPI_MANAGER)),
         {"allowed": True, "warnings": 0})
scenario("machinepool-v1beta1-drop-configref",
         "dropping configRef for a hand-set dataSecretName is allowed",
         request("UPDATE", machine_pool("v1beta1", None, data_secret="workers-spot-handmade"), machine_pool("v1beta1", ref("v1beta1", CONFIG))),
         {"allowed": True, "warnings": 0})
scenario("machinepool-v1beta1-configref-other-namespace",
         "a v1beta1 configRef into another namespace is rejected: CAPI looks configs up in the pool's namespace only",
         request("UPDATE", machine_pool("v1beta1", ref("v1beta1", "workers-spot-4c1d9e2b", namespace="shared-configs")), machine_pool("v1beta1", ref("v1beta1", CONFIG))),
         {"allowed": False, "code": 403, "messageContains": [
             'MachinePool.cluster.x-k8s.io "workers-spot" is invalid: [spec.template.spec.bootstrap.configRef.namespace: Invalid value: "shared-configs": must be the MachinePool\'s namespace "team-payments"]',
             'Create the config in namespace "team-payments" and omit configRef.namespace']})
scenario("machinepool-v1beta2-replicas-only",
         "an UPDATE that leaves the bootstrap ref alone (scaling) is not judged again: allowed silently",
         request("UPDATE", machine_pool("v1beta2", ref("v1beta2", CONFIG), replicas=6), machine_pool("v1beta2", ref("v1beta2", CONFIG))),
         {"allowed": True, "warnings": 0}, settings={"contractViolations": "reject"})
scenario("machinepool-v1beta2-rotate-to-unlisted-kind",
         "rotation to a kind outside bootstrapConfigKinds is allowed with a warning that its edits are not checked",
         request("UPDATE", machine_pool("v1beta2", ref("v1beta2", "workers-spot-example-1", kind="ExampleConfig", group="bootstrap.example.com")), machine_pool("v1beta2", ref("v1beta2", CONFIG))),
         {"allowed": True, "warningsContain": ["configRef kind ExampleConfig.bootstrap.example.com is not in bootstrapConfigKinds"]})

# --- Rule 5: contract fields --------------------------------------------------------------------
no_api_version = ref("v1beta1", "workers-spot-4c1d9e2b")
del no_api_version["apiVersion"]
scenario("machinepool-v1beta1-configref-missing-apiversion",
         "a v1beta1 configRef without apiVersion breaks the bootstrap contract: flagged with a warning by default",
         request("UPDATE", machine_pool("v1beta1", no_api_version), machine_pool("v1beta1", ref("v1beta1", CONFIG))),
         {"allowed": True, "warnings": 1, "warningsContain": ["spec.template.spec.bootstrap.configRef.apiVersion missing: CAPI cannot resolve the bootstrap config"]})
no_kind = ref("v1beta1", "workers-spot-4c1d9e2b")
del no_kind["kind"]
scenario("machinepool-v1beta1-configref-missing-kind-reject",
         "contractViolations: reject turns the contract flag into a rejection naming the field",
         request("CREATE", machine_pool("v1beta1", no_kind, data_secret=None)),
         {"allowed": False, "code": 403, "messageContains": ["[spec.template.spec.bootstrap.configRef.kind: Required: the bootstrap contract resolves the config by it]"]},
         settings={"contractViolations": "reject"})
for v, flag in (("v1beta1", "status.ready"), ("v1beta2", "status.initialization.dataSecretCreated")):
    old = kubeadm_config(v, status=False)
    new = copy.deepcopy(old)
    new["status"] = kubeadm_status(v)
    del new["status"]["dataSecretName"]
    scenario(f"kubeadmconfig-{v}-status-ready-without-secret",
             f"{v}: a provider (not in controllerUsers) reporting {flag} without status.dataSecretName is flagged (warning)",
             request("UPDATE", new, old, user=sa(OTHER_PROVIDER), sub_resource="status"),
             {"allowed": True, "warnings": 1, "warningsContain": [f"status.dataSecretName missing while {flag} is true (bootstrap contract)"]})
old = kubeadm_config("v1beta2", status=False)
new = copy.deepcopy(old)
new["status"] = {"initialization": {"dataSecretCreated": True}}
scenario("kubeadmconfig-v1beta2-status-contract-reject",
         "contractViolations: reject refuses a status update (by a provider not in controllerUsers) that claims ready data without naming the secret",
         request("UPDATE", new, old, user=sa(OTHER_PROVIDER), sub_resource="status"),
         {"allowed": False, "messageContains": ["[status.dataSecretName: Required: status.initialization.dataSecretCreated is true"]},
         settings={"contractViolations": "reject"})
scenario("kubeadmconfig-v1beta2-status-contract-controller-audited",
         "contractViolations: reject never refuses CABPK itself (controllerUsers): allowed, the finding audited",
         request("UPDATE", new, old, user=sa(KUBEADM_BOOTSTRAP), sub_resource="status"),
         {"allowed": True, "warnings": 0, "auditAnnotationsContain": {CONTROLLER_WRITE: "would have rejected: [status.dataSecretName: Required: status.initialization.dataSecretCreated is true"}},
         settings={"contractViolations": "reject"})
scenario("kubeadmconfig-v1beta2-status-contract-ignore",
         "contractViolations: ignore says nothing about the same status",
         request("UPDATE", new, old, user=sa(KUBEADM_BOOTSTRAP), sub_resource="status"),
         {"allowed": True, "warnings": 0}, settings={"contractViolations": "ignore"})

# --- Rule 2: in-place edits ---------------------------------------------------------------------
for v in ("v1beta1", "v1beta2"):
    old = kubeadm_config(v)
    scenario(f"kubeadmconfig-{v}-token-rotation",
             f"{v}: the kubeadm bootstrap controller rotating the join token (every ~7.5 min) is machine-made: allowed",
             request("UPDATE", edited(old, lambda o: o["spec"]["joinConfiguration"]["discovery"]["bootstrapToken"].update(token="m2p7qd.h4j8k2l6n1r5t9w3")), old, user=sa(KUBEADM_BOOTSTRAP)),
             {"allowed": True, "warnings": 0})
    args_path = "kubeletExtraArgs.max-pods" if v == "v1beta1" else "kubeletExtraArgs[0].value"
    scenario(f"kubeadmconfig-{v}-edit-in-use",
             f"{v}: editing the spec of a config a MachinePool uses is rejected with every path and the rotation to do instead",
             request("UPDATE", edited(old, edit_in_place), old),
             {"allowed": False, "code": 403, "messageContains": [
                 f'KubeadmConfig.bootstrap.cluster.x-k8s.io "{CONFIG}" is invalid: [spec.files[0].content: Forbidden: changed, spec.joinConfiguration.nodeRegistration.{args_path}: Forbidden: changed]',
                 f"The config is in use by MachinePool {NS}/{POOL}, and {ONLY_A_ROTATION}. {PROVIDER_DECIDES}",
                 'To rotate, create a new KubeadmConfig "workers-spot-',
                 f"in namespace {NS} with the desired spec, then set spec.template.spec.bootstrap.configRef.name of MachinePool {NS}/{POOL} to \"workers-spot-"]})
fresh = kubeadm_config("v1beta1", status=False)
fresh["spec"]["joinConfiguration"]["discovery"] = {}
del fresh["spec"]["format"]
del fresh["spec"]["joinConfiguration"]["nodeRegistration"]["imagePullPolicy"]


def fill(o):
    o["spec"]["format"] = "cloud-config"
    o["spec"]["joinConfiguration"]["nodeRegistration"]["imagePullPolicy"] = "IfNotPresent"
    o["spec"]["joinConfiguration"]["discovery"] = kubeadm_spec("v1beta1")["joinConfiguration"]["discovery"]


scenario("kubeadmconfig-v1beta1-controller-fills-discovery",
         "v1beta1: CAPI filling the empty bootstrapToken (token, endpoint, CA hashes) and the defaults once: allowed",
         request("UPDATE", edited(fresh, fill), fresh, user=sa(KUBEADM_BOOTSTRAP)), {"allowed": True, "warnings": 0})
old = kubeadm_config("v1beta2")
scenario("kubeadmconfig-v1beta2-endpoint-changed",
         "a fill-once field changed after it was filled (apiServerEndpoint) is an in-place edit: rejected",
         request("UPDATE", edited(old, lambda o: o["spec"]["joinConfiguration"]["discovery"]["bootstrapToken"].update(apiServerEndpoint="10.20.0.99:6443")), old),
         {"allowed": False, "messageContains": ["[spec.joinConfiguration.discovery.bootstrapToken.apiServerEndpoint: Forbidden: changed]"]})
scenario("kubeadmconfig-v1beta2-edit-not-in-use",
         "a config no MachinePool controls yet may be edited: allowed",
         request("UPDATE", edited(kubeadm_config(owned=False, status=False), edit_in_place), kubeadm_config(owned=False, status=False)),
         {"allowed": True, "warnings": 0})
scenario("kubeadmconfig-v1beta2-edit-warn-mode",
         "inPlaceEdits: warn lets the edit through with a short warning",
         request("UPDATE", edited(old, edit_in_place), old),
         {"allowed": True, "warnings": 1, "warningsContain": [f"spec.files[0].content (+1 more) edited in place, not recorded in MachinePool {NS}/{POOL}"]},
         settings={"inPlaceEdits": "warn"})
scenario("kubeadmconfig-v1beta2-edit-allow-mode",
         "inPlaceEdits: allow switches the check off",
         request("UPDATE", edited(old, edit_in_place), old), {"allowed": True, "warnings": 0}, settings={"inPlaceEdits": "allow"})
scenario("kubeadmconfig-v1beta2-metadata-only",
         "label and annotation changes are not spec edits: allowed",
         request("UPDATE", edited(old, lambda o: (o["metadata"]["labels"].update(team="payments"), o["metadata"].update(annotations={"owner": "payments"}))), old),
         {"allowed": True, "warnings": 0})
scenario("kubeadmconfig-v1beta2-ignored-paths-setting",
         "ignoredPaths extends the machine-only fields: file contents ignored, so only the kubelet arg is reported",
         request("UPDATE", edited(old, edit_in_place), old),
         {"allowed": False, "messageContains": ["[spec.joinConfiguration.nodeRegistration.kubeletExtraArgs[0].value: Forbidden: changed]"]},
         settings={"ignoredPaths": {"KubeadmConfig": ["spec.files[*].content"]}})
ntp_old = kubeadm_config("v1beta2")
ntp_new = edited(ntp_old, lambda o: o["spec"].update(ntp={"enabled": True, "servers": ["169.254.169.123"]}))
scenario("kubeadmconfig-v1beta2-fill-once-paths-setting",
         "fillOncePaths extends the fill-once fields: a first NTP setup is allowed",
         request("UPDATE", ntp_new, ntp_old), {"allowed": True, "warnings": 0},
         settings={"fillOncePaths": {"KubeadmConfig": ["spec.ntp.enabled", "spec.ntp.servers"]}})
scenario("kubeadmconfig-v1beta2-delete",
         "a person's DELETE of a config its pool controls, in use or rotated out: allowed with a warning (contextAware refuses it when referenced)",
         request("DELETE", None, old), {"allowed": True, "warnings": 1, "warningsContain": [f"MachinePool {POOL} owns it: a same-name re-create is no rotation"]})

# --- Rule 3: ClusterClass -----------------------------------------------------------------------
topo = kubeadm_config("v1beta2", labels={"topology.cluster.x-k8s.io/owned": "", "topology.cluster.x-k8s.io/deployment-name": "md-0"})
scenario("kubeadmconfig-v1beta2-topology-controller-patch",
         "the topology controller patching a ClusterClass-managed config in place (cluster-api #10496): allowed, the paths audited",
         request("UPDATE", edited(topo, edit_in_place), topo, user=sa(CAPI_MANAGER)),
         {"allowed": True, "warnings": 0, "auditAnnotationsContain": {CONTROLLER_WRITE: "would have rejected: [spec.files[0].content: Forbidden: changed"}})
scenario("kubeadmconfig-v1beta2-topology-label-other-user",
         "anyone else editing a topology-owned config: the label changes nothing, rejected; the remediation is the ClusterClass's template, not a rotation (which stops the topology controller, as the cluster test saw)",
         request("UPDATE", edited(topo, edit_in_place), topo),
         {"allowed": False, "messageContains": ["[spec.files[0].content: Forbidden: changed", "which its Cluster's topology manages", "Change the ClusterClass's bootstrap template instead", "add a new MachinePool topology"]})
scenario("kubeadmconfig-v1beta2-borrow-topology-label",
         "adding the topology label in the same edit buys nothing: judged on the stored object, rejected",
         request("UPDATE", edited(old, lambda o: (edit_in_place(o), o["metadata"]["labels"].update({"topology.cluster.x-k8s.io/owned": ""}))), old),
         {"allowed": False, "messageContains": ["[spec.files[0].content: Forbidden: changed"]})

# --- Rule 4: ownership laundering ---------------------------------------------------------------
scenario("kubeadmconfig-v1beta2-strip-ownerref",
         "removing the MachinePool controller reference (step 1 of a two-step bypass) is rejected",
         request("UPDATE", edited(old, lambda o: o["metadata"].pop("ownerReferences")), old),
         {"allowed": False, "messageContains": [f"[metadata.ownerReferences: Forbidden: removes the controller reference to MachinePool {NS}/{POOL}]", "Keep metadata.ownerReferences as CAPI set it"]})
scenario("kubeadmconfig-v1beta2-strip-ownerref-and-edit",
         "stripping the reference and editing at once is judged on the old object: both reported",
         request("UPDATE", edited(old, lambda o: (o["metadata"].pop("ownerReferences"), edit_in_place(o))), old),
         {"allowed": False, "messageContains": [f"[metadata.ownerReferences: Forbidden: removes the controller reference to MachinePool {NS}/{POOL}, spec.files[0].content: Forbidden: changed"]})
scenario("kubeadmconfig-v1beta2-gc-strips-ownerref",
         "the garbage collector removing the reference (the MachinePool is gone) is allowed",
         request("UPDATE", edited(old, lambda o: o["metadata"].pop("ownerReferences")), old, user=sa(GC)), {"allowed": True, "warnings": 0})

# --- Rule 6: exemptions and dry-run -------------------------------------------------------------
scenario("kubeadmconfig-v1beta2-exempt-user",
         "an exempt user's edit is allowed; the audit annotation says it would have been rejected",
         request("UPDATE", edited(old, edit_in_place), old),
         {"allowed": True, "auditAnnotationsContain": {"exemption": 'allowed because user "alice@example.com" is in exemptUsers; would have rejected: KubeadmConfig'}},
         settings={"exemptUsers": ["alice@example.com"]})
scenario("kubeadmconfig-v1beta2-exempt-group",
         "a member of an exempt group is allowed, with the audit annotation",
         request("UPDATE", edited(old, edit_in_place), old),
         {"allowed": True, "auditAnnotationsContain": {"exemption": 'is in exempt group "platform-team"'}},
         settings={"exemptGroups": ["platform-team"]})
scenario("kubeadmconfig-v1beta2-exempt-user-prefix-trick",
         "identities match exactly: bob@example.com is not exempted by an entry \"bob\" or by case games",
         request("UPDATE", edited(old, edit_in_place), old, user=BOB),
         {"allowed": False, "messageContains": ["is invalid: [spec.files[0].content"]},
         settings={"exemptUsers": ["bob", "BOB@example.com"], "exemptGroups": ["app"]})
scenario("kubeadmconfig-v1beta2-dry-run",
         "kubectl --dry-run=server previews the real verdict: rejected",
         request("UPDATE", edited(old, edit_in_place), old, dry_run=True), {"allowed": False, "messageContains": ["is invalid: [spec.files[0].content"]})
scenario("kubeadmconfig-v1beta2-status-smuggles-spec",
         "a spec change carried in a status update is judged like any edit: rejected",
         request("UPDATE", edited(old, edit_in_place), old, sub_resource="status"), {"allowed": False, "messageContains": ["is invalid: [spec.files[0].content"]})

# --- Bypass catalogue: each must still be rejected ----------------------------------------------
exp_old = kubeadm_config("v1beta1")
exp_old["metadata"]["ownerReferences"] = [dict(pool_owner("v1beta1")[0], apiVersion="exp.cluster.x-k8s.io/v1beta1")]
scenario("bypass-ownerref-exp-group",
         "a config owned through the historical exp.cluster.x-k8s.io group is in use all the same: rejected",
         request("UPDATE", edited(exp_old, edit_in_place), exp_old),
         {"allowed": False, "messageContains": ["is invalid: [spec.files[0].content: Forbidden: changed"]})
spelled = request("UPDATE", edited(old, edit_in_place), old)
spelled["object"]["kind"] = "kubeadmconfig"
spelled["object"]["apiVersion"] = "Bootstrap.Cluster.x-k8s.io/v1beta2"
scenario("bad-input-bypass-kind-spelled-differently",
         "bypass attempt: the verdict follows the request's kind (what the API server resolved), not the object's spelling",
         spelled, {"allowed": False, "messageContains": ["is invalid: [spec.files[0].content: Forbidden: changed"]})
demoted = edited(old, lambda o: o["metadata"]["ownerReferences"][0].update(controller=False))
scenario("bypass-demote-ownerref",
         "turning the MachinePool reference into a non-controller one is a removal: rejected",
         request("UPDATE", demoted, old),
         {"allowed": False, "messageContains": ["[metadata.ownerReferences: Forbidden: removes the controller reference to MachinePool"]})
scenario("bypass-controller-identity-prefix",
         "a user named like the CAPI manager with a suffix is not the controller: topology edit rejected",
         request("UPDATE", edited(topo, edit_in_place), topo, user={"username": CAPI_MANAGER + "-x", "groups": ["system:authenticated"]}),
         {"allowed": False, "messageContains": ["is invalid: [spec.files[0].content: Forbidden: changed"]})

# --- Other providers and kinds ------------------------------------------------------------------
eks_old = {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "EKSConfig",
           "metadata": meta("workers-spot-eks-1", "c2d4e6f8-1a3b-4c5d-8e9f-0a1b2c3d4e5f", 2, None, pool_owner()),
           "spec": {"kubeletExtraArgs": {"max-pods": "58"}, "containerRuntime": "containerd",
                    "preBootstrapCommands": ["echo prepared"]},
           "status": {"ready": True, "dataSecretName": "workers-spot-eks-1"}}
eks_new = edited(eks_old, lambda o: o["spec"]["kubeletExtraArgs"].update({"max-pods": "110"}))
scenario("eksconfig-v1beta2-edit-in-use",
         "a non-default provider kind (CAPA's EKSConfig) gets the same rule: rejected with path and remediation",
         request("UPDATE", eks_new, eks_old),
         {"allowed": False, "messageContains": ['EKSConfig.bootstrap.cluster.x-k8s.io "workers-spot-eks-1" is invalid: [spec.kubeletExtraArgs.max-pods: Forbidden: changed]', 'create a new EKSConfig "workers-spot-eks-1-']})
example_old = {"apiVersion": "bootstrap.example.com/v1alpha1", "kind": "ExampleConfig",
            "metadata": meta("workers-spot-example-1", "aa11bb22-cc33-4d44-8e55-ff6677889900", 2, None, pool_owner()),
            "spec": {"userData": "#cloud-config\nruncmd: [echo one]\n"}}
example_new = edited(example_old, lambda o: o["spec"].update(userData="#cloud-config\nruncmd: [echo two]\n"))
scenario("exampleconfig-custom-kind-edit",
         "a provider kind added through bootstrapConfigKinds is protected too",
         request("UPDATE", example_new, example_old), {"allowed": False, "messageContains": ["[spec.userData: Forbidden: changed]"]},
         settings={"bootstrapConfigKinds": [{"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig"}, {"apiGroup": "bootstrap.example.com", "kind": "ExampleConfig"}]})
scenario("exampleconfig-not-listed",
         "the same edit with default settings: not a bootstrap config this policy knows, accepted untouched",
         request("UPDATE", example_new, example_old), {"allowed": True, "warnings": 0})

cm_old = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("kubeadm-config-notes", "0f0e0d0c-0b0a-4909-8807-060504030201"),
          "data": {"note": "rotate, don't edit"}}
cm_new = edited(cm_old, lambda o: o["data"].update(note="edited"))
cm_new["metadata"].pop("generation"); cm_old["metadata"].pop("generation")
scenario("other-kind-untouched",
         "a kind the policy does not judge (a ConfigMap) is accepted untouched",
         request("UPDATE", cm_new, cm_old), {"allowed": True, "messageAbsent": True, "warnings": 0})
