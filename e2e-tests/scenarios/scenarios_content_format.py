"""CAPI v1.14's spec.files[].contentFormat."""
from scenario_base import *  # noqa: F401,F403
from scenarios_apiserver import *  # noqa: F401,F403
from scenarios_stored_versions import *  # noqa: F401,F403

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
