//! drift's analysis on listed objects built here (each drift kind, each confidence, each
//! provider rendering and infrastructure effect), its JSON, and its kubectl layer against the
//! commands' shared fake cluster and a fake kubectl.

use std::collections::BTreeMap;

use rstest::rstest;
use serde_json::{json, Value};

use super::analysis::{analyze, Inputs, PoolReport, Report, Verdict};
use super::kube::{self, Scope};
use super::render;
use super::time;

mod deployments;
use deployments::deployments_world;
mod fix;
mod kube_layer;
mod render_output;
mod verdicts;

/// 2026-12-06T00:00:00Z; every time below is minutes after it.
const T0: i64 = 1_796_515_200;
/// "now" of every case: five hours in.
const NOW: i64 = 300;

fn at(minutes: i64) -> String {
    time::format(T0 + minutes * 60)
}

/// One scenario's objects in namespace `fleet`.
#[derive(Default, Clone)]
struct World {
    pools: Vec<Value>,
    configs: Vec<Value>,
    secrets: Vec<Value>,
    machines: Vec<Value>,
    infra_pools: Vec<Value>,
    infra_instances: Vec<Value>,
    deployments: Vec<Value>,
    machine_sets: Vec<Value>,
    templates: Vec<Value>,
    set_machines: Vec<Value>,
    /// Reports drift (or another tool) wrote before.
    reports: Vec<Value>,
}

struct Pool {
    name: &'static str,
    config_kind: &'static str,
    config: &'static str,
    infra_kind: &'static str,
    replicas: u64,
    node_refs: bool,
    topology: bool,
}

impl Pool {
    fn new(config_kind: &'static str, infra_kind: &'static str) -> Pool {
        Pool {
            name: "pool-1",
            config_kind,
            config: "pool-1-a",
            infra_kind,
            replicas: 3,
            node_refs: true,
            topology: false,
        }
    }
}

/// A managedFields entry owning `fields` (fieldsV1).
fn entry(manager: &str, operation: &str, minute: i64, fields: Value) -> Value {
    json!({"manager": manager, "operation": operation, "apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2",
           "time": at(minute), "fieldsType": "FieldsV1", "fieldsV1": fields})
}

fn spec_files() -> Value {
    json!({"f:spec": {"f:files": {}}})
}

fn files_content() -> Value {
    json!({"f:spec": {"f:files": {"k:{\"path\":\"/etc/motd\"}": {".": {}, "f:content": {}}}}})
}

fn token() -> Value {
    json!({"f:spec": {"f:joinConfiguration": {"f:discovery": {"f:bootstrapToken": {"f:token": {}}}}}})
}

/// CABPK's fill of a MachinePool's join discovery and its token rotation.
fn discovery() -> Value {
    json!({"f:spec": {"f:joinConfiguration": {"f:discovery": {"f:bootstrapToken": {
        "f:apiServerEndpoint": {}, "f:caCertHashes": {}, "f:token": {}}}}}})
}

impl World {
    /// The pool, its config (created at `config_created` by kubectl, with `managed` entries
    /// after that), its data Secret (created `secret_created`, data last written
    /// `data_written`), the infrastructure pool object.
    fn pool(
        p: &Pool,
        config_created: i64,
        managed: Vec<Value>,
        secret_created: i64,
        data_written: i64,
    ) -> World {
        let group = if p.infra_kind.is_empty() {
            ""
        } else {
            "infrastructure.cluster.x-k8s.io"
        };
        let mut labels = json!({"cluster.x-k8s.io/cluster-name": "c1"});
        if p.topology {
            labels["topology.cluster.x-k8s.io/owned"] = json!("");
            labels["topology.cluster.x-k8s.io/pool-name"] = json!("workers");
        }
        let node_refs: Vec<Value> = if p.node_refs {
            vec![json!({"kind": "Node", "name": "n1"})]
        } else {
            vec![]
        };
        let pool = json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
            "metadata": {"name": p.name, "namespace": "fleet", "creationTimestamp": at(0), "labels": labels},
            "spec": {"template": {"spec": {
                "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": p.config_kind, "name": p.config},
                              "dataSecretName": p.config},
                "infrastructureRef": {"apiGroup": group, "kind": p.infra_kind, "name": p.name}}}},
            "status": {"replicas": p.replicas, "nodeRefs": node_refs}
        });
        let mut entries = vec![entry(
            "kubectl-client-side-apply",
            "Update",
            config_created,
            spec_files(),
        )];
        entries.extend(managed);
        let config = json!({
            "apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": p.config_kind,
            "metadata": {"name": p.config, "namespace": "fleet", "creationTimestamp": at(config_created), "managedFields": entries},
            "spec": {"files": [{"path": "/etc/motd", "content": "hi"}],
                     "joinConfiguration": {"discovery": {"bootstrapToken": {"token": "abc.def"}}}},
            "status": {"dataSecretName": p.config}
        });
        let secret = json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": p.config, "namespace": "fleet", "creationTimestamp": at(secret_created),
                         "labels": {"cluster.x-k8s.io/cluster-name": "c1"},
                         "managedFields": [
                             {"manager": "manager", "operation": "Update", "time": at(data_written), "fieldsType": "FieldsV1",
                              "fieldsV1": {"f:data": {".": {}, "f:value": {}, "f:format": {}}}},
                             {"manager": "manager", "operation": "Update", "time": at(secret_created), "fieldsType": "FieldsV1",
                              "fieldsV1": {"f:metadata": {"f:ownerReferences": {}}}}
                         ]},
            "type": "cluster.x-k8s.io/secret"
        });
        let infra_pools = if p.infra_kind.is_empty() {
            vec![]
        } else {
            vec![
                json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": p.infra_kind,
                        "metadata": {"name": p.name, "namespace": "fleet"}, "spec": {}}),
            ]
        };
        World {
            pools: vec![pool],
            configs: vec![config],
            secrets: vec![secret],
            infra_pools,
            ..World::default()
        }
    }

    fn machines(mut self, minutes: &[i64]) -> World {
        for (n, m) in minutes.iter().enumerate() {
            self.machines.push(json!({
                "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
                "metadata": {"name": format!("pool-1-m{n}"), "namespace": "fleet", "creationTimestamp": at(*m),
                             "labels": {"cluster.x-k8s.io/pool-name": "pool-1"}}
            }));
        }
        self
    }

    fn with(mut self, edit: impl FnOnce(&mut World)) -> World {
        edit(&mut self);
        self
    }

    fn report(&self) -> Report {
        self.report_with("")
    }

    /// The report with kubectl's cluster flags in the printed commands.
    fn report_with(&self, cluster_flags: &str) -> Report {
        analyze(&Inputs {
            now: T0 + NOW * 60,
            pools: &self.pools,
            configs: &self.configs,
            secrets: &self.secrets,
            machines: &self.machines,
            infra_pools: &self.infra_pools,
            infra_instances: &self.infra_instances,
            deployments: &self.deployments,
            machine_sets: &self.machine_sets,
            templates: &self.templates,
            set_machines: &self.set_machines,
            cluster_flags: cluster_flags.into(),
        })
    }
}

fn kubeadm_docker() -> Pool {
    Pool::new("KubeadmConfig", "DockerMachinePool")
}

fn one(world: &World) -> PoolReport {
    let report = world.report();
    assert_eq!(report.pools.len(), 1, "{report:#?}");
    report.pools.into_iter().next().unwrap()
}

const ROLL: &str = "capi-rollout-check roll machinepool/pool-1 -n fleet";
const REISSUE: &str = "capi-rollout-check rotate machinepool/pool-1 -n fleet --reissue";
const WAIT: &str = "replaces";
