//! The context-aware mode over a fake cluster: in use means referenced by a MachinePool's
//! current configRef; DELETE, re-create and rotation targets are checked; a failed lookup falls
//! back to the ownerReference rules with a warning, never an error.

use std::cell::RefCell;
use std::collections::BTreeMap;

use capi_bootstrap_rollout_policy::engine;
use capi_bootstrap_rollout_policy::lookups::{
    list_answer, ListRequest, Lookups, CONFIG_FIELDS, MACHINE_POOL_FIELDS,
};
use capi_bootstrap_rollout_policy::settings::Settings;
use capi_bootstrap_rollout_policy::verdict::Verdict;
use rstest::rstest;
use serde_json::{json, Value};

/// The engine on a request the test holds as a value: its JSON text, as the host sends it.
fn evaluate_with(settings: &Settings, request: &Value, lookups: &dyn Lookups) -> Verdict {
    engine::evaluate_with(settings, &serde_json::to_vec(request).unwrap(), lookups)
}

#[derive(Default)]
struct FakeCluster {
    pools: Vec<Value>,
    configs: Vec<Value>,
    fail: Option<&'static str>,
    /// Answer as Kubewarden 1.33 and later do, each object pruned to the request's field
    /// masks; without it, as older hosts do (they ignore the masks) and as this fake did.
    apply_masks: bool,
    calls: RefCell<Vec<String>>,
}

/// policy-evaluator's field masks (Kubewarden 1.33): a tree of dotted paths; an object keeps
/// only the keys on a path, a list on the way is pruned element by element, and below a
/// path's last segment everything is kept.
#[derive(Default)]
struct FieldMask(BTreeMap<String, FieldMask>);

impl FieldMask {
    fn new(paths: &[&str]) -> FieldMask {
        let mut root = FieldMask::default();
        for path in paths {
            let mut node = &mut root;
            for part in path.split('.') {
                node = node.0.entry(part.to_string()).or_default();
            }
        }
        root
    }

    fn prune(&self, value: &mut Value) {
        if self.0.is_empty() {
            return;
        }
        match value {
            Value::Object(map) => {
                map.retain(|key, _| self.0.contains_key(key));
                for (key, child) in map.iter_mut() {
                    self.0[key].prune(child);
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|item| self.prune(item)),
            _ => {}
        }
    }
}

impl Lookups for FakeCluster {
    fn list(&self, request: &ListRequest) -> Result<Vec<u8>, String> {
        self.calls.borrow_mut().push(format!(
            "{} {} {} {:?} {:?}",
            request.api_version,
            request.kind,
            request.namespace,
            request.field_selector,
            request.field_masks
        ));
        if let Some(error) = self.fail {
            return Err(error.to_string());
        }
        let consumer = ["MachinePool", "MachineDeployment", "MachineSet"].contains(&request.kind);
        let source = if consumer { &self.pools } else { &self.configs };
        let items: Vec<Value> = source
            .iter()
            .filter(|o| o["kind"] == request.kind)
            .filter(|o| match &request.field_selector {
                Some(selector) => {
                    selector
                        == &format!("metadata.name={}", o["metadata"]["name"].as_str().unwrap())
                }
                None => true,
            })
            .cloned()
            .map(|mut item| {
                if self.apply_masks {
                    FieldMask::new(request.field_masks).prune(&mut item);
                }
                item
            })
            .collect();
        Ok(list_answer(&items))
    }
}

fn pool(name: &str, config: &str) -> Value {
    json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
           "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
           "spec": {"template": {"spec": {"bootstrap": {
               "configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": config},
               "dataSecretName": config}}}}})
}

fn config(name: &str, owner: Option<&str>, content: &str) -> Value {
    let mut c = json!({"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfig",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"files": [{"path": "/etc/a", "content": content}]}});
    if let Some(owner) = owner {
        c["metadata"]["ownerReferences"] = json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
            "name": owner, "uid": format!("uid-{owner}"), "controller": true}]);
    }
    c
}

fn request(operation: &str, object: Option<&Value>, old: Option<&Value>) -> Value {
    let any = object.or(old).unwrap();
    let (group, version) = any["apiVersion"].as_str().unwrap().split_once('/').unwrap();
    json!({"uid": "r", "operation": operation, "namespace": "default", "name": any["metadata"]["name"],
           "kind": {"group": group, "version": version, "kind": any["kind"]},
           "userInfo": {"username": "alice"}, "object": object, "oldObject": old})
}

fn on() -> Settings {
    Settings::from_value(&json!({"contextAware": true})).unwrap()
}

fn said(verdict: &Verdict) -> String {
    verdict
        .message
        .iter()
        .chain(&verdict.warnings)
        .cloned()
        .collect::<Vec<_>>()
        .join("\n")
}

#[rstest]
// Owned by workers, but workers now references workers-2: rotated out, editable with a warning.
#[case::rotated_out(vec![pool("workers", "workers-2")], Some("workers"), true, "KubeadmConfig workers-1 is rotated out (no MachinePool references it): this edit reaches no node")]
// Referenced before the pool reconciled (no ownerReference yet): protected.
#[case::referenced_not_owned(vec![pool("workers", "workers-1")], None, false, "[spec.files[0].content: Forbidden: changed]. The config is in use by MachinePool default/workers")]
#[case::referenced_and_owned(vec![pool("workers", "workers-1")], Some("workers"), false, "in use by MachinePool default/workers")]
#[case::neither(vec![pool("workers", "workers-2")], None, true, "")]
fn in_use_means_referenced(
    #[case] pools: Vec<Value>,
    #[case] owner: Option<&str>,
    #[case] allowed: bool,
    #[case] fragment: &str,
) {
    let cluster = FakeCluster {
        pools,
        ..FakeCluster::default()
    };
    let old = config("workers-1", owner, "a");
    let new = config("workers-1", owner, "b");
    let verdict = evaluate_with(&on(), &request("UPDATE", Some(&new), Some(&old)), &cluster);
    assert_eq!(verdict.allowed, allowed, "{verdict:?}");
    assert!(said(&verdict).contains(fragment), "{verdict:?}");
    if fragment.is_empty() {
        assert_eq!(verdict, Verdict::accept());
    }
    // One list per request, only the fields the rules read.
    assert_eq!(
        *cluster.calls.borrow(),
        [format!(
            "cluster.x-k8s.io/v1beta2 MachinePool default None {:?}",
            MACHINE_POOL_FIELDS
        )]
    );
}

/// The refusal says what the pool's own infrastructure does after a rotation, read from the
/// pool's infrastructureRef (v1beta2 `apiGroup` or v1beta1 `apiVersion`) through the lookup's
/// field masks; a kind the policy has no record of, or no ref, gets what holds everywhere.
#[rstest]
#[case::azure_v1beta2(json!({"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "AzureMachinePool", "name": "workers"}),
    "On a rotation, AzureMachinePool replaces no existing instance: new instances take the new data; delete the pool's Machines to replace them (CAPI drains each node first); CAPZ documents deleting their AzureMachinePoolMachines (")]
#[case::aws_v1beta1(json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "AWSMachinePool", "name": "workers", "namespace": "default"}),
    "On a rotation, AWSMachinePool replaces the existing instances with an instance refresh, unless spec.refreshPreferences.disable is true; CAPA v2.11.1 starts none on the first change after an upgrade from a CAPA that did not tag the launch template with the data Secret's name, and does not retry one that fails to start (")]
#[case::eks_launch_template(json!({"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "AWSManagedMachinePool", "name": "workers"}),
    "This edit would still reach the nodes, unrecorded: AWSManagedMachinePool rolls every node on a new launch template version, an in-place edit included, if it has spec.awsLaunchTemplate; a rotation rolls them too, recorded in the pool (")]
#[case::unknown_kind(json!({"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "ExampleMachinePool", "name": "workers"}),
    "Whether existing instances are then replaced is the infrastructure provider's choice (")]
#[case::no_ref(json!(null), "Whether existing instances are then replaced is the infrastructure provider's choice (")]
fn the_refusal_names_what_the_pools_infrastructure_does(
    #[case] infrastructure_ref: Value,
    #[case] fragment: &str,
) {
    let mut p = pool("workers", "workers-1");
    p["spec"]["template"]["spec"]["infrastructureRef"] = infrastructure_ref;
    p["spec"]["template"]["spec"]["version"] = json!("v1.33.1");
    let cluster = FakeCluster {
        pools: vec![p],
        apply_masks: true,
        ..FakeCluster::default()
    };
    let old = config("workers-1", Some("workers"), "a");
    let new = config("workers-1", Some("workers"), "b");
    let verdict = evaluate_with(&on(), &request("UPDATE", Some(&new), Some(&old)), &cluster);
    assert!(!verdict.allowed);
    let message = verdict.message.unwrap();
    assert!(
        message.contains(&format!(
            "The config is in use by MachinePool default/workers, and CAPI takes a bootstrap change only from a configRef rotation (cluster-api #8858). {fragment}"
        )),
        "{message}"
    );
    assert!(
        message.contains("docs/infrastructure.md). To rotate, create a new KubeadmConfig"),
        "{message}"
    );
}

#[rstest]
#[case::referenced_by_a_live_pool(json!(null), false, "[metadata.name: Forbidden: referenced by the configRef of MachinePool default/workers]")]
#[case::pool_being_deleted(json!("2026-11-29T10:00:00Z"), true, "")]
fn delete_of_a_referenced_config(
    #[case] deletion: Value,
    #[case] allowed: bool,
    #[case] fragment: &str,
) {
    let mut p = pool("workers", "workers-1");
    p["metadata"]["deletionTimestamp"] = deletion;
    let cluster = FakeCluster {
        pools: vec![p],
        ..FakeCluster::default()
    };
    let old = config("workers-1", Some("workers"), "a");
    let verdict = evaluate_with(&on(), &request("DELETE", None, Some(&old)), &cluster);
    assert_eq!(verdict.allowed, allowed);
    assert!(said(&verdict).contains(fragment), "{verdict:?}");
    // Without the context-aware mode, DELETE is accepted with a warning from the
    // ownerReference alone, and nothing is looked up.
    let off = evaluate_with(
        &Settings::default(),
        &request("DELETE", None, Some(&old)),
        &cluster,
    );
    assert!(off.allowed);
    assert_eq!(off.warnings, [OWNED_DELETE]);
    assert_eq!(cluster.calls.borrow().len(), 1);
}

#[test]
fn recreate_under_a_consumed_data_secret_name_is_flagged() {
    let cluster = FakeCluster {
        pools: vec![pool("workers", "workers-1")],
        ..FakeCluster::default()
    };
    let new = config("workers-1", None, "b");
    let verdict = evaluate_with(&on(), &request("CREATE", Some(&new), None), &cluster);
    assert!(verdict.allowed);
    assert_eq!(verdict.warnings, ["KubeadmConfig workers-1: MachinePool workers already consumed this data secret name: no rotation"]);
}

#[test]
fn a_failed_lookup_falls_back_to_owner_references() {
    let cluster = FakeCluster {
        fail: Some("forbidden: cannot list machinepools"),
        ..FakeCluster::default()
    };
    let old = config("workers-1", Some("workers"), "a");
    let new = config("workers-1", Some("workers"), "b");
    let verdict = evaluate_with(&on(), &request("UPDATE", Some(&new), Some(&old)), &cluster);
    assert!(!verdict.allowed);
    assert_eq!(verdict.code, Some(403));
    assert_eq!(verdict.warnings, ["MachinePool lookup failed, judged by ownerReferences only: forbidden: cannot list machinepools"]);
    // A DELETE then gets what it gets without lookups: the ownerReference's warning.
    let verdict = evaluate_with(&on(), &request("DELETE", None, Some(&old)), &cluster);
    assert!(verdict.allowed);
    assert_eq!(
        verdict.warnings,
        [
            "MachinePool lookup failed, judged by ownerReferences only: forbidden: cannot list machinepools",
            OWNED_DELETE
        ]
    );
}

/// The warning a DELETE of a config `workers` owns gets without an answer from the lookups.
const OWNED_DELETE: &str = "MachinePool workers owns it: a same-name re-create is no rotation; \
    rotate configRef (contextAware: true refuses)";

fn rotate(cluster: &FakeCluster, to: &str) -> Verdict {
    let old = pool("workers", "workers-1");
    let new = pool("workers", to);
    evaluate_with(&on(), &request("UPDATE", Some(&new), Some(&old)), cluster)
}

#[rstest]
#[case::target_missing(vec![config("workers-1", Some("workers"), "a")], true, "configRef target KubeadmConfig workers-2 does not exist yet: the MachinePool waits for it")]
#[case::target_controlled_by_another_pool(vec![config("workers-1", Some("workers"), "a"), config("workers-2", Some("batch"), "b")], false, "[spec.template.spec.bootstrap.configRef.name: Forbidden: KubeadmConfig default/workers-2 is controlled by MachinePool default/batch]")]
#[case::target_already_ours(vec![config("workers-1", Some("workers"), "a"), config("workers-2", Some("workers"), "b")], true, "")]
#[case::same_content(vec![config("workers-1", Some("workers"), "a"), config("workers-2", None, "a")], true, "workers-2 has the same content as workers-1: a rotation for nothing")]
fn rotation_targets(#[case] configs: Vec<Value>, #[case] allowed: bool, #[case] fragment: &str) {
    let cluster = FakeCluster {
        configs,
        ..FakeCluster::default()
    };
    let verdict = rotate(&cluster, "workers-2");
    assert_eq!(verdict.allowed, allowed, "{verdict:?}");
    assert!(said(&verdict).contains(fragment), "{verdict:?}");
    if fragment.is_empty() {
        assert_eq!(verdict, Verdict::accept());
    }
    assert_eq!(
        cluster.calls.borrow()[0],
        format!("bootstrap.cluster.x-k8s.io/v1beta2 KubeadmConfig default Some(\"metadata.name=workers-2\") {:?}", CONFIG_FIELDS)
    );
}

#[test]
fn rotation_target_ready_without_data_secret_is_flagged() {
    let mut target = config("workers-2", None, "b");
    target["status"] = json!({"initialization": {"dataSecretCreated": true}});
    let cluster = FakeCluster {
        configs: vec![config("workers-1", Some("workers"), "a"), target],
        ..FakeCluster::default()
    };
    let verdict = rotate(&cluster, "workers-2");
    assert!(verdict.allowed);
    assert_eq!(verdict.warnings, ["configRef target KubeadmConfig workers-2 is ready without status.dataSecretName (bootstrap contract)"]);
}

#[test]
fn rotation_lookup_failure_is_a_warning() {
    let cluster = FakeCluster {
        fail: Some("connection refused"),
        ..FakeCluster::default()
    };
    let verdict = rotate(&cluster, "workers-2");
    assert!(verdict.allowed);
    assert_eq!(
        verdict.warnings,
        ["KubeadmConfig lookup failed, judged by ownerReferences only: connection refused"]
    );
}

#[test]
fn capi_version_setting_drives_the_lookups() {
    let cluster = FakeCluster::default();
    let settings =
        Settings::from_value(&json!({"contextAware": true, "capiVersion": "v1beta1"})).unwrap();
    let old = config("workers-1", Some("workers"), "a");
    let _ = evaluate_with(&settings, &request("DELETE", None, Some(&old)), &cluster);
    assert!(cluster.calls.borrow()[0].starts_with("cluster.x-k8s.io/v1beta1 MachinePool default"));
}

fn deployment(kind: &str, name: &str, template: &str) -> Value {
    json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": kind,
           "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
           "spec": {"template": {"spec": {"bootstrap": {"configRef":
               {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfigTemplate", "name": template}}}}}})
}

fn kubeadm_template(content: &str) -> Value {
    json!({"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfigTemplate",
           "metadata": {"name": "md-0-1", "namespace": "default"},
           "spec": {"template": {"spec": {"files": [{"path": "/etc/a", "content": content}]}}}})
}

#[rstest]
#[case::referenced_by_nothing(vec![deployment("MachineDeployment", "md-0", "md-0-2")], true, "KubeadmConfigTemplate md-0-1 is referenced by no MachineDeployment or MachineSet: this edit reaches no Machine")]
#[case::referenced_by_a_deployment(vec![deployment("MachineDeployment", "md-0", "md-0-1")], false, "then set spec.template.spec.bootstrap.configRef.name of MachineDeployment default/md-0 to")]
#[case::referenced_by_a_machine_set(vec![deployment("MachineSet", "md-0-abcde", "md-0-1")], false, "of MachineSet default/md-0-abcde to")]
fn template_edits_with_lookups(
    #[case] pools: Vec<Value>,
    #[case] allowed: bool,
    #[case] fragment: &str,
) {
    let cluster = FakeCluster {
        pools,
        ..FakeCluster::default()
    };
    let verdict = evaluate_with(
        &on(),
        &request(
            "UPDATE",
            Some(&kubeadm_template("b")),
            Some(&kubeadm_template("a")),
        ),
        &cluster,
    );
    assert_eq!(verdict.allowed, allowed, "{verdict:?}");
    assert!(said(&verdict).contains(fragment), "{verdict:?}");
    assert_eq!(
        cluster.calls.borrow().len(),
        2,
        "one list of MachineDeployments, one of MachineSets"
    );
}

#[rstest]
#[case::referenced(vec![deployment("MachineSet", "md-0-abcde", "md-0-1")], false)]
#[case::not_referenced(vec![deployment("MachineDeployment", "md-0", "md-0-2")], true)]
fn template_delete_with_lookups(#[case] pools: Vec<Value>, #[case] allowed: bool) {
    let cluster = FakeCluster {
        pools,
        ..FakeCluster::default()
    };
    let verdict = evaluate_with(
        &on(),
        &request("DELETE", None, Some(&kubeadm_template("a"))),
        &cluster,
    );
    assert_eq!(verdict.allowed, allowed, "{verdict:?}");
    if !allowed {
        assert!(said(&verdict).contains("[metadata.name: Forbidden: referenced by the configRef of MachineSet default/md-0-abcde]"));
    }
}

/// A token rotation as CABPK writes it: only the machine-only field changes.
fn token(config: &mut Value, token: &str) {
    config["spec"]["joinConfiguration"] =
        json!({"discovery": {"bootstrapToken": {"token": token}}});
}

fn with<F: FnOnce(&mut Value)>(mut object: Value, change: F) -> Value {
    change(&mut object);
    object
}

const CABPK: &str =
    "system:serviceaccount:capi-kubeadm-bootstrap-system:capi-kubeadm-bootstrap-manager";

/// Lazy lookups: each request makes only the lookups whose answer can change its verdict.
/// CAPI's frequent writes (token rotation, fill-once fields, status, labels) make none, so a
/// cluster where the lookup is refused (RBAC not granted yet) answers them with no warning.
#[rstest]
#[case::token_rotation("UPDATE", Some(with(config("w-1", Some("w"), "a"), |c| token(c, "abcdef.0123456789abcdef"))), Some(with(config("w-1", Some("w"), "a"), |c| token(c, "ghijkl.0123456789abcdef"))), CABPK, 0)]
#[case::token_first_set("UPDATE", Some(config("w-1", Some("w"), "a")), Some(with(config("w-1", Some("w"), "a"), |c| token(c, "abcdef.0123456789abcdef"))), CABPK, 0)]
#[case::endpoint_filled("UPDATE", Some(config("w-1", Some("w"), "a")), Some(with(config("w-1", Some("w"), "a"), |c| c["spec"]["joinConfiguration"] = json!({"discovery": {"bootstrapToken": {"apiServerEndpoint": "10.0.0.1:6443"}}}))), CABPK, 0)]
#[case::status_written("UPDATE", Some(config("w-1", Some("w"), "a")), Some(with(config("w-1", Some("w"), "a"), |c| c["status"] = json!({"initialization": {"dataSecretCreated": true}, "dataSecretName": "w-1"}))), CABPK, 0)]
#[case::labels_and_annotations("UPDATE", Some(config("w-1", Some("w"), "a")), Some(with(config("w-1", Some("w"), "a"), |c| c["metadata"]["labels"] = json!({"team": "payments"}))), "alice", 0)]
#[case::owner_reference_set_by_capi(
    "UPDATE",
    Some(config("w-1", None, "a")),
    Some(config("w-1", Some("w"), "a")),
    "system:serviceaccount:capi-system:capi-manager",
    0
)]
#[case::spec_edit(
    "UPDATE",
    Some(config("w-1", Some("w"), "a")),
    Some(config("w-1", Some("w"), "b")),
    "alice",
    1
)]
#[case::spec_edit_of_an_unowned_config(
    "UPDATE",
    Some(config("w-1", None, "a")),
    Some(config("w-1", None, "b")),
    "alice",
    1
)]
#[case::owner_reference_removed(
    "UPDATE",
    Some(config("w-1", Some("w"), "a")),
    Some(config("w-1", None, "a")),
    "alice",
    1
)]
#[case::delete("DELETE", Some(config("w-1", Some("w"), "a")), None, "alice", 1)]
#[case::create("CREATE", None, Some(config("w-2", None, "a")), "alice", 1)]
fn lookups_are_made_only_when_they_can_change_the_verdict(
    #[case] operation: &str,
    #[case] old: Option<Value>,
    #[case] new: Option<Value>,
    #[case] user: &str,
    #[case] expected_calls: usize,
) {
    let mut req = request(operation, new.as_ref(), old.as_ref());
    req["userInfo"]["username"] = json!(user);
    let cluster = FakeCluster {
        pools: vec![pool("w", "w-1")],
        ..FakeCluster::default()
    };
    let _ = evaluate_with(&on(), &req, &cluster);
    assert_eq!(
        cluster.calls.borrow().len(),
        expected_calls,
        "{:?}",
        cluster.calls.borrow()
    );
    // Where no lookup is made, a refused one cannot show: no warning.
    let refused = FakeCluster {
        fail: Some("machinepools.cluster.x-k8s.io is forbidden"),
        ..FakeCluster::default()
    };
    let verdict = evaluate_with(&on(), &req, &refused);
    assert_eq!(refused.calls.borrow().len(), expected_calls);
    if expected_calls == 0 {
        assert!(verdict.warnings.is_empty(), "{verdict:?}");
    } else {
        assert!(
            verdict.warnings.iter().any(|w| w.contains("lookup failed")),
            "{verdict:?}"
        );
    }
}

#[test]
fn a_machine_pool_update_that_keeps_its_ref_looks_nothing_up() {
    let cluster = FakeCluster::default();
    let old = pool("workers", "workers-1");
    let mut new = old.clone();
    new["spec"]["replicas"] = json!(5);
    let verdict = evaluate_with(&on(), &request("UPDATE", Some(&new), Some(&old)), &cluster);
    assert_eq!(verdict, Verdict::accept());
    assert!(cluster.calls.borrow().is_empty());
    let _ = rotate(&cluster, "workers-2");
    assert_eq!(
        cluster.calls.borrow().len(),
        1,
        "the rotation's target is looked up"
    );
}

/// An object as the API server serves it: labels, managed fields, replicas and status besides
/// what the fixtures above spell out, none of which the field masks keep.
fn as_served(mut object: Value) -> Value {
    object["metadata"]["labels"] = json!({"cluster.x-k8s.io/cluster-name": "prod"});
    object["metadata"]["managedFields"] = json!([{"manager": "clusterctl", "operation": "Apply"}]);
    object["metadata"]["resourceVersion"] = json!("4711");
    if object["kind"] != "KubeadmConfig" {
        object["spec"]["replicas"] = json!(3);
        object["status"] = json!({"phase": "Running", "replicas": 3});
    }
    object
}

#[test]
fn the_fake_prunes_as_policy_evaluator_does() {
    let mut served = as_served(pool("workers", "workers-1"));
    served["metadata"]["deletionTimestamp"] = json!("2026-11-29T10:00:00Z");
    FieldMask::new(&MACHINE_POOL_FIELDS).prune(&mut served);
    assert_eq!(
        served,
        json!({"metadata": {"name": "workers", "uid": "uid-workers", "deletionTimestamp": "2026-11-29T10:00:00Z"},
               "spec": {"template": {"spec": {"bootstrap": {
                   "configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": "workers-1"},
                   "dataSecretName": "workers-1"}}}}})
    );
    let mut list = json!({"a": [{"b": 1, "c": 2}, {"b": 3}], "d": 4});
    FieldMask::new(&["a.b"]).prune(&mut list);
    assert_eq!(list, json!({"a": [{"b": 1}, {"b": 3}]}));
}

fn rotated(to: &str) -> Value {
    request(
        "UPDATE",
        Some(&pool("workers", to)),
        Some(&pool("workers", "workers-1")),
    )
}

/// Kubewarden 1.33 and later prune a lookup's answer to the field masks the policy sends;
/// older hosts ignore the masks (their request type has no such field) and return whole
/// objects. The rules read only masked fields, so every verdict is the same either way: on an
/// older host the lookups cost memory and bytes, not correctness (metadata.yml's
/// minimumKubewardenVersion still asks for 1.33, for the documented behaviour).
#[rstest]
#[case::edit_of_a_rotated_out_config(vec![pool("workers", "workers-2")], vec![],
    request("UPDATE", Some(&config("workers-1", Some("workers"), "b")), Some(&config("workers-1", Some("workers"), "a"))))]
#[case::edit_of_a_config_in_use(vec![pool("workers", "workers-1")], vec![],
    request("UPDATE", Some(&config("workers-1", None, "b")), Some(&config("workers-1", None, "a"))))]
#[case::delete_of_a_referenced_config(vec![pool("workers", "workers-1")], vec![],
    request("DELETE", None, Some(&config("workers-1", Some("workers"), "a"))))]
#[case::delete_while_the_pool_is_deleted(vec![with(pool("workers", "workers-1"), |p| p["metadata"]["deletionTimestamp"] = json!("2026-11-29T10:00:00Z"))], vec![],
    request("DELETE", None, Some(&config("workers-1", Some("workers"), "a"))))]
#[case::recreate_under_a_consumed_name(vec![pool("workers", "workers-1")], vec![],
    request("CREATE", Some(&config("workers-1", None, "b")), None))]
#[case::rotation_to_another_pools_config(vec![], vec![config("workers-1", Some("workers"), "a"), config("workers-2", Some("batch"), "b")], rotated("workers-2"))]
#[case::rotation_to_the_same_content(vec![], vec![config("workers-1", Some("workers"), "a"), config("workers-2", None, "a")], rotated("workers-2"))]
#[case::rotation_to_a_ready_config_without_secret(vec![], vec![with(config("workers-2", None, "b"), |c| c["status"] = json!({"initialization": {"dataSecretCreated": true}}))], rotated("workers-2"))]
#[case::template_edit_referenced(vec![deployment("MachineSet", "md-0-abcde", "md-0-1")], vec![],
    request("UPDATE", Some(&kubeadm_template("b")), Some(&kubeadm_template("a"))))]
#[case::template_delete_unreferenced(vec![deployment("MachineDeployment", "md-0", "md-0-2")], vec![],
    request("DELETE", None, Some(&kubeadm_template("a"))))]
fn verdicts_do_not_depend_on_the_host_applying_the_field_masks(
    #[case] pools: Vec<Value>,
    #[case] configs: Vec<Value>,
    #[case] request: Value,
) {
    let pools: Vec<Value> = pools.into_iter().map(as_served).collect();
    let configs: Vec<Value> = configs.into_iter().map(as_served).collect();
    let whole = FakeCluster {
        pools: pools.clone(),
        configs: configs.clone(),
        ..FakeCluster::default()
    };
    let masked = FakeCluster {
        pools,
        configs,
        apply_masks: true,
        ..FakeCluster::default()
    };
    let verdict = evaluate_with(&on(), &request, &whole);
    assert_eq!(evaluate_with(&on(), &request, &masked), verdict);
    assert!(
        !whole.calls.borrow().is_empty(),
        "the case looks nothing up"
    );
    assert_eq!(*masked.calls.borrow(), *whole.calls.borrow());
}
