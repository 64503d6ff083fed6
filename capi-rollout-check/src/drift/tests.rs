//! drift's analysis on listed objects built here (each drift kind, each confidence, each
//! provider rendering and infrastructure effect), its JSON, and its kubectl layer against an
//! in-memory lister and a fake kubectl.

use std::cell::RefCell;
use std::collections::BTreeMap;

use rstest::rstest;
use serde_json::{json, Value};

use super::analysis::{analyze, Inputs, PoolReport, Report, Verdict};
use super::kube::{self, Kubectl, ListError, Lister, Scope};
use super::render;
use super::time;

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
        self.report_with(super::REISSUE_FLAG, "")
    }

    /// The report with `rotate --reissue` in the fix or not, and kubectl's cluster flags.
    fn report_with(&self, reissue_flag: bool, cluster_flags: &str) -> Report {
        analyze(&Inputs {
            now: T0 + NOW * 60,
            pools: &self.pools,
            configs: &self.configs,
            secrets: &self.secrets,
            machines: &self.machines,
            infra_pools: &self.infra_pools,
            infra_instances: &self.infra_instances,
            cluster_flags: cluster_flags.into(),
            reissue_flag,
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

#[rstest]
// A pool made once and never edited: CABPK's token writes change the Secret, not the spec.
#[case::clean(
    World::pool(&kubeadm_docker(), 0, vec![entry("manager", "Update", 290, token())], 1, 290).machines(&[2, 3, 4]),
    "current", "exact", "0/3", &[], &[])]
// CABPK's token and discovery writes under the binary's own name (controller-runtime's field
// manager, `capi-kubeadm-bootstrap-manager` in the cluster test): the controller's fill, no edit.
#[case::clean_controller_under_its_binary_name(
    World::pool(&kubeadm_docker(), 0, vec![entry("capi-kubeadm-bootstrap-manager", "Update", 290, discovery())], 1, 290).machines(&[2, 3, 4]),
    "current", "exact", "0/3", &[], &[])]
// ... and beside a person's edit, the edit is still found.
#[case::edit_beside_controller_under_its_binary_name(
    World::pool(&kubeadm_docker(), 0, vec![entry("kubectl-edit", "Update", 200, files_content()),
                                           entry("capi-kubeadm-bootstrap-manager", "Update", 290, discovery())], 1, 290)
        .machines(&[2, 250]),
    "stale", "exact", "1/2", &["in-place-edit"], &[REISSUE, ROLL])]
// CAPD replaces nothing on a rotation: the Machines older than the new Secret keep the old data.
#[case::rotation_not_rolled_no_roll_infra(
    World::pool(&Pool::new("KubeadmConfig", "AzureMachinePool"), 100, vec![], 101, 290).machines(&[2, 3, 102]),
    "stale", "exact", "2/3", &["rotation-not-rolled"], &[ROLL])]
// CAPA's AWSMachinePool replaces them itself (an instance refresh): wait, no roll.
#[case::rotation_provider_replaces(
    World::pool(&Pool::new("KubeadmConfig", "AWSMachinePool"), 100, vec![], 101, 290).machines(&[2, 102]),
    "stale", "exact", "1/2", &["rotation-not-rolled"], &[WAIT])]
// ... unless its refresh is turned off: then it is a no-roll infrastructure.
#[case::rotation_refresh_disabled(
    World::pool(&Pool::new("KubeadmConfig", "AWSMachinePool"), 100, vec![], 101, 290).machines(&[2, 102])
        .with(|w| w.infra_pools[0]["spec"] = json!({"refreshPreferences": {"disable": true}})),
    "stale", "exact", "1/2", &["rotation-not-rolled"], &["# AWSMachinePool has spec.refreshPreferences.disable: true, so it replaces no instance on a rotation"])]
// CABPK: an edit already in the Secret; the Machine launched before it never got it, the one
// launched between the edit and the write might have, the one after has it.
#[case::edit_in_secret_render_window(
    World::pool(&kubeadm_docker(), 0, vec![entry("kubectl-edit", "Update", 200, files_content())], 1, 290)
        .machines(&[2, 205, 250]),
    "stale", "bounded", "2/3", &["in-place-edit"], &[REISSUE, ROLL])]
#[case::edit_in_secret_exact(
    World::pool(&kubeadm_docker(), 0, vec![entry("kubectl-edit", "Update", 200, files_content())], 1, 290)
        .machines(&[2, 250]),
    "stale", "exact", "1/2", &["in-place-edit"], &[REISSUE, ROLL])]
// CABPK: the edit is two minutes old; the next token rotation puts it into the Secret.
#[case::edit_pending_token_rotation(
    World::pool(&kubeadm_docker(), 0, vec![entry("kubectl-patch", "Update", 298, files_content())], 1, 290)
        .machines(&[2, 250]),
    "stale", "bounded", "2/2", &["in-place-edit"], &[REISSUE, ROLL])]
// CABPK re-renders only while the pool has nodeRefs: no instance, now or future, gets it.
#[case::edit_pending_no_node_refs(
    World::pool(&Pool { node_refs: false, ..kubeadm_docker() }, 0,
        vec![entry("kubectl-patch", "Update", 298, files_content())], 1, 1).machines(&[2]),
    "stale", "exact", "all 1+new", &["in-place-edit"], &[REISSUE, ROLL])]
// ... and only with token discovery.
#[case::edit_pending_file_discovery(
    World::pool(&kubeadm_docker(), 0, vec![entry("kubectl-patch", "Update", 298, files_content())], 1, 1)
        .machines(&[2])
        .with(|w| w.configs[0]["spec"]["joinConfiguration"]["discovery"] = json!({"file": {"kubeConfigPath": "/k"}})),
    "stale", "exact", "all 1+new", &["in-place-edit"], &[REISSUE, ROLL])]
// CABPK should have written it 12.5 minutes after the edit and has not.
#[case::edit_pending_too_long(
    World::pool(&kubeadm_docker(), 0, vec![entry("kubectl-patch", "Update", 200, files_content())], 1, 190)
        .machines(&[2]),
    "stale", "unknown", "all 1+new", &["in-place-edit"], &[REISSUE, ROLL])]
// RKE2 renders once: every instance, now and future, runs the old data.
#[case::once_rendering(
    World::pool(&Pool::new("RKE2Config", "DockerMachinePool"), 0, vec![entry("kubectl-edit", "Update", 200, spec_files())], 1, 1)
        .machines(&[2, 250]),
    "stale", "exact", "all 2+new", &["in-place-edit"], &[REISSUE, ROLL])]
// EKSConfig writes an edit at its next reconcile; CAPA's AWSMachinePool refreshes on a new
// Secret name, so the fix is a reissue and no roll.
#[case::every_reconcile_in_secret(
    World::pool(&Pool::new("EKSConfig", "AWSMachinePool"), 0, vec![entry("kubectl-edit", "Update", 200, spec_files())], 1, 201)
        .machines(&[2, 250]),
    "stale", "exact", "1/2", &["in-place-edit"], &[REISSUE])]
#[case::every_reconcile_pending(
    World::pool(&Pool::new("EKSConfig", "AWSMachinePool"), 0, vec![entry("kubectl-edit", "Update", 298, spec_files())], 1, 100)
        .machines(&[2, 250]),
    "stale", "bounded", "2/2", &["in-place-edit"], &[REISSUE])]
// No write long after the edit: a field EKSConfig ignores, or its controller stopped.
#[case::every_reconcile_no_write(
    World::pool(&Pool::new("EKSConfig", "AWSMachinePool"), 0, vec![entry("kubectl-edit", "Update", 200, spec_files())], 1, 100)
        .machines(&[2, 250]),
    "unknown", "unknown", "2/2", &["in-place-edit"], &[REISSUE])]
// EKS managed node groups with a launch template roll on a content change: wait.
#[case::content_change_replaces(
    World::pool(&Pool::new("EKSConfig", "AWSManagedMachinePool"), 0, vec![entry("kubectl-edit", "Update", 200, spec_files())], 1, 201)
        .machines(&[2, 250])
        .with(|w| w.infra_pools[0]["spec"] = json!({"awsLaunchTemplate": {"name": "lt"}})),
    "stale", "exact", "1/2", &["in-place-edit"], &[WAIT])]
// ... without one they never read bootstrap data.
#[case::never_read(
    World::pool(&Pool::new("EKSConfig", "AWSManagedMachinePool"), 0, vec![entry("kubectl-edit", "Update", 200, spec_files())], 1, 201)
        .machines(&[2, 250]),
    "current", "exact", "0/2", &[], &[])]
#[case::ancient_changes(
    World::pool(&kubeadm_docker(), 0, vec![entry("ancient-changes", "Update", 200, spec_files())], 1, 290).machines(&[2]),
    "unknown", "unknown", "0/1", &[], &[])]
#[case::moved_by_clusterctl(
    World::pool(&kubeadm_docker(), 0, vec![entry("clusterctl", "Update", 1, spec_files())], 1, 290).machines(&[2]),
    "unknown", "unknown", "0/1", &[], &[])]
// No Machines (CAPA without MachinePoolMachines) after a rotation: which instances are old?
#[case::no_instances_after_rotation(
    World::pool(&Pool::new("KubeadmConfig", "AWSMachinePool"), 100, vec![], 101, 290),
    "unknown", "unknown", "0/3", &[], &[])]
#[case::no_instances_once_rendering(
    World::pool(&Pool::new("RKE2Config", "AWSMachinePool"), 0, vec![entry("kubectl-edit", "Update", 200, spec_files())], 1, 1),
    "stale", "exact", "all 3+new", &["in-place-edit"], &[REISSUE])]
#[case::no_instances_no_replicas(
    World::pool(&Pool { replicas: 0, ..Pool::new("KubeadmConfig", "AWSMachinePool") }, 100, vec![], 101, 290),
    "current", "exact", "0/0", &[], &[])]
#[case::no_instances_nothing_happened(
    World::pool(&Pool::new("KubeadmConfig", "AWSMachinePool"), 0, vec![], 1, 290),
    "current", "exact", "0/3", &[], &[])]
// The topology controller's patch of a ClusterClass pool: the remedy is a new pool topology.
#[case::cluster_class_pool(
    World::pool(&Pool { topology: true, ..kubeadm_docker() }, 0, vec![entry("capi-topology", "Apply", 200, spec_files())], 1, 290)
        .machines(&[2, 250]),
    "stale", "exact", "1/2", &["topology-patch"], &["docs/clusterclass.md", "kubectl edit clusters.cluster.x-k8s.io c1 -n fleet"])]
#[case::unknown_bootstrap_provider(
    World::pool(&Pool::new("AcmeConfig", "DockerMachinePool"), 0, vec![entry("kubectl-edit", "Update", 200, spec_files())], 1, 1)
        .machines(&[2]),
    "stale", "unknown", "all 1+new", &["in-place-edit"], &[REISSUE, ROLL])]
#[case::unknown_infrastructure(
    World::pool(&Pool::new("KubeadmConfig", "AcmeMachinePool"), 100, vec![], 101, 290).machines(&[2, 102]),
    "stale", "unknown", "1/2", &["rotation-not-rolled"], &["# AcmeMachinePool is not in the infrastructure records"])]
// CAPOCI has MachinePool Machines, but deleting one leaves its instance running: by hand.
#[case::machines_that_do_not_replace(
    World::pool(&Pool::new("KubeadmConfig", "OCIMachinePool"), 100, vec![], 101, 290).machines(&[2, 102]),
    "stale", "exact", "1/2", &["rotation-not-rolled"], &["# OCIMachinePool: no MachinePool Machine to delete for it; by hand: drain the nodes, then detach"])]
// CAPG makes no MachinePool Machines: the record's instructions, by hand.
#[case::manual_replacement(
    World::pool(&Pool::new("RKE2Config", "GCPMachinePool"), 0, vec![entry("kubectl-edit", "Update", 200, spec_files())], 1, 1),
    "stale", "exact", "all 3+new", &["in-place-edit"], &[REISSUE, "# GCPMachinePool: no MachinePool Machine to delete for it; by hand: drain the nodes"])]
#[case::config_not_found(
    World::pool(&kubeadm_docker(), 0, vec![], 1, 290).machines(&[2]).with(|w| w.configs.clear()),
    "unknown", "unknown", "0/1", &[], &[])]
// The pool was repointed and CAPI has not copied the new config's data Secret yet: the new
// config's creation is no edit of the old data.
#[case::rotation_in_progress(
    World::pool(&kubeadm_docker(), 100, vec![], 1, 290).machines(&[2])
        .with(|w| w.configs[0]["status"] = json!({})),
    "unknown", "unknown", "0/1", &[], &[])]
#[case::rotation_not_taken_up(
    World::pool(&kubeadm_docker(), 100, vec![], 1, 290).machines(&[2])
        .with(|w| w.configs[0]["status"]["dataSecretName"] = json!("pool-1-b")),
    "unknown", "unknown", "0/1", &[], &[])]
#[case::being_deleted(
    World::pool(&kubeadm_docker(), 100, vec![], 101, 290).machines(&[2])
        .with(|w| w.pools[0]["metadata"]["deletionTimestamp"] = json!(at(299))),
    "unknown", "unknown", "0/1", &[], &[])]
// CAPZ's own instances when there are no MachinePool Machines.
#[case::infra_instances_instead_of_machines(
    World::pool(&Pool::new("KubeadmConfig", "AzureMachinePool"), 100, vec![], 101, 290).with(|w| {
        for (n, m) in [2, 102].iter().enumerate() {
            w.infra_instances.push(json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureMachinePoolMachine",
                "metadata": {"name": format!("vm-{n}"), "namespace": "fleet", "creationTimestamp": at(*m),
                             "ownerReferences": [{"kind": "AzureMachinePool", "name": "pool-1"}]}}));
        }
    }),
    "stale", "exact", "1/2", &["rotation-not-rolled"], &[ROLL])]
fn verdicts(
    #[case] world: World,
    #[case] verdict: &str,
    #[case] level: &str,
    #[case] stale: &str,
    #[case] causes: &[&str],
    #[case] fix: &[&str],
) {
    let p = one(&world);
    let shown = format!("{p:#?}");
    assert_eq!(p.verdict.name(), verdict, "{shown}");
    assert_eq!(p.confidence.level.name(), level, "{shown}");
    assert_eq!(render::stale_column(&p), stale, "{shown}");
    assert_eq!(
        p.causes.iter().map(|c| c.kind.name()).collect::<Vec<_>>(),
        causes,
        "{shown}"
    );
    for part in fix {
        assert!(
            p.fix.iter().any(|l| l.contains(part)),
            "fix has no {part:?}: {:#?}",
            p.fix
        );
    }
    if fix.is_empty() {
        assert!(p.fix.is_empty(), "{:#?}", p.fix);
    }
    if !fix.contains(&ROLL) {
        assert!(!p.fix.iter().any(|l| l.contains(ROLL)), "{:#?}", p.fix);
    }
    if !fix.contains(&REISSUE) {
        assert!(!p.fix.iter().any(|l| l.contains(REISSUE)), "{:#?}", p.fix);
    }
}

#[test]
fn an_update_managers_changed_paths_and_whether_the_secret_has_them() {
    let p = one(&World::pool(
        &kubeadm_docker(),
        0,
        vec![entry("kubectl-edit", "Update", 200, files_content())],
        1,
        290,
    )
    .machines(&[2, 250]));
    let cause = &p.causes[0];
    assert_eq!(cause.manager.as_deref(), Some("kubectl-edit"));
    assert_eq!(cause.operation.as_deref(), Some("Update"));
    assert_eq!(cause.time, Some(T0 + 200 * 60));
    assert_eq!(cause.paths, ["spec.files[path=/etc/motd].content"]);
    assert!(!cause.paths_are_applied_set);
    assert_eq!(cause.in_data_secret, Some(true));
    assert_eq!(p.instances.stale.len(), 1);
    assert_eq!(p.instances.stale[0].name, "pool-1-m0");
}

#[test]
fn the_render_window_instance_is_named_as_uncertain() {
    let p = one(&World::pool(
        &kubeadm_docker(),
        0,
        vec![entry("kubectl-edit", "Update", 200, files_content())],
        1,
        290,
    )
    .machines(&[2, 205, 250]));
    let window: Vec<_> = p
        .instances
        .stale
        .iter()
        .map(|s| (s.name.as_str(), s.because.name(), s.certain))
        .collect();
    assert_eq!(
        window,
        [
            ("pool-1-m0", "launched-before-edit", true),
            ("pool-1-m1", "launched-while-rendering", false)
        ]
    );
    assert!(
        p.confidence.reasons[0].contains("between the edit"),
        "{:?}",
        p.confidence
    );
    // A launch after CABPK's longest wait (12.5 min) is not in the window, even when the
    // Secret's last write (a later token rotation) is later still.
    let late = one(&World::pool(
        &kubeadm_docker(),
        0,
        vec![entry("kubectl-edit", "Update", 200, files_content())],
        1,
        290,
    )
    .machines(&[2, 213]));
    assert_eq!(late.confidence.level.name(), "exact");
}

#[test]
fn without_rotate_reissue_the_fix_is_kubectl_with_a_fresh_name_in_the_policys_scheme() {
    let world = World::pool(
        &Pool::new("RKE2Config", "DockerMachinePool"),
        0,
        vec![entry("kubectl-edit", "Update", 200, spec_files())],
        1,
        1,
    )
    .machines(&[2]);
    let p = world.report_with(false, "").pools.remove(0);
    let new = super::analysis::reissue_name("pool-1-a", T0 + NOW * 60);
    assert_ne!(new, "pool-1-a");
    assert!(
        new.starts_with("pool-1-a-") && new.len() == "pool-1-a-".len() + 8,
        "{new}"
    );
    assert_eq!(
        p.fix,
        [
            format!("kubectl get rke2configs.bootstrap.cluster.x-k8s.io pool-1-a -n fleet -o json | jq 'del(.metadata.uid, .metadata.resourceVersion, .metadata.creationTimestamp, .metadata.generation, .metadata.managedFields, .metadata.ownerReferences, .status) | .metadata.name = \"{new}\"' | kubectl create -f - -n fleet"),
            format!("kubectl patch machinepools.cluster.x-k8s.io pool-1 -n fleet --type json -p '[{{\"op\":\"test\",\"path\":\"/spec/template/spec/bootstrap/configRef/name\",\"value\":\"pool-1-a\"}},{{\"op\":\"replace\",\"path\":\"/spec/template/spec/bootstrap/configRef/name\",\"value\":\"{new}\"}}]'"),
            "# once CAPI has copied the new dataSecretName into the pool (DockerMachinePool: existing instances keep their data):".to_string(),
            ROLL.to_string(),
        ]
    );
    // A config already carrying a suffix gets another one, not a longer name.
    // A hash that happens to give the current name's suffix back is passed over.
    let clash = |salt: u32| format!("pool-1-a-{salt:08x}");
    assert_eq!(
        super::analysis::fresh_name("pool-1-a-00000000", clash),
        "pool-1-a-00000001"
    );
    assert!(super::analysis::reissue_name("pool-1-a-0123abcd", 0).starts_with("pool-1-a-"));
    assert_eq!(
        super::analysis::reissue_name("pool-1-a-0123abcd", 0).len(),
        "pool-1-a-0123abcd".len()
    );
}

#[test]
fn json_of_a_rotation_not_rolled() {
    let world = World::pool(
        &Pool::new("KubeadmConfig", "AzureMachinePool"),
        100,
        vec![],
        101,
        290,
    )
    .machines(&[2, 102]);
    let value: Value = serde_json::from_str(&render::json(&world.report())).unwrap();
    assert_eq!(
        value,
        json!({
            "schema": "capi-rollout-check.drift/v1",
            "now": at(NOW),
            "summary": {"pools": 1, "current": 0, "stale": 1, "unknown": 0},
            "pools": [{
                "namespace": "fleet", "name": "pool-1", "verdict": "stale",
                "confidence": {"level": "exact", "reasons": [format!(
                    "Machine launch times compared with the data Secret's creation ({}) and last write ({}) and the config's last edit",
                    at(101), at(290))]},
                "bootstrap": {"group": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": "pool-1-a",
                              "provider": "kubeadm", "rendering": "AtTokenRotation"},
                "infrastructure": {"kind": "AzureMachinePool", "provider": "CAPZ", "readsBootstrapData": true,
                                   "onRotation": "NewInstancesOnly", "onContentChange": "NewInstancesOnly"},
                "dataSecret": {"name": "pool-1-a", "created": at(101), "contentWritten": at(290)},
                "instances": {"source": "Machine", "total": 2, "staleCount": 1, "everyInstanceNowAndFuture": false,
                              "stale": [{"name": "pool-1-m0", "launched": at(2), "because": "launched-before-data-secret", "certain": true}]},
                "causes": [{"kind": "rotation-not-rolled", "manager": null, "operation": null, "time": at(101),
                            "paths": [], "pathsAreAppliedSet": false, "inDataSecret": null, "replacedByProvider": false,
                            "summary": format!("rotation to pool-1-a (data Secret pool-1-a created {}): 1 instance launched before it; AzureMachinePool replaces no existing instance on a rotation", at(101))}],
                "clusterClass": null,
                "fix": [ROLL]
            }]
        })
    );
}

#[test]
fn the_table_names_each_stale_instance_and_the_fix() {
    let world = World::pool(
        &Pool::new("KubeadmConfig", "AzureMachinePool"),
        100,
        vec![],
        101,
        290,
    )
    .machines(&[2, 102]);
    let text = render::table(&world.report());
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        [
            "NAMESPACE",
            "POOL",
            "CONFIG",
            "INFRASTRUCTURE",
            "VERDICT",
            "STALE",
            "CONFIDENCE",
            "CAUSE"
        ]
    );
    assert_eq!(
        lines[1].split_whitespace().collect::<Vec<_>>(),
        [
            "fleet",
            "pool-1",
            "KubeadmConfig/pool-1-a",
            "AzureMachinePool",
            "stale",
            "1/2",
            "exact",
            "rotation-not-rolled"
        ]
    );
    assert!(
        text.contains(&format!(
            "  pool-1-m0 launched {} (launched-before-data-secret)\n",
            at(2)
        )),
        "{text}"
    );
    assert!(text.contains(&format!("  fix:\n    {ROLL}\n")), "{text}");
    assert!(
        text.ends_with("1 pools: 0 current, 1 stale, 0 unknown\n"),
        "{text}"
    );
}

#[test]
fn pools_without_a_config_ref_are_not_listed_and_the_order_is_stable() {
    let mut world = World::pool(&kubeadm_docker(), 0, vec![], 1, 290).machines(&[2]);
    let mut other = world.pools[0].clone();
    other["metadata"]["name"] = json!("pool-0");
    let mut no_ref = world.pools[0].clone();
    no_ref["metadata"]["name"] = json!("pool-x");
    no_ref["spec"]["template"]["spec"]["bootstrap"] = json!({"dataSecretName": "raw"});
    world.pools.push(no_ref);
    world.pools.insert(0, other);
    let names: Vec<String> = world.report().pools.into_iter().map(|p| p.name).collect();
    assert_eq!(names, ["pool-0", "pool-1"]);
}

#[test]
fn a_label_change_by_a_controller_or_a_status_write_is_no_edit() {
    let status = json!({"manager": "kubectl-edit", "operation": "Update", "subresource": "status", "time": at(200),
                        "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:ready": {}}}});
    let label = entry(
        "kubectl-label",
        "Update",
        200,
        json!({"f:metadata": {"f:labels": {"f:x": {}}}}),
    );
    let p = one(&World::pool(&kubeadm_docker(), 0, vec![status, label], 1, 290).machines(&[2]));
    assert_eq!(p.verdict, Verdict::Current, "{p:#?}");
}

// ---- the kubectl layer -------------------------------------------------------------------

/// Lists from a World; records every call.
struct FakeLister {
    world: World,
    calls: RefCell<Vec<String>>,
}

impl Lister for FakeLister {
    fn list(
        &self,
        resource: &str,
        scope: &Scope,
        selector: Option<&str>,
        managed: bool,
    ) -> Result<Vec<Value>, ListError> {
        self.calls
            .borrow_mut()
            .push(format!("{resource} {scope:?} {selector:?} {managed}"));
        let w = &self.world;
        let items = match resource {
            "machinepools.cluster.x-k8s.io" => w.pools.clone(),
            "secrets" => w.secrets.clone(),
            "machines.cluster.x-k8s.io" => w.machines.clone(),
            r if r.ends_with(".bootstrap.cluster.x-k8s.io") => w
                .configs
                .iter()
                .filter(|c| {
                    format!("{}s", c["kind"].as_str().unwrap().to_lowercase())
                        == r.split('.').next().unwrap()
                })
                .cloned()
                .collect(),
            r if r.ends_with(".infrastructure.cluster.x-k8s.io") => w
                .infra_pools
                .iter()
                .chain(&w.infra_instances)
                .filter(|c| {
                    format!("{}s", c["kind"].as_str().unwrap().to_lowercase())
                        == r.split('.').next().unwrap()
                })
                .cloned()
                .collect(),
            _ => {
                return Err(ListError {
                    resource: resource.into(),
                    message: "the server doesn't have a resource type".into(),
                })
            }
        };
        Ok(items)
    }
}

fn fleet_of(count: usize) -> World {
    let mut world = World::default();
    for n in 0..count {
        let (kind, infra) = if n % 2 == 0 {
            ("KubeadmConfig", "AzureMachinePool")
        } else {
            ("RKE2Config", "DockerMachinePool")
        };
        let mut one = World::pool(&Pool::new(kind, infra), 0, vec![], 1, 290);
        let name = format!("pool-{n}");
        one.pools[0]["metadata"]["name"] = json!(name);
        for o in one.configs.iter_mut().chain(&mut one.secrets) {
            o["metadata"]["name"] = json!(format!("{name}-a"));
        }
        one.configs[0]["status"]["dataSecretName"] = json!(format!("{name}-a"));
        one.pools[0]["spec"]["template"]["spec"]["bootstrap"]["configRef"]["name"] =
            json!(format!("{name}-a"));
        one.pools[0]["spec"]["template"]["spec"]["bootstrap"]["dataSecretName"] =
            json!(format!("{name}-a"));
        one.pools[0]["spec"]["template"]["spec"]["infrastructureRef"]["name"] = json!(name);
        one.infra_pools[0]["metadata"]["name"] = json!(name);
        world.pools.extend(one.pools);
        world.configs.extend(one.configs);
        world.secrets.extend(one.secrets);
        world.infra_pools.extend(one.infra_pools);
    }
    world
}

fn request(scope: Scope, pools: &[String]) -> kube::Request<'_> {
    kube::Request {
        scope,
        pools,
        now: T0 + NOW * 60,
        cluster_flags: String::new(),
        reissue_flag: false,
    }
}

#[test]
fn one_list_per_kind_however_many_pools() {
    let lister = FakeLister {
        world: fleet_of(40),
        calls: RefCell::default(),
    };
    let report = kube::drift(
        &lister,
        &request(Scope::Namespace(Some("fleet".into())), &[]),
    )
    .unwrap();
    assert_eq!(report.pools.len(), 40);
    let ns = "Namespace(Some(\"fleet\"))";
    assert_eq!(
        *lister.calls.borrow(),
        [
            format!("machinepools.cluster.x-k8s.io {ns} None false"),
            format!("kubeadmconfigs.bootstrap.cluster.x-k8s.io {ns} None true"),
            format!("rke2configs.bootstrap.cluster.x-k8s.io {ns} None true"),
            format!("secrets {ns} Some(\"cluster.x-k8s.io/cluster-name\") true"),
            format!("machines.cluster.x-k8s.io {ns} Some(\"cluster.x-k8s.io/pool-name\") false"),
            format!("azuremachinepools.infrastructure.cluster.x-k8s.io {ns} None false"),
            // No MachinePool Machines: CAPZ's own instances, once.
            format!("azuremachinepoolmachines.infrastructure.cluster.x-k8s.io {ns} None false"),
            format!("dockermachinepools.infrastructure.cluster.x-k8s.io {ns} None false"),
            format!("dockermachines.infrastructure.cluster.x-k8s.io {ns} None false"),
        ]
    );
}

#[rstest]
#[case::named_pool_missing(Scope::Namespace(Some("fleet".into())), &["machinepool/pool-9"], "MachinePool pool-9 not found in fleet")]
#[case::not_a_pool(Scope::Namespace(None), &["machinedeployment/md-0"], "\"machinedeployment/md-0\": name a pool as machinepool/NAME")]
#[case::names_with_all_namespaces(Scope::All, &["machinepool/pool-1"], "named pools are in one namespace: use -n NS, not -A")]
fn usage_errors(#[case] scope: Scope, #[case] pools: &[&str], #[case] message: &str) {
    let lister = FakeLister {
        world: fleet_of(2),
        calls: RefCell::default(),
    };
    let pools: Vec<String> = pools.iter().map(|p| p.to_string()).collect();
    let e = kube::drift(&lister, &request(scope, &pools)).unwrap_err();
    assert_eq!(e.to_string(), message);
}

#[test]
fn named_pools_still_cost_one_list_each_kind() {
    let lister = FakeLister {
        world: fleet_of(4),
        calls: RefCell::default(),
    };
    let pools = vec!["machinepool/pool-2".to_string(), "mp/pool-0".to_string()];
    let report = kube::drift(
        &lister,
        &request(Scope::Namespace(Some("fleet".into())), &pools),
    )
    .unwrap();
    assert_eq!(
        report
            .pools
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>(),
        ["pool-0", "pool-2"]
    );
    assert!(
        !lister
            .calls
            .borrow()
            .iter()
            .any(|c| c.starts_with("rke2configs")),
        "{:?}",
        lister.calls.borrow()
    );
}

/// A fake kubectl: writes its arguments to a file and answers from a directory of lists.
#[cfg(unix)]
#[test]
fn kubectl_is_asked_with_the_persons_flags_and_its_errors_are_kept() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("drift-fake-kubectl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("kubectl");
    let log = dir.join("calls");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho \"$@\" >> {log}\ncase \"$*\" in\n  *machinepools*) echo '{{\"items\": []}}' ;;\n  *secrets*) echo 'Error from server (Forbidden): secrets is forbidden' >&2; exit 1 ;;\n  *) echo '{{\"items\": []}}' ;;\nesac\n",
            log = log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let kubectl = Kubectl {
        program: script.display().to_string(),
        kubeconfig: Some("/k/config".into()),
        context: Some("prod".into()),
    };
    assert_eq!(
        kubectl
            .list("machinepools.cluster.x-k8s.io", &Scope::All, None, false)
            .unwrap(),
        Vec::<Value>::new()
    );
    let e = kubectl
        .list(
            "secrets",
            &Scope::Namespace(Some("fleet".into())),
            Some("a"),
            true,
        )
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "listing secrets: Error from server (Forbidden): secrets is forbidden"
    );
    let calls = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        calls,
        "--kubeconfig /k/config --context prod get machinepools.cluster.x-k8s.io --all-namespaces -o json\n\
         --kubeconfig /k/config --context prod get secrets -n fleet -l a --show-managed-fields -o json\n"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_fleet_report_counts_verdicts() {
    let report = kube::drift(
        &FakeLister {
            world: fleet_of(6),
            calls: RefCell::default(),
        },
        &request(Scope::Namespace(Some("fleet".into())), &[]),
    )
    .unwrap();
    let counts: BTreeMap<&str, usize> = [Verdict::Current, Verdict::Stale, Verdict::Unknown]
        .into_iter()
        .map(|v| (v.name(), report.count(v)))
        .collect();
    assert_eq!(
        counts,
        BTreeMap::from([("current", 6), ("stale", 0), ("unknown", 0)])
    );
}

#[test]
fn a_render_once_edit_names_why_each_instance_is_stale() {
    let p = one(&World::pool(
        &Pool::new("RKE2Config", "DockerMachinePool"),
        0,
        vec![entry("kubectl-edit", "Update", 200, spec_files())],
        1,
        1,
    )
    .machines(&[2, 250]));
    let why: Vec<_> = p
        .instances
        .stale
        .iter()
        .map(|s| (s.name.as_str(), s.because.name(), s.certain))
        .collect();
    assert_eq!(
        why,
        [
            ("pool-1-m0", "launched-before-edit", true),
            ("pool-1-m1", "launched-from-data-without-edit", true)
        ]
    );
    assert!(p.instances.every_future);
    assert_eq!(p.causes[0].in_data_secret, Some(false));
}

#[test]
fn with_rotate_reissue_the_fix_is_one_rotate_line() {
    let world = World::pool(
        &Pool::new("RKE2Config", "DockerMachinePool"),
        0,
        vec![entry("kubectl-edit", "Update", 200, spec_files())],
        1,
        1,
    )
    .machines(&[2]);
    let report = world.report_with(super::REISSUE_FLAG, " --context prod");
    assert_eq!(
        report.pools[0].fix,
        [
            "capi-rollout-check rotate machinepool/pool-1 -n fleet --reissue --context prod",
            "# once CAPI has copied the new dataSecretName into the pool (DockerMachinePool: existing instances keep their data):",
            "capi-rollout-check roll machinepool/pool-1 -n fleet --context prod",
        ]
    );
}
