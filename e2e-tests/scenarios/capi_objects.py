"""The CAPI objects the fixture generators build, as plain dicts, shared by
e2e-tests/scenarios/generate.py (objects as a cluster stores them, in AdmissionRequests) and
capi-rollout-check/tests/fixtures/generate.py (the same objects as manifests in Git).

One workload throughout: MachinePool workers-spot of cluster prod-eu-1 in namespace
team-payments, its KubeadmConfig (a sysctl file, max-pods, a spot node label), and a
MachineDeployment with its KubeadmConfigTemplate. The builders take what differs between the
two generators (metadata, version, which refs) as arguments; each generator keeps its own
scenario-specific objects and its own output format."""

NS = "team-payments"
CLUSTER = "prod-eu-1"
CLUSTER_LABEL = "cluster.x-k8s.io/cluster-name"
K8S_VERSION = "v1.33.4"
BOOTSTRAP_GROUP = "bootstrap.cluster.x-k8s.io"
INFRA_GROUP = "infrastructure.cluster.x-k8s.io"
SYSCTL = "net.ipv4.ip_forward = 1"
NODE_NAME = "{{ ds.meta_data.local_hostname }}"
SPOT_LABEL = "node.kubernetes.io/lifecycle=spot"


def metadata(name, namespace=NS, stored=None, labels=None, owners=None):
    """name and namespace; `stored`: {uid, generation}, what the API server adds; then labels
    and ownerReferences when given."""
    m = {"name": name, "namespace": namespace}
    if stored:
        m.update(uid=stored["uid"], resourceVersion="482913", generation=stored["generation"],
                 creationTimestamp="2026-11-02T09:14:07Z")
    if labels is not None:
        m["labels"] = labels
    if owners:
        m["ownerReferences"] = owners
    return m


def ref(version, kind, name, group=BOOTSTRAP_GROUP, api_version="v1beta2", namespace=None):
    """A contract reference as the owner's version spells it: v1beta1 apiVersion (and an
    optional namespace), v1beta2 apiGroup."""
    if version == "v1beta1":
        r = {"apiVersion": f"{group}/{api_version}", "kind": kind, "name": name}
        if namespace:
            r["namespace"] = namespace
        return r
    return {"apiGroup": group, "kind": kind, "name": name}


def kubelet_args(version, args):
    """kubeletExtraArgs: a map in v1beta1, a list of name/value pairs in v1beta2."""
    if version == "v1beta2":
        return [{"name": k, "value": v} for k, v in args.items()]
    return dict(args)


def sysctl_file(content):
    return {"path": "/etc/sysctl.d/90-kubernetes.conf", "owner": "root:root", "permissions": "0644",
            "content": content}


def kubeadm_spec(version, sysctl=SYSCTL, max_pods="110", more_files=(), more_commands=(), discovery=None):
    """The workload's KubeadmConfig spec: the sysctl file, max-pods and the spot label."""
    spec = {
        "files": [sysctl_file(sysctl), *more_files],
        "preKubeadmCommands": ["sysctl --system", *more_commands],
        "joinConfiguration": {
            "nodeRegistration": {"name": NODE_NAME, "kubeletExtraArgs": kubelet_args(
                version, {"max-pods": max_pods, "node-labels": SPOT_LABEL})},
        },
    }
    if discovery:
        spec["joinConfiguration"]["discovery"] = discovery
    return spec


def kubeadm_config(version, meta, spec, status=None):
    obj = {"apiVersion": f"{BOOTSTRAP_GROUP}/{version}", "kind": "KubeadmConfig", "metadata": meta, "spec": spec}
    if status is not None:
        obj["status"] = status
    return obj


def kubeadm_config_template(version, meta, spec):
    return {"apiVersion": f"{BOOTSTRAP_GROUP}/{version}", "kind": "KubeadmConfigTemplate",
            "metadata": meta, "spec": {"template": {"spec": spec}}}


def k0s_worker_config_template(version, meta, spec):
    return {"apiVersion": f"{BOOTSTRAP_GROUP}/{version}", "kind": "K0sWorkerConfigTemplate",
            "metadata": meta, "spec": {"template": {"spec": spec}}}


def machine_spec(bootstrap, infrastructure):
    """spec.template.spec of a MachinePool, MachineDeployment or MachineSet."""
    return {"clusterName": CLUSTER, "version": K8S_VERSION, "bootstrap": bootstrap,
            "infrastructureRef": infrastructure}


def machine_pool(version, meta, bootstrap, infrastructure, replicas=3):
    return {"apiVersion": f"cluster.x-k8s.io/{version}", "kind": "MachinePool", "metadata": meta,
            "spec": {"clusterName": CLUSTER, "replicas": replicas,
                     "template": {"spec": machine_spec(bootstrap, infrastructure)}}}


def machine_deployment(version, meta, config_ref, infrastructure, kind="MachineDeployment", labels=None):
    """A MachineDeployment (or MachineSet) of 3; `labels`: its selector and template labels."""
    spec = {"clusterName": CLUSTER, "replicas": 3}
    template = {}
    if labels:
        spec["selector"] = {"matchLabels": labels}
        template["metadata"] = {"labels": labels}
    template["spec"] = machine_spec({"configRef": config_ref}, infrastructure)
    spec["template"] = template
    return {"apiVersion": f"cluster.x-k8s.io/{version}", "kind": kind, "metadata": meta, "spec": spec}
