"""Requests as kube-apiserver sends them (managedFields, last-applied), clusterctl move, and
what the defaulters rewrite on a person's write."""
from scenario_base import *  # noqa: F401,F403
from scenarios_rules import *  # noqa: F401,F403
from scenarios_context_aware import *  # noqa: F401,F403
from scenarios_templates import *  # noqa: F401,F403
from scenarios_providers import *  # noqa: F401,F403

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
