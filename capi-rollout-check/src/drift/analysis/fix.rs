//! The fix text: the commands that bring a pool's instances to the data they should run.

use serde_json::Value;

use super::{Inputs, PoolReport, WorkerKind};

/// The config kind's kubectl resource: `kubeadmconfigs.bootstrap.cluster.x-k8s.io`.
pub fn resource(kind: &str, group: &str) -> String {
    if group.is_empty() {
        format!("{}s", kind.to_lowercase())
    } else {
        format!("{}s.{group}", kind.to_lowercase())
    }
}

/// A fresh name for the same spec (drift's fix, `rotate --reissue`): the policy's
/// `<base>-<8 hex>` scheme, the hex an FNV-1a hash of "reissue", the current name and the time
/// `now` (seconds); never the current name (on a clash the hash takes a counter too).
pub fn reissue_name(current: &str, now: i64) -> String {
    let name = |salt: u32| {
        let mut text = format!("reissue\0{current}\0{now}");
        if salt > 0 {
            text.push_str(&format!("\0{salt}"));
        }
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for b in text.bytes() {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        capi_bootstrap_rollout_policy::fingerprint::suggested_name(current, &format!("{hash:016x}"))
    };
    fresh_name(current, name)
}

/// The first of `candidates(0)`, `candidates(1)`, ... that is not `current`.
pub(crate) fn fresh_name(current: &str, candidates: impl Fn(u32) -> String) -> String {
    (0..)
        .map(candidates)
        .find(|n| n != current)
        .unwrap_or_default()
}

pub(super) fn fix_lines(
    inputs: &Inputs,
    report: &PoolReport,
    reissue: bool,
    roll: bool,
    wait: &[String],
) -> Vec<String> {
    let (ns, name, flags) = (&report.namespace, &report.name, &inputs.cluster_flags);
    if let Some(topology) = &report.topology {
        let cluster = topology.cluster.as_deref().unwrap_or("<cluster>");
        return vec![
            format!(
                "# a ClusterClass pool: rotate nothing by hand (it stops the topology controller for the whole Cluster). Add a MachinePool topology (the same class, a new name) to Cluster {cluster}'s spec.topology.workers.machinePools, move the workloads, then remove {} (docs/clusterclass.md):",
                topology.pool.as_deref().map_or_else(|| "the old entry".to_string(), |p| format!("the entry {p}"))
            ),
            format!("kubectl edit clusters.cluster.x-k8s.io {cluster} -n {ns}{flags}"),
        ];
    }
    let mut lines = Vec::new();
    if reissue {
        lines.push(format!(
            "capi-rollout-check rotate machinepool/{name} -n {ns} --reissue{flags}"
        ));
    }
    lines.extend(wait.iter().cloned());
    if roll {
        if reissue {
            lines.push(format!("# once CAPI has copied the new dataSecretName into the pool ({}: existing instances keep their data):", report.infra_kind.as_deref().unwrap_or("the infrastructure")));
        }
        match report.infra.as_ref() {
            Some(infra) if infra.deletes_machines => {
                lines.push(format!("capi-rollout-check roll machinepool/{name} -n {ns}{flags}"))
            }
            Some(infra) if infra.replacement_disabled_by.is_some() => lines.push(format!(
                "# {} has {}: true, so it replaces no instance on a rotation: start an instance refresh of its Auto Scaling group, or unset it before the rotation",
                infra.kind,
                infra.replacement_disabled_by.unwrap_or_default()
            )),
            Some(infra) => lines.push(format!(
                "# {}: no MachinePool Machine to delete for it; by hand: {}",
                infra.kind,
                infra.manual.unwrap_or("replace the instances from the provider's side")
            )),
            None => lines.push(format!(
                "# {} is not in the infrastructure records: replace the instances launched before the data Secret as its provider allows",
                report.infra_kind.as_deref().unwrap_or("the infrastructure")
            )),
        }
    }
    lines
}

/// The fix of a stale MachineDeployment or MachineSet: its template reissued under a fresh
/// name, then what CAPI does next. A MachineDeployment rolls out on the new ref by its
/// strategy; a MachineSet replaces no Machine on a template change, so its stale Machines are
/// deleted one at a time. A ClusterClass MachineDeployment's template is the topology
/// controller's: the fix goes through the class.
pub(super) fn deployment_fix(inputs: &Inputs, report: &PoolReport, object: &Value) -> Vec<String> {
    let (ns, name, flags) = (&report.namespace, &report.name, &inputs.cluster_flags);
    let arg = report.kind.arg();
    if let Some(topology) = &report.topology {
        let cluster = topology.cluster.as_deref().unwrap_or("<cluster>");
        return vec![
            format!(
                "# a ClusterClass MachineDeployment: its template is the topology controller's, which rotates it itself when the desired one differs. Change the class's template or the Cluster's variables ({} in Cluster {cluster}'s spec.topology.workers.machineDeployments), and CAPI rolls it out (docs/clusterclass.md):",
                topology.pool.as_deref().map_or_else(|| "its entry".to_string(), |p| format!("the entry {p}"))
            ),
            format!("kubectl edit clusters.cluster.x-k8s.io {cluster} -n {ns}{flags}"),
        ];
    }
    let mut lines = vec![format!(
        "capi-rollout-check rotate {arg}/{name} -n {ns} --reissue{flags}"
    )];
    match report.kind {
        WorkerKind::MachineSet => {
            lines.push(format!(
                "# a MachineSet replaces no Machine on a template change: delete each stale Machine, one at a time once its replacement is Ready; MachineSet {name} makes it again from the new template"
            ));
            for s in &report.instances.stale {
                lines.push(format!(
                    "kubectl delete machines.cluster.x-k8s.io {} -n {ns}{flags}",
                    s.name
                ));
            }
        }
        _ => {
            lines.push(format!(
                "# CAPI then rolls MachineDeployment {name} out ({}): a new MachineSet on the new template replaces every Machine; add --wait to follow it to the end, or watch:",
                super::strategy(object)
            ));
            lines.push(format!(
                "kubectl get machinedeployments.cluster.x-k8s.io {name} -n {ns}{flags} -w"
            ));
        }
    }
    lines
}
