"""What every scenario is built from: the objects, the AdmissionRequest, the replayed lookups,
and `scenario`, which records one for generate.py to write."""
import copy
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
OTHER_PROVIDER = "system:serviceaccount:example-bootstrap-system:example-bootstrap-manager"
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
def plural(kind):
    """A kind's resource, as kubebuilder names every CRD's (and the API server ConfigMap's)."""
    return kind.lower() + "s"


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
    resource = {"group": group, "version": version, "resource": plural(kind)}
    req = {"uid": "", "kind": {"group": group, "version": version, "kind": kind},
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
# A request's uid is derived from its scenario's name: regenerating changes nothing, and a new
# scenario changes no other scenario's file.
REQUEST_UID_NAMESPACE = uuid.UUID("705ab4f5-0000-4000-8000-000000000000")


def scenario(name, description, req, expect, settings=None, session=None):
    req = dict(req, uid=str(uuid.uuid5(REQUEST_UID_NAMESPACE, name)))
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
