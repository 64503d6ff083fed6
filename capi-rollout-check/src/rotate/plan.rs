//! The rotation the policy asks for, planned without touching anything: from the objects that
//! use a config (MachinePools; MachineDeployments and MachineSets for a template), the config
//! as it is and the config as the person wants it, the new object to create and the refs to
//! repoint. The new name and the changed paths are the policy's own: the in-place edit is
//! judged by the policy's engine (`check::check`), and the name is the one its refusal
//! suggests, so the command and the policy always agree.

use std::fmt;

use capi_bootstrap_rollout_policy::capi::kinds::{is_machine_pool, is_machine_template_consumer};
use capi_bootstrap_rollout_policy::capi::paths::{FieldPath, PathPattern};
use capi_bootstrap_rollout_policy::settings::{Action, Settings};
use serde_json::{Map, Value};

pub use super::owned::person_owned;
use super::owned::{fill_from, owned_entries};
use crate::check::{self, Operation};
pub use crate::manifests::{key_of, ConfigRef};
use crate::manifests::{Key, ManifestSet};

/// The label the topology controller puts on what a ClusterClass's Cluster owns.
const TOPOLOGY_OWNED_LABEL: &str = "topology.cluster.x-k8s.io/owned";

/// Why there is no rotation to do; each names the objects and what to do instead.
#[derive(Debug, PartialEq, Eq)]
pub enum PlanError {
    /// The consumer carries a deletionTimestamp.
    BeingDeleted { consumer: Key },
    /// A ClusterClass's Cluster owns the consumer: its topology controller writes the config.
    Topology { consumer: Key, cluster: String },
    /// The consumer names no config (bootstrap.dataSecretName only, or no bootstrap).
    NoConfigRef { consumer: Key },
    /// The edited manifest is not the config the consumer uses now.
    NotCurrent {
        consumer: Key,
        uses: ConfigRef,
        edited: Key,
    },
    /// The edit changes nothing the policy compares.
    NothingToRotate { config: Key },
    /// The policy's verdict on the edit names no rotation (it refused for another reason).
    NoSuggestion { config: Key, message: String },
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlanError::BeingDeleted { consumer } => write!(
                f,
                "{consumer} is being deleted (it has a deletionTimestamp): there is nothing to roll out to"
            ),
            PlanError::Topology { consumer, cluster } => write!(
                f,
                "{consumer} is managed by Cluster {cluster}'s topology (label {TOPOLOGY_OWNED_LABEL}): \
                 change the ClusterClass's bootstrap template instead. The topology controller \
                 then rotates a MachineDeployment's template and patches a MachinePool's config \
                 in place, which rolls nothing out (cluster-api #10496): roll a pool out by adding \
                 a new MachinePool topology. A configRef rotated by hand stops the topology \
                 controller for the whole Cluster"
            ),
            PlanError::NoConfigRef { consumer } => write!(
                f,
                "{consumer} has no spec.template.spec.bootstrap.configRef: it takes its bootstrap \
                 data from a dataSecretName, and there is no config to rotate"
            ),
            PlanError::NotCurrent { consumer, uses, edited } => write!(
                f,
                "{consumer} uses {} {}, not {} {}: edit the config it uses now \
                 (kubectl get {}.{} {} -n {} -o yaml)",
                uses.kind,
                uses.name,
                edited.kind,
                edited.name,
                uses.kind.to_lowercase(),
                uses.group,
                uses.name,
                consumer.namespace,
            ),
            PlanError::NothingToRotate { config } => write!(
                f,
                "nothing to rotate: the edited spec of {config} is the one it has, as the policy \
                 compares it (fields CAPI's controllers write are not compared); nothing was created"
            ),
            PlanError::NoSuggestion { config, message } => write!(
                f,
                "the policy refuses the edit of {config} for another reason than an in-place \
                 edit, and suggests no rotation: {message}"
            ),
        }
    }
}

impl std::error::Error for PlanError {}

/// The rotation: create `new_object` (named `new`), then point every consumer's configRef at it.
#[derive(Debug)]
pub struct Plan {
    pub old: Key,
    pub new: Key,
    pub new_object: Value,
    pub consumers: Vec<Key>,
    /// The spec paths the edit changes, as the policy lists them (`path (changed)`).
    pub changed: Vec<String>,
    /// What the policy answers the same edit made in place.
    pub refusal: String,
}

/// Whether the consumer is a MachinePool (it names a config) or a MachineDeployment or
/// MachineSet (it names a template).
fn is_consumer(key: &Key) -> bool {
    is_machine_pool(&key.group, &key.kind) || is_machine_template_consumer(&key.group, &key.kind)
}

/// The checks of one consumer: not being deleted, not a topology's, naming a config.
pub fn check_consumer(consumer: &Value) -> Result<ConfigRef, PlanError> {
    let key = key_of(consumer);
    debug_assert!(is_consumer(&key), "{key} is not a consumer kind");
    if consumer
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
    {
        return Err(PlanError::BeingDeleted { consumer: key });
    }
    let labels = consumer
        .pointer("/metadata/labels")
        .and_then(Value::as_object);
    if labels.is_some_and(|l| l.contains_key(TOPOLOGY_OWNED_LABEL)) {
        let cluster = labels
            .and_then(|l| l.get("cluster.x-k8s.io/cluster-name"))
            .and_then(Value::as_str)
            .or_else(|| {
                consumer
                    .pointer("/spec/clusterName")
                    .and_then(Value::as_str)
            })
            .unwrap_or("?")
            .to_string();
        return Err(PlanError::Topology {
            consumer: key,
            cluster,
        });
    }
    ConfigRef::of(consumer).ok_or(PlanError::NoConfigRef { consumer: key })
}

/// The settings the plan judges with: the user's (their kinds, their non-compared paths), with
/// in-place edits of configs and templates refused, so that the verdict carries the rotation.
fn judging(settings: &Settings) -> Settings {
    let mut settings = settings.clone();
    settings.in_place_edits = Action::Reject;
    settings.template_edits = Action::Reject;
    settings.context_aware = true;
    settings
}

/// The edited manifest's identity (a name or namespace left out is the current config's),
/// checked against what every consumer uses now.
fn check_edited(consumers: &[&Value], old: &Key, edited: &Value) -> Result<(), PlanError> {
    let mut edited_key = key_of(edited);
    let missing = |pointer: &str| {
        edited
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
    };
    if missing("/metadata/name") {
        edited_key.name = old.name.clone();
    }
    if missing("/metadata/namespace") {
        edited_key.namespace = old.namespace.clone();
    }
    for consumer in consumers {
        let uses = check_consumer(consumer)?;
        if !uses.names(&edited_key) || edited_key.namespace != old.namespace {
            return Err(PlanError::NotCurrent {
                consumer: key_of(consumer),
                uses,
                edited: edited_key,
            });
        }
    }
    Ok(())
}

/// What the policy's verdict on an in-place edit names.
struct InPlace {
    changed: Vec<String>,
    message: String,
    suggested_name: String,
}

/// The policy's verdict on the edit made in place, as `kubectl apply` of the manifest makes
/// it: what CAPI's controllers wrote and the manifest leaves out stays as it is.
fn judge_in_place(
    settings: &Settings,
    consumers: &[&Value],
    current: &Value,
    edited: &Value,
) -> Result<InPlace, PlanError> {
    let old = key_of(current);
    let mut in_place = current.clone();
    let mut spec = edited
        .get("spec")
        .cloned()
        .unwrap_or(Value::Object(Map::new()));
    if settings.is_bootstrap_config(&old.group, &old.kind) {
        let rules = settings.field_rules(&old.kind);
        let theirs: Vec<PathPattern> = rules
            .ignored
            .iter()
            .chain(&rules.fill_once)
            .cloned()
            .collect();
        if let Some(current_spec) = current.get("spec") {
            fill_from(
                &mut spec,
                current_spec,
                &mut FieldPath::root("spec"),
                &theirs,
            );
        }
    }
    in_place["spec"] = spec;
    let (mut base, mut head) = (ManifestSet::default(), ManifestSet::default());
    for consumer in consumers {
        let _ = base.add_object((*consumer).clone(), "cluster");
        let _ = head.add_object((*consumer).clone(), "cluster");
    }
    let _ = base.add_object(current.clone(), "cluster");
    let _ = head.add_object(in_place, "cluster");
    let report = check::check(&judging(settings), &base, &head);
    let Some(outcome) = report
        .outcomes
        .into_iter()
        .find(|o| o.key == old && o.operation == Operation::Update)
    else {
        return Err(PlanError::NothingToRotate { config: old });
    };
    if outcome.verdict.allowed {
        return Err(PlanError::NothingToRotate { config: old });
    }
    let message = outcome.verdict.message.clone().unwrap_or_default();
    let Some(suggested_name) = outcome.verdict.suggested_name.clone() else {
        return Err(PlanError::NoSuggestion {
            config: old,
            message,
        });
    };
    Ok(InPlace {
        changed: outcome.changed,
        message,
        suggested_name,
    })
}

/// Plans the rotation of `current` (the config or template `consumers` use now) to `edited`.
/// `consumers` are every MachinePool, MachineDeployment or MachineSet known to use it.
pub fn plan(
    settings: &Settings,
    consumers: &[&Value],
    current: &Value,
    edited: &Value,
) -> Result<Plan, PlanError> {
    let old = key_of(current);
    check_edited(consumers, &old, edited)?;
    let verdict = judge_in_place(settings, consumers, current, edited)?;
    let name = verdict.suggested_name;

    let mut new_object = person_owned(settings, edited);
    new_object["apiVersion"] = edited
        .get("apiVersion")
        .or_else(|| current.get("apiVersion"))
        .cloned()
        .unwrap_or(Value::Null);
    new_object["metadata"]["name"] = Value::String(name.clone());
    new_object["metadata"]["namespace"] = Value::String(old.namespace.clone());
    if edited.pointer("/metadata/labels").is_none() {
        // A manifest without labels keeps the current config's (cluster-name among them).
        let labels = owned_entries(current.pointer("/metadata/labels"), false);
        if !labels.is_empty() {
            new_object["metadata"]["labels"] = Value::Object(labels);
        }
    }
    let new = Key {
        name,
        ..old.clone()
    };
    Ok(Plan {
        old,
        new,
        new_object,
        consumers: consumers.iter().map(|c| key_of(c)).collect(),
        changed: verdict.changed,
        refusal: verdict.message,
    })
}

/// `consumer` with its configRef pointing at `name`.
pub fn repointed(consumer: &Value, name: &str) -> Value {
    let mut consumer = consumer.clone();
    if let Some(r) = consumer.pointer_mut("/spec/template/spec/bootstrap/configRef") {
        r["name"] = Value::String(name.to_string());
    }
    consumer
}

/// The policy's verdicts on the rotation itself (the new config created, the consumers
/// repointed): the rejections, if any, as `operation key: message`. The plan's own check that
/// what it will write is what the policy admits.
pub fn rejections(
    settings: &Settings,
    consumers: &[&Value],
    current: &Value,
    plan: &Plan,
) -> Vec<String> {
    let (mut base, mut head) = (ManifestSet::default(), ManifestSet::default());
    for consumer in consumers {
        let _ = base.add_object((*consumer).clone(), "cluster");
        let _ = head.add_object(repointed(consumer, &plan.new.name), "cluster");
    }
    let _ = base.add_object(current.clone(), "cluster");
    let _ = head.add_object(current.clone(), "cluster");
    let _ = head.add_object(plan.new_object.clone(), "cluster");
    let mut settings = settings.clone();
    settings.context_aware = true;
    check::check(&settings, &base, &head)
        .outcomes
        .into_iter()
        .filter(|o| !o.verdict.allowed)
        .map(|o| {
            format!(
                "{} {}: {}",
                o.operation.as_str(),
                o.key,
                o.verdict.message.unwrap_or_default()
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use capi_bootstrap_rollout_policy::fingerprint::{spec_fingerprint, suggested_name};
    use rstest::rstest;
    use serde_json::json;

    fn config(spec: Value) -> Value {
        json!({
            "apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2",
            "kind": "KubeadmConfig",
            "metadata": {
                "name": "pool-1-a", "namespace": "fleet", "uid": "u-1", "resourceVersion": "7",
                "labels": {"cluster.x-k8s.io/cluster-name": "c1", "team": "payments"},
                "annotations": {
                    "kubectl.kubernetes.io/last-applied-configuration": "{}",
                    "cluster.x-k8s.io/conversion-data": "{}",
                    "note": "kept"
                },
                "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
                                     "name": "pool-1", "uid": "p-1", "controller": true}],
                "managedFields": [{"manager": "kubectl"}]
            },
            "spec": spec,
            "status": {"dataSecretName": "pool-1-a", "initialization": {"dataSecretCreated": true}}
        })
    }

    fn spec(sysctl: &str) -> Value {
        json!({
            "files": [{"path": "/etc/sysctl.d/90-fleet.conf", "content": sysctl}],
            "joinConfiguration": {"discovery": {"bootstrapToken": {"token": "abcdef.0123456789abcdef",
                                                                    "apiServerEndpoint": "10.0.0.1:6443"}}}
        })
    }

    fn pool(extra_metadata: Value) -> Value {
        let mut pool = json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2",
            "kind": "MachinePool",
            "metadata": {"name": "pool-1", "namespace": "fleet"},
            "spec": {"clusterName": "c1", "template": {"spec": {"clusterName": "c1", "bootstrap": {
                "configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": "pool-1-a"},
                "dataSecretName": "pool-1-a"}}}}
        });
        for (k, v) in extra_metadata.as_object().unwrap() {
            pool["metadata"][k] = v.clone();
        }
        pool
    }

    fn edited(name: &str, sysctl: &str) -> Value {
        json!({"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfig",
               "metadata": {"name": name, "namespace": "fleet"},
               "spec": {"files": [{"path": "/etc/sysctl.d/90-fleet.conf", "content": sysctl}]}})
    }

    #[test]
    fn the_name_is_the_one_the_policy_suggests() {
        let settings = Settings::default();
        let current = config(spec("vm.max_map_count = 262144\n"));
        let pool = pool(json!({}));
        let plan = plan(
            &settings,
            &[&pool],
            &current,
            &edited("pool-1-a", "vm.max_map_count = 524288\n"),
        )
        .unwrap();
        let fingerprint = spec_fingerprint(
            plan.new_object.get("spec"),
            &settings.field_rules("KubeadmConfig"),
        );
        assert_eq!(plan.new.name, suggested_name("pool-1-a", &fingerprint));
        assert!(
            plan.refusal
                .contains(&format!("create a new KubeadmConfig {:?}", plan.new.name)),
            "{}",
            plan.refusal
        );
        assert_eq!(
            plan.changed,
            vec!["spec.files[0].content (changed)".to_string()]
        );
        assert_eq!(plan.consumers, vec![key_of(&pool)]);
        assert!(rejections(&settings, &[&pool], &current, &plan).is_empty());
    }

    #[test]
    fn only_what_a_person_owns_is_copied() {
        let settings = Settings::default();
        let current = config(spec("a\n"));
        // --edit: the person changed the live object's spec and left the rest.
        let mut live_edit = person_owned(&settings, &current);
        live_edit["spec"]["files"][0]["content"] = json!("b\n");
        let plan = plan(&settings, &[&pool(json!({}))], &current, &live_edit).unwrap();
        let object = &plan.new_object;
        assert_eq!(object["metadata"]["name"], json!(plan.new.name));
        assert_eq!(
            object["metadata"]["labels"],
            json!({"cluster.x-k8s.io/cluster-name": "c1", "team": "payments"})
        );
        assert_eq!(object["metadata"]["annotations"], json!({"note": "kept"}));
        for gone in ["uid", "resourceVersion", "ownerReferences", "managedFields"] {
            assert!(object["metadata"].get(gone).is_none(), "{gone} copied");
        }
        assert!(object.get("status").is_none());
        // CABPK's token is CABPK's; the endpoint it filled once stays as the person saw it.
        assert_eq!(
            object["spec"]["joinConfiguration"],
            json!({"discovery": {"bootstrapToken": {"apiServerEndpoint": "10.0.0.1:6443"}}})
        );
    }

    #[rstest]
    #[case::same_spec(edited("pool-1-a", "a\n"))]
    #[case::only_the_token(json!({"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfig",
        "metadata": {"name": "pool-1-a"}, "spec": {"files": [{"path": "/etc/sysctl.d/90-fleet.conf", "content": "a\n"}],
        "joinConfiguration": {"discovery": {"bootstrapToken": {"token": "zzzzzz.0123456789abcdef", "apiServerEndpoint": "10.0.0.1:6443"}}}}}))]
    fn an_edit_that_changes_nothing(#[case] edited: Value) {
        let current = config(spec("a\n"));
        let err = plan(&Settings::default(), &[&pool(json!({}))], &current, &edited).unwrap_err();
        assert_eq!(
            err,
            PlanError::NothingToRotate {
                config: key_of(&current)
            }
        );
        assert!(err.to_string().starts_with("nothing to rotate: "));
    }

    #[rstest]
    #[case::being_deleted(json!({"deletionTimestamp": "2026-12-02T00:00:00Z", "finalizers": ["x"]}), "edited",
        "MachinePool fleet/pool-1 is being deleted (it has a deletionTimestamp)")]
    #[case::topology(json!({"labels": {"topology.cluster.x-k8s.io/owned": "", "cluster.x-k8s.io/cluster-name": "c1"}}), "edited",
        "MachinePool fleet/pool-1 is managed by Cluster c1's topology (label topology.cluster.x-k8s.io/owned): change the ClusterClass's bootstrap template instead")]
    #[case::not_current(json!({}), "pool-1-b",
        "MachinePool fleet/pool-1 uses KubeadmConfig pool-1-a, not KubeadmConfig pool-1-b: edit the config it uses now (kubectl get kubeadmconfig.bootstrap.cluster.x-k8s.io pool-1-a -n fleet -o yaml)")]
    fn refused_plans(#[case] metadata: Value, #[case] name: &str, #[case] message: &str) {
        let current = config(spec("a\n"));
        let name = if name == "edited" { "pool-1-a" } else { name };
        let err = plan(
            &Settings::default(),
            &[&pool(metadata)],
            &current,
            &edited(name, "b\n"),
        )
        .unwrap_err();
        assert!(err.to_string().starts_with(message), "{err}");
    }

    #[test]
    fn a_pool_without_a_config_ref() {
        let mut pool = pool(json!({}));
        pool["spec"]["template"]["spec"]["bootstrap"] = json!({"dataSecretName": "handmade"});
        let err = plan(
            &Settings::default(),
            &[&pool],
            &config(spec("a\n")),
            &edited("pool-1-a", "b\n"),
        )
        .unwrap_err();
        assert_eq!(
            err,
            PlanError::NoConfigRef {
                consumer: key_of(&pool)
            }
        );
    }

    #[test]
    fn a_template_and_its_machine_deployment() {
        let template = json!({"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfigTemplate",
            "metadata": {"name": "md-0-a", "namespace": "fleet"},
            "spec": {"template": {"spec": {"files": [{"path": "/x", "content": "a"}]}}}});
        let md = json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
            "metadata": {"name": "md-0", "namespace": "fleet"},
            "spec": {"clusterName": "c1", "template": {"spec": {"clusterName": "c1", "bootstrap": {"configRef":
                {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfigTemplate", "name": "md-0-a"}}}}}});
        let mut edited = template.clone();
        edited["spec"]["template"]["spec"]["files"][0]["content"] = json!("b");
        let settings = Settings::default();
        let plan = plan(&settings, &[&md], &template, &edited).unwrap();
        assert!(plan.new.name.starts_with("md-0-a-"), "{}", plan.new.name);
        assert_eq!(
            plan.changed,
            vec!["spec.template.spec.files[0].content (changed)".to_string()]
        );
        assert!(
            plan.refusal.contains(&format!("{:?}", plan.new.name)),
            "{}",
            plan.refusal
        );
        assert!(rejections(&settings, &[&md], &template, &plan).is_empty());
    }

    #[rstest]
    #[case::v1beta2(json!({"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": "a"}), Some(("bootstrap.cluster.x-k8s.io", "KubeadmConfig", "a")))]
    #[case::v1beta1(json!({"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta1", "kind": "KubeadmConfig", "name": "a"}), Some(("bootstrap.cluster.x-k8s.io", "KubeadmConfig", "a")))]
    #[case::no_name(json!({"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig"}), None)]
    #[case::no_group(json!({"kind": "KubeadmConfig", "name": "a"}), None)]
    fn config_refs(#[case] r: Value, #[case] expected: Option<(&str, &str, &str)>) {
        let consumer = json!({"spec": {"template": {"spec": {"bootstrap": {"configRef": r}}}}});
        let expected = expected.map(|(g, k, n)| ConfigRef {
            group: g.into(),
            kind: k.into(),
            name: n.into(),
        });
        assert_eq!(ConfigRef::of(&consumer), expected);
    }
}
