"""A GitOps repository still in v1beta1, on v1beta2 storage."""
from scenario_base import *  # noqa: F401,F403
from scenarios_apiserver import *  # noqa: F401,F403

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
