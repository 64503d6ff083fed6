"""Bootstrap templates and the MachineDeployments that name them."""
from scenario_base import *  # noqa: F401,F403
from scenarios_context_aware import *  # noqa: F401,F403

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
