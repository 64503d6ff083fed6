"""CAPI's own machinery: provider controllers and defaulting webhooks."""
from scenario_base import *  # noqa: F401,F403
from scenarios_rules import *  # noqa: F401,F403

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
