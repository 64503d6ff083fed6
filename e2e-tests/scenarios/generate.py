#!/usr/bin/env python3
"""Writes the e2e scenarios: one directory per scenario with request.json (a raw
AdmissionRequest, exactly what `kwctl run --request-path` takes) and scenario.yaml (settings
and expected verdict). The JSON files are the source of truth for kwctl users; this script
only keeps them consistent. Edit it and run `python3 e2e-tests/scenarios/generate.py`.

Objects are written as a cluster stores them: ownerReferences set by the MachinePool
controller, the token written by the kubeadm bootstrap controller, status, defaults."""
import copy
import itertools
import json
import os
import sys
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
# The object builders shared with capi-rollout-check's fixtures.
sys.path.insert(0, HERE)
import capi_objects as capi  # noqa: E402

NS = capi.NS
POOL = "workers-spot"
POOL_UID = "3f0c9a52-5d1e-4d53-9a43-2a7f1b8e6c01"
CONFIG = "workers-spot-8d2f0a1c"
KUBEADM_BOOTSTRAP = "system:serviceaccount:capi-kubeadm-bootstrap-system:capi-kubeadm-bootstrap-manager"
# A bootstrap provider installed under names the default controllerUsers do not know: its
# writes are judged (contract flags reach it); the listed providers' writes are only audited.
OTHER_PROVIDER = "system:serviceaccount:acme-bootstrap-system:acme-bootstrap-manager"
CAPI_MANAGER = "system:serviceaccount:capi-system:capi-manager"
GC = "system:serviceaccount:kube-system:generic-garbage-collector"
RKE2_BOOTSTRAP = "system:serviceaccount:rke2-bootstrap-system:rke2-bootstrap-manager"
CONTROLLER_WRITE = "controller-write"
# What the refusal of an in-place edit says (src/rules/in_place_edit.rs): what holds for every
# pool, and, with contextAware, what the pool's infrastructure does (src/capi/infrastructure.rs).
INFRA_DOCS = "https://github.com/capi-bootstrap-rollout-policy/capi-bootstrap-rollout-policy/blob/main/docs/infrastructure.md"
ONLY_A_ROTATION = "CAPI takes a bootstrap change only from a configRef rotation (cluster-api #8858)"
PROVIDER_DECIDES = f"Whether existing instances are then replaced is the infrastructure provider's choice ({INFRA_DOCS})."
ALICE = {"username": "alice@example.com", "groups": ["platform-team", "system:authenticated"]}
BOB = {"username": "bob@example.com", "groups": ["app-team", "system:authenticated"]}
PLURAL = {"ConfigMap": "configmaps", "KubeadmConfigTemplate": "kubeadmconfigtemplates",
          "MachineDeployment": "machinedeployments", "MachineSet": "machinesets", "KubeadmConfig": "kubeadmconfigs", "EKSConfig": "eksconfigs", "RKE2Config": "rke2configs",
          "MachinePool": "machinepools", "TalosConfig": "talosconfigs", "AcmeConfig": "acmeconfigs",
          "KThreesConfig": "kthreesconfigs", "RKE2ConfigTemplate": "rke2configtemplates",
          "K0sWorkerConfigTemplate": "k0sworkerconfigtemplates"}


def sa(name):
    return {"username": name, "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, name)),
            "groups": ["system:serviceaccounts", "system:serviceaccounts:" + name.split(":")[2], "system:authenticated"]}


def meta(name, uid, generation=1, labels=None, owners=None):
    return capi.metadata(name, stored={"uid": uid, "generation": generation},
                         labels={capi.CLUSTER_LABEL: capi.CLUSTER, **(labels or {})}, owners=owners)


def pool_owner(version="v1beta2"):
    return [{"apiVersion": f"cluster.x-k8s.io/{version}", "kind": "MachinePool", "name": POOL,
             "uid": POOL_UID, "controller": True, "blockOwnerDeletion": True}]


def kubeadm_spec(version, sysctl=capi.SYSCTL, max_pods="110", token="q3v8ks.x6f1b2c9d0e4a7m5"):
    """As CABPK leaves it: the discovery fields filled, and v1beta1's defaults."""
    spec = capi.kubeadm_spec(
        version, sysctl, max_pods,
        more_files=[{"path": "/etc/containerd/conf.d/mirror.toml", "content": "[plugins.cri.registry]\n  config_path = \"/etc/containerd/certs.d\"\n"}],
        more_commands=["systemctl restart containerd"],
        discovery={"bootstrapToken": {"token": token, "apiServerEndpoint": "10.20.0.10:6443",
                                      "caCertHashes": ["sha256:5b7c0f3e0d6a4c9e8f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f70"]}})
    if version == "v1beta1":
        spec["format"] = "cloud-config"
        spec["joinConfiguration"]["nodeRegistration"]["imagePullPolicy"] = "IfNotPresent"
    return spec


def kubeadm_status(version):
    if version == "v1beta1":
        return {"ready": True, "dataSecretName": CONFIG, "observedGeneration": 7}
    return {"initialization": {"dataSecretCreated": True}, "dataSecretName": CONFIG, "observedGeneration": 7}


def kubeadm_config(version="v1beta2", owned=True, labels=None, status=True, **spec_args):
    return capi.kubeadm_config(
        version, meta(CONFIG, "9a3e5b1c-7f2d-4e8a-b6c4-1d0f2e3a4b5c", 7, labels, pool_owner() if owned else None),
        kubeadm_spec(version, **spec_args), kubeadm_status(version) if status else None)


def machine_pool(version, config_ref, data_secret=CONFIG, replicas=3):
    bootstrap = {}
    if config_ref is not None:
        bootstrap["configRef"] = config_ref
    if data_secret:
        bootstrap["dataSecretName"] = data_secret
    infra = capi.ref(version, "AWSMachinePool", POOL, capi.INFRA_GROUP, namespace=NS)
    return capi.machine_pool(version, meta(POOL, POOL_UID, 4), bootstrap, infra, replicas)


def ref(version, name, kind="KubeadmConfig", group=capi.BOOTSTRAP_GROUP, api_version="v1beta2", namespace=NS):
    return capi.ref(version, kind, name, group, api_version, namespace)


def request(operation, obj=None, old=None, user=ALICE, sub_resource=None, dry_run=False):
    any_obj = obj or old
    group, _, version = any_obj["apiVersion"].rpartition("/")
    kind = any_obj["kind"]
    resource = {"group": group, "version": version, "resource": PLURAL[kind]}
    req = {"uid": str(uuid.UUID(int=(0x705ab4f5 << 96) + next(REQUEST_UIDS))), "kind": {"group": group, "version": version, "kind": kind},
           "resource": resource, "requestKind": {"group": group, "version": version, "kind": kind},
           "requestResource": resource, "name": any_obj["metadata"]["name"], "namespace": NS,
           "operation": operation, "userInfo": user, "object": obj, "oldObject": old, "dryRun": dry_run,
           "options": {"apiVersion": "meta.k8s.io/v1",
                       "kind": {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}[operation]}}
    if sub_resource:
        req["subResource"] = sub_resource
        req["requestSubResource"] = sub_resource
    return req


SCENARIOS = []
REQUEST_UIDS = itertools.count(1)  # deterministic uids: regenerating changes nothing


def scenario(name, description, req, expect, settings=None, session=None):
    SCENARIOS.append((name, description, req, expect, settings, session))


MP_FIELDS = ["metadata.deletionTimestamp", "metadata.name", "metadata.uid", "spec.template.spec.bootstrap",
             "spec.template.spec.infrastructureRef"]
CONFIG_FIELDS = ["metadata.name", "metadata.ownerReferences", "spec", "status"]


def list_exchange(api_version, kind, items, field_selector=None, masks=MP_FIELDS, error=None):
    """One kwctl replay exchange: the list the policy asks for and what the cluster answers."""
    request = (f"!KubernetesListResourceNamespace\napi_version: {api_version}\nkind: {kind}\n"
               f"namespace: {NS}\nlabel_selector: null\n"
               f"field_selector: {json.dumps(field_selector) if field_selector else 'null'}\n"
               "field_masks:\n" + "".join(f"- {m}\n" for m in masks))
    response = ({"type": "Error", "message": error} if error else
                {"type": "Success", "payload": json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, separators=(",", ":"))})
    return {"type": "Exchange", "request": request, "response": response}


def pools_exchange(pools, error=None):
    return list_exchange("cluster.x-k8s.io/v1beta2", "MachinePool", pools, error=error)


def config_exchange(name, items):
    return list_exchange("bootstrap.cluster.x-k8s.io/v1beta2", "KubeadmConfig", items,
                         field_selector=f"metadata.name={name}", masks=CONFIG_FIELDS)


def edited(obj, fn):
    new = copy.deepcopy(obj)
    fn(new)
    new["metadata"]["generation"] += 1
    new["metadata"]["resourceVersion"] = "482977"
    return new


def edit_in_place(o):
    o["spec"]["files"][0]["content"] = "net.ipv4.ip_forward = 1\nvm.max_map_count = 262144"
    args = o["spec"]["joinConfiguration"]["nodeRegistration"]["kubeletExtraArgs"]
    if isinstance(args, dict):
        args["max-pods"] = "58"
    else:
        args[0]["value"] = "58"


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
         request("UPDATE", machine_pool("v1beta2", ref("v1beta2", "workers-spot-acme-1", kind="AcmeConfig", group="bootstrap.acme.example.com")), machine_pool("v1beta2", ref("v1beta2", CONFIG))),
         {"allowed": True, "warningsContain": ["configRef kind AcmeConfig.bootstrap.acme.example.com is not in bootstrapConfigKinds"]})

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
acme_old = {"apiVersion": "bootstrap.acme.example.com/v1alpha1", "kind": "AcmeConfig",
            "metadata": meta("workers-spot-acme-1", "aa11bb22-cc33-4d44-8e55-ff6677889900", 2, None, pool_owner()),
            "spec": {"userData": "#cloud-config\nruncmd: [echo one]\n"}}
acme_new = edited(acme_old, lambda o: o["spec"].update(userData="#cloud-config\nruncmd: [echo two]\n"))
scenario("acmeconfig-custom-kind-edit",
         "a provider kind added through bootstrapConfigKinds is protected too",
         request("UPDATE", acme_new, acme_old), {"allowed": False, "messageContains": ["[spec.userData: Forbidden: changed]"]},
         settings={"bootstrapConfigKinds": [{"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig"}, {"apiGroup": "bootstrap.acme.example.com", "kind": "AcmeConfig"}]})
scenario("acmeconfig-not-listed",
         "the same edit with default settings: not a bootstrap config this policy knows, accepted untouched",
         request("UPDATE", acme_new, acme_old), {"allowed": True, "warnings": 0})

cm_old = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("kubeadm-config-notes", "0f0e0d0c-0b0a-4909-8807-060504030201"),
          "data": {"note": "rotate, don't edit"}}
cm_new = edited(cm_old, lambda o: o["data"].update(note="edited"))
cm_new["metadata"].pop("generation"); cm_old["metadata"].pop("generation")
scenario("other-kind-untouched",
         "a kind the policy does not judge (a ConfigMap) is accepted untouched",
         request("UPDATE", cm_new, cm_old), {"allowed": True, "messageAbsent": True, "warnings": 0})

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

# --- Bootstrap templates and MachineDeployments ---------------------------------------------------
TEMPLATE = "workers-md-0-5b2c9e71"


def kubeadm_template(version, sysctl=capi.SYSCTL, owners=None, labels=None):
    spec = kubeadm_spec(version, sysctl=sysctl)
    del spec["joinConfiguration"]["discovery"]
    return capi.kubeadm_config_template(
        version, meta(TEMPLATE, "7e6d5c4b-3a29-4180-9f7e-6d5c4b3a2918", 1, labels, owners), spec)


def machine_deployment(version, template_name, kind="MachineDeployment"):
    r = capi.ref(version, "KubeadmConfigTemplate", template_name, api_version="v1beta1")
    infra = capi.ref(version, "AWSMachineTemplate", "workers-md-0", capi.INFRA_GROUP)
    labels = {capi.CLUSTER_LABEL: capi.CLUSTER, "cluster.x-k8s.io/deployment-name": "workers-md-0"}
    return capi.machine_deployment(version, meta("workers-md-0", "5d4c3b2a-1908-4f7e-8d6c-5b4a39281706", 3),
                                   r, infra, kind=kind, labels=labels)


def edit_template(o):
    o["spec"]["template"]["spec"]["files"][0]["content"] = "net.ipv4.ip_forward = 1\nvm.max_map_count = 262144"


for v in ("v1beta1", "v1beta2"):
    t = kubeadm_template(v)
    scenario(f"kubeadmconfigtemplate-{v}-edit",
             f"{v}: editing spec.template.spec of a bootstrap template is rejected: copy it under a new name and rotate",
             request("UPDATE", edited(t, edit_template), t),
             {"allowed": False, "code": 403, "messageContains": [
                 f'KubeadmConfigTemplate.bootstrap.cluster.x-k8s.io "{TEMPLATE}" is invalid: [spec.template.spec.files[0].content: Forbidden: changed]',
                 "CAPI does not roll in-place bootstrap template edits out to existing Machines (cluster-api #4145)",
                 'create a new KubeadmConfigTemplate "workers-md-0-']})
    scenario(f"machinedeployment-{v}-rotate-template",
             f"{v}: rotating a MachineDeployment's configRef to a new template is allowed",
             request("UPDATE", machine_deployment(v, "workers-md-0-0c8e4a17"), machine_deployment(v, TEMPLATE)),
             {"allowed": True, "warnings": 0})
scenario("machineset-v1beta2-rotate-template",
         "MachineSets name templates the same way: rotation allowed",
         request("UPDATE", machine_deployment("v1beta2", "workers-md-0-0c8e4a17", kind="MachineSet"), machine_deployment("v1beta2", TEMPLATE, kind="MachineSet")),
         {"allowed": True, "warnings": 0})
t = kubeadm_template("v1beta2")
scenario("kubeadmconfigtemplate-v1beta2-metadata-only",
         "label edits of a template are allowed",
         request("UPDATE", edited(t, lambda o: o["metadata"]["labels"].update(team="payments")), t), {"allowed": True, "warnings": 0})
scenario("kubeadmconfigtemplate-v1beta2-template-edits-warn",
         "templateEdits: warn admits the edit with a warning",
         request("UPDATE", edited(t, edit_template), t),
         {"allowed": True, "warnings": 1, "warningsContain": ["spec.template.spec.files[0].content edited in place: not rolled out to existing Machines"]},
         settings={"templateEdits": "warn"})
cc = kubeadm_template("v1beta2", owners=[{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "ClusterClass", "name": "aws-quick-start", "uid": "0a1b2c3d-4e5f-4a6b-8c7d-8e9f0a1b2c3d"}])
scenario("kubeadmconfigtemplate-clusterclass-owned-edit",
         "a template a ClusterClass owns is edited on purpose: allowed, with a warning that every Cluster of the class rolls",
         request("UPDATE", edited(cc, edit_template), cc),
         {"allowed": True, "warnings": 1, "warningsContain": ["ClusterClass aws-quick-start uses this template: MachineDeployments roll at next reconcile, MachinePools not rotated"]})
topo_copy = kubeadm_template("v1beta2", labels={"topology.cluster.x-k8s.io/owned": ""})
scenario("kubeadmconfigtemplate-topology-copy-edit",
         "a Cluster's topology-owned copy edited by a user is rejected: the topology controller owns it",
         request("UPDATE", edited(topo_copy, edit_template), topo_copy),
         {"allowed": False, "messageContains": ["[spec.template.spec.files[0].content: Forbidden: changed]", "change the ClusterClass's template instead"]})
scenario("kubeadmconfigtemplate-topology-copy-controller",
         "the topology controller rotating its own copy in place is allowed",
         request("UPDATE", edited(topo_copy, edit_template), topo_copy, user=sa(CAPI_MANAGER)), {"allowed": True, "warnings": 0})


def md_exchange(kind, items):
    return list_exchange("cluster.x-k8s.io/v1beta2", kind, items)


def live_md(kind, template_name):
    md = machine_deployment("v1beta2", template_name, kind=kind)
    return {"metadata": {"name": md["metadata"]["name"], "uid": md["metadata"]["uid"]},
            "spec": {"template": {"spec": {"bootstrap": md["spec"]["template"]["spec"]["bootstrap"]}}}}


scenario("context-aware-template-unreferenced-edit",
         "contextAware: a template no MachineDeployment or MachineSet references may be edited, with a warning",
         request("UPDATE", edited(t, edit_template), t),
         {"allowed": True, "warnings": 1, "warningsContain": [f"KubeadmConfigTemplate {TEMPLATE} is referenced by no MachineDeployment or MachineSet"]},
         settings=CA, session=[md_exchange("MachineDeployment", [live_md("MachineDeployment", "workers-md-0-0c8e4a17")]), md_exchange("MachineSet", [])])
scenario("context-aware-template-delete-referenced",
         "contextAware: deleting a template a MachineDeployment references is rejected",
         request("DELETE", None, t),
         {"allowed": False, "messageContains": [f"[metadata.name: Forbidden: referenced by the configRef of MachineDeployment {NS}/workers-md-0]"]},
         settings=CA, session=[md_exchange("MachineDeployment", [live_md("MachineDeployment", TEMPLATE)]), md_exchange("MachineSet", [])])

# --- CAPI's own machinery: provider controllers and defaulting webhooks ---------------------------
# Each write below is what a provider does on its own (sources in src/capi/providers.rs and
# src/capi/defaulters.rs).

# CAPI v1.10's KubeadmConfig defaulter (bootstrap/kubeadm/internal/webhooks/kubeadmconfig.go,
# admission.DefaulterRemoveUnknownOrOmitableFields) prunes zero-valued omitempty fields from every
# CREATE/UPDATE: a config stored with useExperimentalRetryJoin: false loses it on the next write.
retry = kubeadm_config("v1beta1")
retry["spec"]["useExperimentalRetryJoin"] = False
pruned = lambda o: o["spec"].pop("useExperimentalRetryJoin")
scenario("kubeadmconfig-v1beta1-token-rotation-pruned",
         "CABPK rotating the token while CAPI v1.10's defaulter prunes useExperimentalRetryJoin: false: allowed, nothing said",
         request("UPDATE", edited(retry, lambda o: (pruned(o), o["spec"]["joinConfiguration"]["discovery"]["bootstrapToken"].update(token="m2p7qd.h4j8k2l6n1r5t9w3"))), retry, user=sa(KUBEADM_BOOTSTRAP)),
         {"allowed": True, "warnings": 0, "messageAbsent": True})
scenario("kubeadmconfig-v1beta1-label-edit-pruned",
         "a person's label-only edit, pruned by CAPI v1.10's defaulter on the way: the pruning is no edit, allowed",
         request("UPDATE", edited(retry, lambda o: (pruned(o), o["metadata"]["labels"].update(team="payments"))), retry),
         {"allowed": True, "warnings": 0})
scenario("kubeadmconfig-v1beta1-retry-join-flipped",
         "a person switching useExperimentalRetryJoin false -> true on a config in use: a real edit, rejected with its path",
         request("UPDATE", edited(retry, lambda o: o["spec"].update(useExperimentalRetryJoin=True)), retry),
         {"allowed": False, "messageContains": ["[spec.useExperimentalRetryJoin: Forbidden: changed]"]})
scenario("kubeadmconfig-v1beta2-controller-edit-audited",
         "CABPK itself changing a compared field of a config in use: never refused nor warned, the path in the audit log",
         request("UPDATE", edited(old, edit_in_place), old, user=sa(KUBEADM_BOOTSTRAP)),
         {"allowed": True, "warnings": 0, "messageAbsent": True,
          "auditAnnotationsContain": {CONTROLLER_WRITE: "would have rejected: [spec.files[0].content: Forbidden: changed, spec.joinConfiguration.nodeRegistration.kubeletExtraArgs[0].value: Forbidden: changed]"}})


def k3s_config(server_config):
    return {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KThreesConfig",
            "metadata": meta(CONFIG, "5b8e2c4a-3d1f-4a6b-9c7e-2f0a1b3c4d5e", 3, None, pool_owner()),
            "spec": {"version": "v1.33.4+k3s1", "serverConfig": server_config,
                     "agentConfig": {"nodeLabels": ["node.kubernetes.io/lifecycle=spot"]},
                     "preK3sCommands": ["sysctl --system"]},
            "status": {"ready": True, "dataSecretName": CONFIG, "observedGeneration": 3}}


# k3s-io/cluster-api-k3s bootstrap/api/v1beta2/kthreesconfig_webhook.go: the defaulter sets
# serverConfig.disableCloudController=true and cloudProviderName="external" when nil, on every
# CREATE/UPDATE (since v0.2.0). Only v1beta2 has the two fields.
k3s_old = k3s_config({"tlsSan": ["api.prod-eu-1.example.com"]})
k3s_defaulted = lambda o: o["spec"]["serverConfig"].update(disableCloudController=True, cloudProviderName="external")
scenario("kthreesconfig-v1beta2-label-edit-defaulted",
         "a label edit of a KThreesConfig created before k3s' defaulter: the defaults it fills are no edit, allowed",
         request("UPDATE", edited(k3s_old, lambda o: (k3s_defaulted(o), o["metadata"]["labels"].update(team="payments"))), k3s_old),
         {"allowed": True, "warnings": 0})
k3s_set = edited(k3s_old, k3s_defaulted)
scenario("kthreesconfig-v1beta2-cloud-provider-changed",
         "a person changing cloudProviderName once the defaulter set it: an edit, rejected with its path",
         request("UPDATE", edited(k3s_set, lambda o: o["spec"]["serverConfig"].update(cloudProviderName="aws")), k3s_set),
         {"allowed": False, "messageContains": ['KThreesConfig.bootstrap.cluster.x-k8s.io "workers-spot-8d2f0a1c" is invalid: [spec.serverConfig.cloudProviderName: Forbidden: changed]']})


def rke2_agent(user_data, fmt="cloud-config"):
    agent = {"nodeName": "{{ ds.meta_data.local_hostname }}", "additionalUserData": {"data": user_data}}
    if fmt:
        agent["format"] = fmt
    return agent


def rke2_config(version, agent):
    status = ({"ready": True, "dataSecretName": CONFIG, "observedGeneration": 5} if version == "v1beta1" else
              {"initialization": {"dataSecretCreated": True}, "dataSecretName": CONFIG, "observedGeneration": 5})
    return {"apiVersion": f"bootstrap.cluster.x-k8s.io/{version}", "kind": "RKE2Config",
            "metadata": meta(CONFIG, "7c1d3e5f-2a4b-4c6d-8e0f-1a2b3c4d5e6f", 5, None, pool_owner()),
            "spec": {"agentConfig": agent, "preRKE2Commands": ["sysctl --system"]},
            "status": status}


# rancher/cluster-api-provider-rke2 bootstrap/api/<version>/rke2config_webhook.go
# DefaultRKE2ConfigSpec: format "cloud-config" when empty; CorrectArbitraryData deletes
# write_files, ntp and runcmd from additionalUserData.data and re-emits each map value with
# yaml.v3 (indent 2, "\n  " prefix) and each list value with a "\n" prefix, on every write.
RKE2_DATA = {"bootcmd": "[sysctl --system, 'echo booted']", "users": "ubuntu: {sudo: 'ALL=(ALL) NOPASSWD:ALL'}",
             "write_files": "- path: /etc/motd\n  content: hi", "hostname": "spot"}
RKE2_DEFAULTED = {"bootcmd": "\n- sysctl --system\n- echo booted\n", "users": "\n  ubuntu:\n    sudo: ALL=(ALL) NOPASSWD:ALL\n  ",
                  "hostname": "spot"}
for v in ("v1beta1", "v1beta2"):
    rke2_old = rke2_config(v, rke2_agent(RKE2_DATA, fmt=None))
    scenario(f"rke2config-{v}-label-edit-defaulted",
             f"{v}: a label edit of an older RKE2Config, rewritten by RKE2's defaulter (format filled, user data re-emitted): allowed",
             request("UPDATE", edited(rke2_old, lambda o: (o["spec"].update(agentConfig=rke2_agent(RKE2_DEFAULTED)), o["metadata"]["labels"].update(team="payments"))), rke2_old),
             {"allowed": True, "warnings": 0})
    rke2_set = rke2_config(v, rke2_agent(RKE2_DEFAULTED))
    changed = dict(RKE2_DEFAULTED, bootcmd="\n- sysctl --system\n- echo rebooted\n")
    scenario(f"rke2config-{v}-user-data-edited",
             f"{v}: a person changing what a user-data value says: an edit, rejected at data.<key>",
             request("UPDATE", edited(rke2_set, lambda o: o["spec"].update(agentConfig=rke2_agent(changed))), rke2_set),
             {"allowed": False, "messageContains": ['RKE2Config.bootstrap.cluster.x-k8s.io "workers-spot-8d2f0a1c" is invalid: [spec.agentConfig.additionalUserData.data.bootcmd: Forbidden: changed]']})
rke2_old = rke2_config("v1beta2", rke2_agent(RKE2_DATA))
scenario("rke2config-v1beta2-controller-rewrite",
         "RKE2's controller (v0.11-v0.19) rewriting the user data it renders from: allowed, nothing said",
         request("UPDATE", edited(rke2_old, lambda o: o["spec"].update(agentConfig=rke2_agent(RKE2_DEFAULTED))), rke2_old, user=sa(RKE2_BOOTSTRAP)),
         {"allowed": True, "warnings": 0, "messageAbsent": True})
rke2_template = {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "RKE2ConfigTemplate",
                 "metadata": meta("workers-md-0-rke2", "8d2e4f6a-3b5c-4d7e-9f1a-2b3c4d5e6f7a", 2),
                 "spec": {"template": {"spec": {"agentConfig": rke2_agent(RKE2_DATA, fmt=None)}}}}
scenario("rke2configtemplate-v1beta2-label-edit-defaulted",
         "a label edit of an older RKE2ConfigTemplate, rewritten by its defaulter (since v0.20): allowed",
         request("UPDATE", edited(rke2_template, lambda o: (o["spec"]["template"]["spec"].update(agentConfig=rke2_agent(RKE2_DEFAULTED)), o["metadata"]["labels"].update(team="payments"))), rke2_template),
         {"allowed": True, "warnings": 0})


# --- Bad input and bad settings -----------------------------------------------------------------
odd = request("UPDATE", edited(old, lambda o: o.update(spec="#cloud-config")), old)
scenario("bad-input-spec-not-an-object",
         "a spec that is not an object gets a clear rejection naming spec, not a crash",
         odd, {"allowed": False, "messageContains": ["[spec: Forbidden: changed]"]})
bad_ref = request("CREATE", machine_pool("v1beta2", "workers-spot-8d2f0a1c"))
scenario("bad-input-configref-a-string",
         "a configRef that is a string gets a 400 naming the field",
         bad_ref, {"allowed": False, "code": 400, "messageContains": ["spec.template.spec.bootstrap.configRef: Invalid value: must be an object reference"]})
scenario("settings-typo-refused",
         "a misspelled setting is refused when the policy is loaded, never silently ignored",
         request("UPDATE", edited(old, edit_in_place), old), {"settingsError": "inPlaceEdit: unknown setting"},
         settings={"inPlaceEdit": "allow"})
scenario("settings-bad-path-refused",
         "a malformed path in ignoredPaths is refused, naming the key",
         request("UPDATE", edited(old, edit_in_place), old), {"settingsError": "ignoredPaths.KubeadmConfig[0]"},
         settings={"ignoredPaths": {"KubeadmConfig": ["spec.files[*.content"]}})


# --- Requests as kube-apiserver sends them --------------------------------------------------------
# The API server records who owns which field in metadata.managedFields, on object and oldObject
# alike, and kubectl's client-side apply keeps the whole applied manifest in an annotation: often
# as many bytes as the spec. No rule reads either, so each request below gets the answer of the
# same request without them.
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
CREATED = "2026-11-02T09:14:07Z"


def fields_v1(value):
    """The FieldsV1 set of `value` as the API server writes it: "f:<key>" per field, an item of a
    list keyed by path or name (files, v1beta2 kubeletExtraArgs) as "k:{...}" with "." for the
    item itself, {} for a leaf or an atomic list."""
    if isinstance(value, dict):
        return {f"f:{k}": fields_v1(v) for k, v in value.items()}
    if isinstance(value, list) and value and all(isinstance(i, dict) and ("path" in i or "name" in i) for i in value):
        out = {}
        for item in value:
            key = "path" if "path" in item else "name"
            out["k:" + json.dumps({key: item[key]}, separators=(",", ":"))] = {".": {}, **fields_v1(item)}
        return out
    return {}


def managed(obj, manager, operation, fields, time, subresource=None):
    entry = {"manager": manager, "operation": operation, "apiVersion": obj["apiVersion"], "time": time,
             "fieldsType": "FieldsV1", "fieldsV1": fields}
    if subresource:
        entry["subresource"] = subresource
    return entry


def applied(obj, server_side, time=CREATED):
    """`obj` as a person's `kubectl apply` of its spec leaves it (client-side: the
    kubectl-client-side-apply manager and the last-applied annotation; --server-side: the kubectl
    manager, operation Apply), then CAPI's controllers: CAPI core ("manager") sets the
    ownerReferences, CABPK the discovery fields it fills and its status."""
    obj = copy.deepcopy(obj)
    spec = copy.deepcopy(obj["spec"])
    spec.get("joinConfiguration", {}).pop("discovery", None)  # CABPK's, not the person's
    labels = {k: v for k, v in obj["metadata"].get("labels", {}).items() if k == "cluster.x-k8s.io/cluster-name"}
    person = {"f:metadata": {"f:labels": {".": {}, **fields_v1(labels)}}, "f:spec": fields_v1(spec)}
    if server_side:
        entries = [managed(obj, "kubectl", "Apply", person, time)]
    else:
        manifest = {"apiVersion": obj["apiVersion"], "kind": obj["kind"],
                    "metadata": {"annotations": {}, "labels": labels, "name": obj["metadata"]["name"], "namespace": NS},
                    "spec": spec}
        obj["metadata"].setdefault("annotations", {})[LAST_APPLIED] = json.dumps(manifest, separators=(",", ":")) + "\n"
        person["f:metadata"]["f:annotations"] = {".": {}, f"f:{LAST_APPLIED}": {}}
        entries = [managed(obj, "kubectl-client-side-apply", "Update", person, time)]
    if obj["metadata"].get("ownerReferences"):
        owners = {"k:" + json.dumps({"uid": o["uid"]}, separators=(",", ":")): {} for o in obj["metadata"]["ownerReferences"]}
        entries.append(managed(obj, "manager", "Update", {"f:metadata": {"f:ownerReferences": {".": {}, **owners}}}, "2026-11-02T09:14:09Z"))
    discovery = obj["spec"].get("joinConfiguration", {}).get("discovery")
    if discovery:
        entries.append(managed(obj, "capi-kubeadm-bootstrap-manager", "Update",
                               {"f:spec": {"f:joinConfiguration": {"f:discovery": fields_v1(discovery)}}}, "2026-11-29T07:52:31Z"))
    if obj.get("status"):
        entries.append(managed(obj, "capi-kubeadm-bootstrap-manager", "Update", {"f:status": {".": {}, **fields_v1(obj["status"])}},
                               "2026-11-02T09:14:12Z", subresource="status"))
    obj["metadata"]["managedFields"] = entries
    return obj


def reapplied(old, edit, server_side, time="2026-11-29T08:03:44Z"):
    """The person's `kubectl apply` of an edited manifest over `old` (as `applied` left it)."""
    new = edited(old, edit)
    redone = applied({k: v for k, v in new.items()}, server_side, time)
    # The controllers' entries keep their times; only the person's entry and annotation change.
    redone["metadata"]["managedFields"][1:] = copy.deepcopy(old["metadata"]["managedFields"][1:])
    return redone


for how, server_side in (("kubectl-apply", False), ("server-side-apply", True)):
    mf_old = applied(kubeadm_config("v1beta2"), server_side)
    scenario(f"kubeadmconfig-v1beta2-edit-in-use-{how}",
             f"the in-use edit as kube-apiserver sends it after `kubectl apply{' --server-side' if server_side else ''}`, managedFields on both objects: the same rejection",
             request("UPDATE", reapplied(mf_old, edit_in_place, server_side), mf_old),
             {"allowed": False, "code": 403, "messageContains": [
                 f'KubeadmConfig.bootstrap.cluster.x-k8s.io "{CONFIG}" is invalid: [spec.files[0].content: Forbidden: changed, spec.joinConfiguration.nodeRegistration.kubeletExtraArgs[0].value: Forbidden: changed]',
                 f"The config is in use by MachinePool {NS}/{POOL}"]})
mf_old = applied(kubeadm_config("v1beta2"), server_side=False)
mf_new = edited(mf_old, lambda o: o["spec"]["joinConfiguration"]["discovery"]["bootstrapToken"].update(token="m2p7qd.h4j8k2l6n1r5t9w3"))
mf_new["metadata"]["managedFields"][2]["time"] = "2026-11-29T08:00:02Z"
scenario("kubeadmconfig-v1beta2-token-rotation-managed-fields",
         "CABPK's token rotation as kube-apiserver sends it (managedFields of kubectl, CAPI and CABPK, the last-applied annotation): allowed, nothing said",
         request("UPDATE", mf_new, mf_old, user=sa(KUBEADM_BOOTSTRAP)),
         {"allowed": True, "warnings": 0, "messageAbsent": True})
mp_old = machine_pool("v1beta2", ref("v1beta2", CONFIG))
mp_old["metadata"]["finalizers"] = ["machinepool.cluster.x-k8s.io"]


def mp_applied(pool, time):
    spec = copy.deepcopy(pool["spec"])
    spec["template"]["spec"]["bootstrap"].pop("dataSecretName", None)  # CAPI's, not the person's
    manifest = {"apiVersion": pool["apiVersion"], "kind": pool["kind"],
                "metadata": {"annotations": {}, "name": pool["metadata"]["name"], "namespace": NS}, "spec": spec}
    pool = copy.deepcopy(pool)
    pool["metadata"]["annotations"] = {LAST_APPLIED: json.dumps(manifest, separators=(",", ":")) + "\n"}
    pool["metadata"]["managedFields"] = [
        managed(pool, "kubectl-client-side-apply", "Update",
                {"f:metadata": {"f:annotations": {".": {}, f"f:{LAST_APPLIED}": {}}}, "f:spec": fields_v1(spec)}, time),
        managed(pool, "manager", "Update",
                {"f:metadata": {"f:finalizers": {".": {}, 'v:"machinepool.cluster.x-k8s.io"': {}}},
                 "f:spec": {"f:template": {"f:spec": {"f:bootstrap": {"f:dataSecretName": {}}}}}}, "2026-11-02T09:15:40Z")]
    return pool


mp_new = edited(mp_old, lambda o: o["spec"]["template"]["spec"]["bootstrap"].update(configRef=ref("v1beta2", "workers-spot-4c1d9e2b")))
scenario("machinepool-v1beta2-rotate-configref-kubectl-apply",
         "a configRef rotation by `kubectl apply`, as kube-apiserver sends it (managedFields, last-applied annotation): allowed",
         request("UPDATE", mp_applied(mp_new, "2026-11-29T08:03:44Z"), mp_applied(mp_old, CREATED)),
         {"allowed": True, "warnings": 0})


def yaml_scalar(value):
    return json.dumps(value, ensure_ascii=False)



# --- clusterctl move: it deletes configs and templates still referenced, right after
# annotating each clusterctl.cluster.x-k8s.io/delete-for-move; it creates them in the target with
# their pool's ownerReference. Empty sessions: no lookup is made.
def for_move(o):
    o = copy.deepcopy(o)
    o["metadata"].setdefault("annotations", {})["clusterctl.cluster.x-k8s.io/delete-for-move"] = ""
    return o
MOVE_AUDIT = {"delete-for-move": "clusterctl.cluster.x-k8s.io/delete-for-move"}
scenario("clusterctl-move-delete-referenced-config",
         "contextAware: clusterctl move deletes a config its live pool references, annotated delete-for-move: allowed, audited, no lookup",
         request("DELETE", None, for_move(old)),
         {"allowed": True, "warnings": 0, "auditAnnotationsContain": MOVE_AUDIT},
         settings=CA, session=[])
scenario("clusterctl-move-delete-config-reject-mode",
         "without contextAware, the move's DELETE of an annotated config is allowed and audited too",
         request("DELETE", None, for_move(old)),
         {"allowed": True, "warnings": 0, "auditAnnotationsContain": MOVE_AUDIT})
scenario("clusterctl-move-delete-referenced-template",
         "contextAware: clusterctl move deletes a template a MachineDeployment references, annotated delete-for-move: allowed, audited",
         request("DELETE", None, for_move(t)),
         {"allowed": True, "warnings": 0, "auditAnnotationsContain": MOVE_AUDIT},
         settings=CA, session=[])
scenario("clusterctl-move-delete-annotation-in-the-request-only",
         "contextAware: the annotation counts on the stored object only; DELETE of an unannotated referenced config is still refused",
         request("DELETE", None, old),
         {"allowed": False, "messageContains": [f"[metadata.name: Forbidden: referenced by the configRef of MachinePool {NS}/{POOL}]"]},
         settings=CA, session=[pools_exchange([live_pool(CONFIG)])])
scenario("clusterctl-move-create-moved-config",
         "contextAware: the target side of a move creates the config with its pool's ownerReference: not a consumed name, no warning, no lookup",
         request("CREATE", kubeadm_config("v1beta2", owned=True, status=False)),
         {"allowed": True, "warnings": 0},
         settings=CA, session=[])

# RKE2's defaulter reads plain scalars as gopkg.in/yaml.v3 does (found in the real cluster,
# cluster-test TestRKE2DefaulterNumbers, testdata/providers/rke2config-numbers.yaml): `30.0` is
# re-emitted `30`, `010` is octal and re-emitted `8`. A person's label of a config stored before
# the defaulter carries that text: no edit.
RKE2_NUMBERS = dict(RKE2_DATA, power_state="{mode: reboot, delay: now, timeout: 30.0}",
                    swap="{filename: /swap.img, size: auto, maxsize: 010}")
RKE2_NUMBERS_DEFAULTED = dict(RKE2_DEFAULTED, power_state="\n  delay: now\n  mode: reboot\n  timeout: 30\n  ",
                              swap="\n  filename: /swap.img\n  maxsize: 8\n  size: auto\n  ")
rke2_numbers = rke2_config("v1beta1", rke2_agent(RKE2_NUMBERS, fmt=None))
scenario("rke2config-v1beta1-label-edit-defaulted-numbers",
         "a label edit of an older RKE2Config whose user data has 30.0 and 010, re-emitted by RKE2's defaulter (yaml.v3) as 30 and 8: allowed",
         request("UPDATE", edited(rke2_numbers, lambda o: (o["spec"].update(agentConfig=rke2_agent(RKE2_NUMBERS_DEFAULTED)), o["metadata"]["labels"].update(team="payments"))), rke2_numbers),
         {"allowed": True, "warnings": 0})


# --- CAPI v1.10's KubeadmConfigTemplate defaulter (found in the cluster test, TestV1beta1EraTemplate):
# a template stored before the defaulter ran gets format and imagePullPolicy on the next write,
# a person's label-only change included.
def v110_template_defaults(o):
    spec = o["spec"]["template"]["spec"]
    spec["format"] = "cloud-config"
    spec.setdefault("joinConfiguration", {}).setdefault("nodeRegistration", {})["imagePullPolicy"] = "IfNotPresent"
t_stored = kubeadm_template("v1beta1")
t_labelled = edited(t_stored, v110_template_defaults)
t_labelled["metadata"].setdefault("labels", {})["team"] = "platform"
scenario("kubeadmconfigtemplate-v1beta1-label-with-v110-defaults",
         "v1beta1: a label-only update of a template stored before CAPI v1.10's defaulter, which fills format and imagePullPolicy: allowed",
         request("UPDATE", t_labelled, t_stored),
         {"allowed": True, "warnings": 0})

# --- CAPI v1.10's defaulters re-marshal v1beta1 durations (found in the cluster test,
# TestV1beta1Era): a stored `timeout: 5m` comes back `5m0s` on a person's label-only change.
def with_timeout(text):
    def f(o):
        o["spec"]["joinConfiguration"]["discovery"]["timeout"] = text
    return f
c_stored = edited(kubeadm_config("v1beta1"), with_timeout("5m"))
c_labelled = edited(c_stored, with_timeout("5m0s"))
c_labelled["metadata"].setdefault("labels", {})["team"] = "platform"
scenario("kubeadmconfig-v1beta1-label-with-remarshalled-duration",
         "v1beta1: a label-only update whose discovery.timeout CAPI v1.10's defaulter re-marshalled (5m -> 5m0s): allowed",
         request("UPDATE", c_labelled, c_stored),
         {"allowed": True, "warnings": 0})
scenario("kubeadmconfig-v1beta1-duration-changed",
         "v1beta1: discovery.timeout changed to another duration is an edit, named by its path",
         request("UPDATE", edited(c_stored, with_timeout("10m")), c_stored),
         {"allowed": False, "code": 403, "messageContains": ["[spec.joinConfiguration.discovery.timeout: Forbidden: changed]"]})

# --- A GitOps repository still in v1beta1, on v1beta2 storage -------------------------------------
# CAPI v1.11+ stores KubeadmConfig as v1beta2, which has no useExperimentalRetryJoin and holds
# files[].append as a pointer that v1beta1's plain bool cannot set to false. Read back through
# v1beta1, CAPI's down-conversion drops both and writes the hub's data into conversion-data
# (util/conversion MarshalData), so every unchanged re-apply of the repository adds them again.
CONVERSION_DATA = "cluster.x-k8s.io/conversion-data"


def v1beta1_repository(retry_join):
    """The repository's manifest: every zero spelled out, as cluster-test/testdata/v1beta1 has it."""
    o = kubeadm_config("v1beta1")
    o["spec"]["useExperimentalRetryJoin"] = retry_join
    for f in o["spec"]["files"]:
        f["append"] = False
    return o


def read_through_v1beta1(o):
    """`o` as kube-apiserver reads it from v1beta2 storage through v1beta1."""
    o = copy.deepcopy(o)
    o["spec"].pop("useExperimentalRetryJoin", None)
    for f in o["spec"]["files"]:
        if not f.get("append"):
            f.pop("append", None)
    hub = {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfig",
           "spec": {"format": o["spec"].get("format")}, "status": {"initialization": {"dataSecretCreated": True}}}
    o["metadata"].setdefault("annotations", {})[CONVERSION_DATA] = json.dumps(hub, separators=(",", ":"))
    return o


def manifest_fields(retry_join):
    def put(o):
        o["spec"]["useExperimentalRetryJoin"] = retry_join
        for f in o["spec"]["files"]:
            f.setdefault("append", False)
    return put


for retry_join in (False, True):
    stored = read_through_v1beta1(applied(v1beta1_repository(retry_join), server_side=False))
    scenario(f"kubeadmconfig-v1beta1-gitops-reapply-retry-join-{str(retry_join).lower()}-v1beta2-stored",
             f"an unchanged client-side re-apply of a v1beta1 manifest (useExperimentalRetryJoin: {str(retry_join).lower()}, append: false) to a config stored as v1beta2: storage drops both, no change, no warning",
             request("UPDATE", edited(stored, manifest_fields(retry_join)), stored, user=sa("system:serviceaccount:argocd:argocd-application-controller")),
             {"allowed": True, "warnings": 0, "messageAbsent": True})
ssa_stored = read_through_v1beta1(applied(v1beta1_repository(True), server_side=True))
scenario("kubeadmconfig-v1beta1-gitops-reapply-server-side-v1beta2-stored",
         "an unchanged server-side re-apply (as Flux syncs) of a v1beta1 manifest with useExperimentalRetryJoin: true to a config stored as v1beta2: no change, no warning",
         request("UPDATE", edited(ssa_stored, manifest_fields(True)), ssa_stored, user=sa("system:serviceaccount:flux-system:kustomize-controller")),
         {"allowed": True, "warnings": 0, "messageAbsent": True})
v1beta2_stored = read_through_v1beta1(applied(v1beta1_repository(False), server_side=False))
NO_EFFECT = "spec.useExperimentalRetryJoin changed, no effect: the stored KubeadmConfig version has no such field"
scenario("kubeadmconfig-v1beta1-retry-join-changed-v1beta2-stored",
         "a person's apply switching useExperimentalRetryJoin false -> true through v1beta1, stored as v1beta2: storage drops it, admitted with the no-effect warning",
         request("UPDATE", reapplied(v1beta2_stored, manifest_fields(True), server_side=False), v1beta2_stored),
         {"allowed": True, "warnings": 1, "warningsContain": [NO_EFFECT]})
scenario("kubeadmconfig-v1beta1-retry-join-changed-beside-edit-v1beta2-stored",
         "the same switch beside a real edit: refused, naming only the real path, and the no-effect warning",
         request("UPDATE", reapplied(v1beta2_stored, lambda o: (manifest_fields(True)(o), edit_in_place(o)), server_side=False), v1beta2_stored),
         {"allowed": False, "messageContains": ["[spec.files[0].content: Forbidden: changed, spec.joinConfiguration.nodeRegistration.kubeletExtraArgs.max-pods: Forbidden: changed]"],
          "warningsContain": [NO_EFFECT]})
# CAPI v1.10 stores v1beta1 (nothing converted, no annotation): the zeros are still no change,
# the same switch is an edit (kubeadmconfig-v1beta1-retry-join-flipped).
v110_stored = applied(v1beta1_repository(False), server_side=False)
v110_stored["spec"].pop("useExperimentalRetryJoin")
for f in v110_stored["spec"]["files"]:
    f.pop("append")
scenario("kubeadmconfig-v1beta1-zeros-readded-v1beta1-stored",
         "CAPI v1.10 (v1beta1 stored): a re-apply adding back the zeros its defaulter pruned (useExperimentalRetryJoin: false, append: false) is no change (was refused as added)",
         request("UPDATE", edited(v110_stored, manifest_fields(False)), v110_stored, user=sa("system:serviceaccount:argocd:argocd-application-controller")),
         {"allowed": True, "warnings": 0, "messageAbsent": True})


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


# --- k0smotron's documented version bump (docs/update/update-capi-cluster-workers.md) ------------
# With CAPI's in-place updates extension, k0smotron's docs bump spec.template.spec.version on the
# MachineDeployment and on its K0sWorkerConfigTemplate, in place. The version alone is admitted
# with a warning (the MachineDeployment's own bump rolls it out); with anything else it is an
# edit like any other, the version listed with the rest.
K0S_TEMPLATE = "workers-md-0-k0s"


def k0s_template(version, k0s_version="v1.30.1+k0s.0"):
    return capi.k0s_worker_config_template(
        version, meta(K0S_TEMPLATE, "2c4e6a8b-0d1f-4a3c-9e5b-7d9f1b3d5f70", 1),
        {"version": k0s_version, "args": ["--labels=pool=worker-pool-1"]})


def bump_k0s(o):
    o["spec"]["template"]["spec"]["version"] = "v1.31.3+k0s.0"


def bump_k0s_and_args(o):
    bump_k0s(o)
    o["spec"]["template"]["spec"]["args"].append("--kubelet-extra-args=--max-pods=200")


for v in ("v1beta1", "v1beta2"):
    k0s = k0s_template(v)
    scenario(f"k0sworkerconfigtemplate-{v}-version-bump",
             f"{v}: k0smotron's documented in-place bump of a K0sWorkerConfigTemplate's spec.template.spec.version, alone: allowed, with a warning that the MachineDeployment's version bump rolls it out",
             request("UPDATE", edited(k0s, bump_k0s), k0s),
             {"allowed": True, "warnings": 1, "warningsContain": ["spec.template.spec.version edited in place (k0smotron docs): rolls out with the MachineDeployment's version bump only"]})
    scenario(f"k0sworkerconfigtemplate-{v}-version-and-args",
             f"{v}: the same version bump with another field changed is an in-place template edit like any other: rejected, the version listed too",
             request("UPDATE", edited(k0s, bump_k0s_and_args), k0s),
             {"allowed": False, "code": 403, "messageContains": [
                 f'K0sWorkerConfigTemplate.bootstrap.cluster.x-k8s.io "{K0S_TEMPLATE}" is invalid: [spec.template.spec.args[1]: Forbidden: added, spec.template.spec.version: Forbidden: changed]',
                 'create a new K0sWorkerConfigTemplate "workers-md-0-k0s-']})


# --- CAPI v1.14: spec.files[].contentFormat -------------------------------------------------------
# v1.14 added contentFormat (Raw or Template: CABPK renders the file as a Go template) to
# KubeadmConfig v1beta2 and v1beta1 alike, converted one to one, with no default (a file written
# without it is stored without it; the cluster test's contentFormat step reads it back). Its
# change is an edit like any other, in either version.
TEMPLATE_FILE = {"path": "/etc/kubernetes/control-plane-version", "contentFormat": "Template",
                 "content": "control plane {{ .controlPlane.version }}\n"}


def with_template_file(o):
    o = copy.deepcopy(o)
    o["spec"]["files"].append(copy.deepcopy(TEMPLATE_FILE))
    return o


def content_format(value):
    def put(o):
        o["spec"]["files"][-1]["contentFormat"] = value
    return put


cf_stored = with_template_file(kubeadm_config("v1beta2"))
cf_path = f"spec.files[{len(cf_stored['spec']['files']) - 1}].contentFormat"
scenario("kubeadmconfig-v1beta2-content-format-changed",
         "CAPI v1.14: a person's change of a file's contentFormat (Template -> Raw) in a config a MachinePool uses: rejected, naming the path",
         request("UPDATE", edited(cf_stored, content_format("Raw")), cf_stored),
         {"allowed": False, "code": 403, "messageContains": [f"[{cf_path}: Forbidden: changed]", f"The config is in use by MachinePool {NS}/{POOL}"]})
cf_v1beta1 = read_through_v1beta1(applied(with_template_file(kubeadm_config("v1beta1")), server_side=False))
scenario("kubeadmconfig-v1beta1-content-format-reapplied-v1beta2-stored",
         "CAPI v1.14: an unchanged re-apply through v1beta1 (which has contentFormat too) of a config with a Template file, stored as v1beta2: no change, no warning",
         request("UPDATE", edited(cf_v1beta1, lambda o: None), cf_v1beta1, user=sa("system:serviceaccount:argocd:argocd-application-controller")),
         {"allowed": True, "warnings": 0, "messageAbsent": True})
scenario("kubeadmconfig-v1beta1-content-format-changed-v1beta2-stored",
         "CAPI v1.14: the same change of contentFormat through v1beta1, stored as v1beta2: rejected by its v1beta1 path, no no-effect warning (storage keeps the field)",
         request("UPDATE", reapplied(cf_v1beta1, content_format("Raw"), server_side=False), cf_v1beta1),
         {"allowed": False, "code": 403, "messageContains": [f"[{cf_path}: Forbidden: changed]"], "warnings": 0})

# --- contextAware: what the refusal says of the pool's infrastructure -----------------------------
# Per kind the pool's infrastructureRef names (src/capi/infrastructure.rs); a kind without a record
# gets what holds for every pool, as without lookups.
infra_old = kubeadm_config("v1beta2")
INFRA_REFUSALS = [
    ("azure", capi.INFRA_GROUP, "AzureMachinePool", "On a rotation, AzureMachinePool replaces no existing instance: new instances take the new data; delete the pool's Machines to replace them, as CAPZ documents"),
    ("aws", capi.INFRA_GROUP, "AWSMachinePool", "On a rotation, AWSMachinePool replaces the existing instances with an instance refresh, unless spec.refreshPreferences.disable is true"),
    ("aws-managed", capi.INFRA_GROUP, "AWSManagedMachinePool", "This edit would still reach the nodes, unrecorded: AWSManagedMachinePool rolls every node on a new launch template version, an in-place edit included, if it has spec.awsLaunchTemplate; a rotation rolls them too, recorded in the pool"),
    ("docker", capi.INFRA_GROUP, "DockerMachinePool", "On a rotation, DockerMachinePool replaces no existing instance: new instances take the new data; delete the pool's Machines to replace them"),
    ("gcp", capi.INFRA_GROUP, "GCPMachinePool", "On a rotation, GCPMachinePool replaces no existing instance: new instances take the new data; to replace them, drain the nodes, then replace the VMs of the managed instance group from GCP (gcloud compute instance-groups managed rolling-action replace)"),
    ("oci", capi.INFRA_GROUP, "OCIMachinePool", "On a rotation, OCIMachinePool replaces no existing instance: new instances take the new data; to replace them, drain the nodes, then detach their instances from the instance pool with auto-terminate and no size decrement (OCI); deleting a pool Machine leaves its instance running"),
    ("unknown-kind", capi.INFRA_GROUP, "ExampleMachinePool", None),
]
for slug, group, kind, text in INFRA_REFUSALS:
    effect = f"{text} ({INFRA_DOCS})." if text else PROVIDER_DECIDES
    scenario(f"context-aware-edit-in-use-{slug}",
             f"contextAware: an in-place edit of the config of a pool on {kind} is refused, saying what {'its infrastructure' if text else 'every infrastructure'} does after a rotation",
             request("UPDATE", edited(infra_old, edit_in_place), infra_old),
             {"allowed": False, "code": 403, "messageContains": [
                 f"The config is in use by MachinePool {NS}/{POOL}, and {ONLY_A_ROTATION}. {effect} To rotate, create a new KubeadmConfig \"workers-spot-"]},
             settings=CA, session=[pools_exchange([live_pool(CONFIG, infrastructure=capi.ref("v1beta2", kind, POOL, group))])])

def write():
    keep = set()
    for name, description, req, expect, settings, session in SCENARIOS:
        keep.add(name)
        d = os.path.join(HERE, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "request.json"), "w") as f:
            json.dump(req, f, indent=2, ensure_ascii=False)
            f.write("\n")
        lines = [f"description: {yaml_scalar(description)}"]
        if settings is not None:
            lines.append(f"settings: {json.dumps(settings)}")
        if session is not None:
            lines.append("contextAware: true")
            lines.append("session: session.yml")
            with open(os.path.join(d, "session.yml"), "w") as f:
                f.write("# kwctl replay session: the cluster's answers to the policy's lookups, in order.\n")
                if not session:
                    f.write("[]\n")
                for exchange in session:
                    f.write("- type: Exchange\n  request: |\n")
                    f.write("".join(f"    {line}\n" for line in exchange["request"].splitlines()))
                    f.write("  response:\n")
                    for k, v in exchange["response"].items():
                        f.write(f"    {k}: {json.dumps(v)}\n")
        lines.append("expect:")
        for key, value in expect.items():
            lines.append(f"  {key}: {json.dumps(value, ensure_ascii=False)}")
        with open(os.path.join(d, "scenario.yaml"), "w") as f:
            f.write("\n".join(lines) + "\n")
    print(f"wrote {len(SCENARIOS)} scenarios")


if __name__ == "__main__":
    write()
