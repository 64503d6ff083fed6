//! `capi-rollout-check drift` on one namespace of 1,000 MachinePools, measured once: the
//! analysis of the listed objects (as kubectl returns them, managedFields included) and the two
//! renderings. The kubectl lists themselves are the API server's cost and are left out.

use std::time::{Duration, Instant};

use capi_rollout_check::drift::{analysis, render};
use serde_json::{json, Value};

pub const DRIFT_POOLS: usize = 1000;

/// What was measured.
#[derive(Clone, Debug)]
pub struct DriftRow {
    pub pools: usize,
    /// Objects listed: pools, configs, Secrets, Machines, infrastructure pools.
    pub objects: usize,
    /// Their size as JSON (what kubectl hands over).
    pub input_bytes: usize,
    pub stale: usize,
    pub analyze: Duration,
    pub table: Duration,
    pub json: Duration,
    pub json_bytes: usize,
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

pub fn measure(pools: usize) -> DriftRow {
    let [mps, configs, secrets, machines, infra] = fleet(pools);
    let input_bytes = [&mps, &configs, &secrets, &machines, &infra]
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
    drop(table);
    DriftRow {
        pools,
        objects: mps.len() + configs.len() + secrets.len() + machines.len() + infra.len(),
        input_bytes,
        stale: report.count(analysis::Verdict::Stale),
        analyze,
        table: table_time,
        json: json_time,
        json_bytes: json.len(),
    }
}
