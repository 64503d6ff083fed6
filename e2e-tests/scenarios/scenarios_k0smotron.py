"""k0smotron's documented version bump of a template."""
from scenario_base import *  # noqa: F401,F403

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
