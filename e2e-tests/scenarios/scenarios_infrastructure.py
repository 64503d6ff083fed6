"""contextAware: what the refusal says of the pool's infrastructure."""
from scenario_base import *  # noqa: F401,F403
from scenarios_context_aware import *  # noqa: F401,F403

# --- contextAware: what the refusal says of the pool's infrastructure -----------------------------
# Per kind the pool's infrastructureRef names (src/capi/infrastructure.rs); a kind without a record
# gets what holds for every pool, as without lookups.
infra_old = kubeadm_config("v1beta2")
INFRA_REFUSALS = [
    ("azure", capi.INFRA_GROUP, "AzureMachinePool", "On a rotation, AzureMachinePool replaces no existing instance: new instances take the new data; delete the pool's Machines to replace them (CAPI drains each node first); CAPZ documents deleting their AzureMachinePoolMachines"),
    ("aws", capi.INFRA_GROUP, "AWSMachinePool", "On a rotation, AWSMachinePool replaces the existing instances with an instance refresh, unless spec.refreshPreferences.disable is true; CAPA v2.11.1 starts none on the first change after an upgrade from a CAPA that did not tag the launch template with the data Secret's name, and does not retry one that fails to start"),
    ("aws-managed", capi.INFRA_GROUP, "AWSManagedMachinePool", "This edit would still reach the nodes, unrecorded: AWSManagedMachinePool rolls every node on a new launch template version, an in-place edit included, if it has spec.awsLaunchTemplate; a rotation rolls them too, recorded in the pool"),
    ("docker", capi.INFRA_GROUP, "DockerMachinePool", "On a rotation, DockerMachinePool replaces no existing instance: new instances take the new data; delete the pool's Machines to replace them"),
    ("gcp", capi.INFRA_GROUP, "GCPMachinePool", "On a rotation, GCPMachinePool replaces no existing instance (inferred from Google's API reference): new instances take the new data; to replace them, drain the nodes, then replace the VMs of the managed instance group from GCP (gcloud compute instance-groups managed rolling-action replace)"),
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
