//! `capi-rollout-check drift` on one namespace of 1,000 MachinePools and 1,000
//! MachineDeployments with 10,000 Machines and their configs, measured once: the analysis of the
//! listed objects (as kubectl returns them, managedFields included) and the renderings. The
//! kubectl lists themselves (paged by kubectl, 500 items a request) are the API server's cost
//! and are left out.

use std::time::{Duration, Instant};

use capi_rollout_check::drift::{analysis, render};
use serde_json::{json, Value};

pub const DRIFT_POOLS: usize = 1000;
pub const DRIFT_DEPLOYMENTS: usize = 1000;
/// Machines of each MachineDeployment, each with a config of its own.
pub const MACHINES_PER_DEPLOYMENT: usize = 10;

/// What was measured.
#[derive(Clone, Debug)]
pub struct DriftRow {
    pub pools: usize,
    pub deployments: usize,
    /// The MachineDeployments' Machines (each with its config).
    pub deployment_machines: usize,
    /// Objects listed: pools, configs, Secrets, Machines, infrastructure pools.
    pub objects: usize,
    /// Their size as JSON (what kubectl hands over).
    pub input_bytes: usize,
    pub stale: usize,
    pub analyze: Duration,
    pub table: Duration,
    pub json: Duration,
    pub json_bytes: usize,
    /// The OpenReports Reports (`-o report`), rendered as YAML.
    pub report: Duration,
}

/// 2026-12-06T00:00:00Z.
const T0: i64 = 1_796_515_200;

fn at(minutes: i64) -> String {
    capi_rollout_check::drift::time::format(T0 + minutes * 60)
}

fn entry(manager: &str, minute: i64, fields: Value) -> Value {
    json!({"manager": manager, "operation": "Update", "apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2",
           "time": at(minute), "fieldsType": "FieldsV1", "fieldsV1": fields})
}

/// The listed objects of `pools` MachinePools in namespace `fleet`, three Machines each,
/// cycling through a clean pool, a rotation not rolled, an edit in the data Secret and an edit
/// of a render-once provider.
pub fn fleet(pools: usize) -> [Vec<Value>; 5] {
    let (mut mps, mut configs, mut secrets, mut machines, mut infra) =
        (vec![], vec![], vec![], vec![], vec![]);
    for n in 0..pools {
        let name = format!("pool-{n}");
        let config = format!("{name}-a");
        let case = n % 4;
        let kind = if case == 3 {
            "RKE2Config"
        } else {
            "KubeadmConfig"
        };
        let (config_created, secret_created) = if case == 1 { (100, 101) } else { (0, 1) };
        let mut managed = vec![
            entry(
                "kubectl-client-side-apply",
                config_created,
                json!({"f:spec": {"f:files": {}}}),
            ),
            entry(
                "manager",
                290,
                json!({"f:spec": {"f:joinConfiguration": {"f:discovery": {"f:bootstrapToken": {"f:token": {}}}}}}),
            ),
        ];
        if case >= 2 {
            managed.push(entry("kubectl-edit", 200, json!({"f:spec": {"f:files": {"k:{\"path\":\"/etc/motd\"}": {".": {}, "f:content": {}}}}})));
        }
        mps.push(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
            "metadata": {"name": name, "namespace": "fleet", "creationTimestamp": at(0),
                         "labels": {"cluster.x-k8s.io/cluster-name": "c1"}},
            "spec": {"replicas": 3, "template": {"spec": {
                "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": kind, "name": config},
                              "dataSecretName": config},
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachinePool", "name": name}}}},
            "status": {"replicas": 3, "nodeRefs": [{"kind": "Node", "name": format!("{name}-n0")}]}
        }));
        configs.push(json!({
            "apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": kind,
            "metadata": {"name": config, "namespace": "fleet", "creationTimestamp": at(config_created), "managedFields": managed},
            "spec": {"files": [{"path": "/etc/motd", "content": "x".repeat(2048)}],
                     "joinConfiguration": {"discovery": {"bootstrapToken": {"token": "abcdef.0123456789abcdef"}}}},
            "status": {"dataSecretName": config}
        }));
        let written = if case == 3 { secret_created } else { 290 };
        secrets.push(json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": config, "namespace": "fleet", "creationTimestamp": at(secret_created),
                         "labels": {"cluster.x-k8s.io/cluster-name": "c1"},
                         "managedFields": [{"manager": "manager", "operation": "Update", "time": at(written),
                                            "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {".": {}, "f:value": {}}}}]},
            "data": {"value": "eA==".repeat(1024), "format": "Y2xvdWQtY29uZmln"}
        }));
        for (m, minute) in [2, 150, 250].into_iter().enumerate() {
            machines.push(json!({
                "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
                "metadata": {"name": format!("{name}-m{m}"), "namespace": "fleet", "creationTimestamp": at(minute),
                             "labels": {"cluster.x-k8s.io/pool-name": name}}
            }));
        }
        infra.push(json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerMachinePool",
                          "metadata": {"name": name, "namespace": "fleet"}, "spec": {}}));
    }
    [mps, configs, secrets, machines, infra]
}

/// `count` MachineDeployments in `fleet`, each with its MachineSet, its template and
/// [`MACHINES_PER_DEPLOYMENT`] Machines with their configs; every other one's template edited in
/// place after half its Machines were made.
pub fn deployments(count: usize) -> [Vec<Value>; 5] {
    let (mut mds, mut sets, mut templates, mut machines, mut configs) =
        (vec![], vec![], vec![], vec![], vec![]);
    let content = |edited: bool| format!("{}{}", "x".repeat(2047), if edited { "y" } else { "x" });
    for n in 0..count {
        let (name, set, template) = (format!("md-{n}"), format!("md-{n}-s"), format!("md-{n}-t"));
        let edited = n % 2 == 1;
        let bootstrap = json!({"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfigTemplate", "name": template}});
        let infra = json!({"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachineTemplate", "name": name});
        mds.push(json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
            "metadata": {"name": name, "namespace": "fleet", "uid": format!("{name}-uid"), "creationTimestamp": at(0)},
            "spec": {"clusterName": "c1", "replicas": MACHINES_PER_DEPLOYMENT,
                     "template": {"spec": {"bootstrap": bootstrap, "infrastructureRef": infra}}}}));
        sets.push(json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineSet",
            "metadata": {"name": set, "namespace": "fleet",
                         "ownerReferences": [{"kind": "MachineDeployment", "name": name, "controller": true}]},
            "spec": {"template": {"spec": {"bootstrap": bootstrap, "infrastructureRef": infra}}}}));
        let mut managed = vec![
            json!({"manager": "kubectl-client-side-apply", "operation": "Update", "time": at(0),
            "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:template": {"f:spec": {"f:files": {}}}}}}),
        ];
        if edited {
            managed.push(json!({"manager": "kubectl-edit", "operation": "Update", "time": at(200),
                "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:template": {"f:spec": {"f:files": {}}}}}}));
        }
        templates.push(json!({"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfigTemplate",
            "metadata": {"name": template, "namespace": "fleet", "managedFields": managed},
            "spec": {"template": {"spec": {"files": [{"path": "/etc/motd", "content": content(edited)}]}}}}));
        for m in 0..MACHINES_PER_DEPLOYMENT {
            let machine = format!("{name}-m{m}");
            let before_edit = m < MACHINES_PER_DEPLOYMENT / 2;
            let minute = if before_edit { 10 } else { 250 };
            machines.push(json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
                "metadata": {"name": machine, "namespace": "fleet", "creationTimestamp": at(minute),
                             "labels": {"cluster.x-k8s.io/set-name": set},
                             "ownerReferences": [{"kind": "MachineSet", "name": set, "controller": true}]},
                "spec": {"bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": machine}}}}));
            configs.push(json!({"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfig",
                "metadata": {"name": machine, "namespace": "fleet", "creationTimestamp": at(minute)},
                "spec": {"files": [{"path": "/etc/motd", "content": content(edited && !before_edit)}],
                         "joinConfiguration": {"discovery": {"bootstrapToken": {"token": "abcdef.0123456789abcdef"}}}},
                "status": {"dataSecretName": machine}}));
        }
    }
    [mds, sets, templates, machines, configs]
}

pub fn measure(pools: usize, deployment_count: usize) -> DriftRow {
    let [mps, mut configs, secrets, machines, infra] = fleet(pools);
    let [mds, sets, templates, set_machines, machine_configs] = deployments(deployment_count);
    configs.extend(machine_configs);
    let input_bytes = [
        &mps,
        &configs,
        &secrets,
        &machines,
        &infra,
        &mds,
        &sets,
        &templates,
        &set_machines,
    ]
    .iter()
    .flat_map(|list| list.iter())
    .map(|o| o.to_string().len())
    .sum();
    let inputs = analysis::Inputs {
        now: T0 + 300 * 60,
        pools: &mps,
        configs: &configs,
        secrets: &secrets,
        machines: &machines,
        infra_pools: &infra,
        infra_instances: &[],
        deployments: &mds,
        machine_sets: &sets,
        templates: &templates,
        set_machines: &set_machines,
        cluster_flags: String::new(),
    };
    let started = Instant::now();
    let report = analysis::analyze(&inputs);
    let analyze = started.elapsed();
    let started = Instant::now();
    let table = std::hint::black_box(render::table(&report));
    let table_time = started.elapsed();
    let started = Instant::now();
    let json = std::hint::black_box(render::json(&report));
    let json_time = started.elapsed();
    let started = Instant::now();
    let reports = std::hint::black_box(capi_rollout_check::drift::reports::yaml(
        &capi_rollout_check::drift::reports::reports(&report, &[]),
    ));
    let report_time = started.elapsed();
    drop((table, reports));
    DriftRow {
        pools,
        deployments: deployment_count,
        deployment_machines: set_machines.len(),
        report: report_time,
        objects: mps.len()
            + configs.len()
            + secrets.len()
            + machines.len()
            + infra.len()
            + mds.len()
            + sets.len()
            + templates.len()
            + set_machines.len(),
        input_bytes,
        stale: report.count(analysis::Verdict::Stale),
        analyze,
        table: table_time,
        json: json_time,
        json_bytes: json.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The measured fleet is what the row says: every edited MachineDeployment stale with half
    /// its Machines, every pool case as described.
    #[test]
    fn the_measured_fleet_is_judged_as_described() {
        let row = measure(8, 4);
        assert_eq!(
            (row.pools, row.deployments, row.deployment_machines),
            (8, 4, 40)
        );
        // Pools: cases 1-3 of 4 are stale (a rotation not rolled, two edits); MachineDeployments:
        // every other one.
        assert_eq!(row.stale, 6 + 2);
    }
}
