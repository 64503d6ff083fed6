//! MachineDeployments and MachineSets. CAPI's MachineDeployment controller takes a Machine as
//! up to date when its MachineSet's bootstrap `configRef` names the template the
//! MachineDeployment names (kind and name), never by the template's content; so an in-place
//! edit of the template reaches only the Machines made after it. Unlike a MachinePool's
//! instances, each Machine has a config of its own, made from the template when the Machine
//! was: its spec is compared with the template's as the policy compares them (the fields the
//! bootstrap controller writes and fills once set aside), which makes the verdict per Machine
//! exact.

use std::collections::BTreeSet;

use capi_bootstrap_rollout_policy::capi::kinds::TEMPLATE_SUFFIX;
use capi_bootstrap_rollout_policy::diff::changed_fields_at;
use capi_bootstrap_rollout_policy::settings::Settings;
use serde_json::Value;

use super::fix::deployment_fix;
use super::managed_fields::{entries, Entry};
use super::objects::{created, key, label, meta, owner, reference, Index};
use super::{
    mark_unknown, plural, Cause, CauseKind, Confidence, ConfigInfo, Inputs, Instances, Level,
    PathsAre, PoolReport, StaleBecause, StaleInstance, Topology, Verdict, WorkerKind,
    ANCIENT_CHANGES, CLUSTERCTL, CLUSTER_NAME_LABEL, CONTROLLER_MANAGERS, TOPOLOGY_MANAGER,
    TOPOLOGY_OWNED_LABEL,
};
use crate::drift::records;
use crate::drift::time;

/// The label the topology controller puts on a MachineDeployment of a Cluster's topology.
pub const TOPOLOGY_DEPLOYMENT_LABEL: &str = "topology.cluster.x-k8s.io/deployment-name";

/// Every MachineDeployment, and every MachineSet no MachineDeployment owns.
pub(super) fn analyze(inputs: &Inputs, index: &Index, settings: &Settings) -> Vec<PoolReport> {
    let deployments = inputs.deployments.iter().filter_map(|md| {
        let ns = meta(md, "namespace").unwrap_or("");
        let sets = index
            .sets_of
            .get(&(ns.to_string(), meta(md, "name")?.to_string()))
            .cloned()
            .unwrap_or_default();
        one(
            inputs,
            index,
            settings,
            WorkerKind::MachineDeployment,
            md,
            &sets,
        )
    });
    let sets = inputs
        .machine_sets
        .iter()
        .filter(|ms| owner(ms, "MachineDeployment").is_none())
        .filter_map(|ms| one(inputs, index, settings, WorkerKind::MachineSet, ms, &[ms]));
    deployments.chain(sets).collect()
}

/// The template's paths as the policy's refusal names them, from a config's `spec...` path.
fn template_path(config_path: &str) -> String {
    format!("spec.template.{config_path}")
}

/// The last write of the template's spec by a person or the topology controller: who, how,
/// when and what it owns.
fn last_template_edit(template: &Value) -> Option<Entry> {
    entries(template)
        .into_iter()
        .filter(|e| {
            e.fields.pointer("/f:spec/f:template/f:spec").is_some()
                && !CONTROLLER_MANAGERS.contains(&e.manager.as_str())
                && e.manager != ANCIENT_CHANGES
                && e.manager != CLUSTERCTL
        })
        .max_by_key(|e| e.time)
}

/// `RollingUpdate (maxSurge 1, maxUnavailable 0)`: a MachineDeployment's strategy as v1beta2
/// (`spec.rollout.strategy`) or v1beta1 (`spec.strategy`) holds it, CAPI's defaults filled.
pub fn strategy(deployment: &Value) -> String {
    let s = deployment
        .pointer("/spec/rollout/strategy")
        .or_else(|| deployment.pointer("/spec/strategy"));
    let kind = s
        .and_then(|s| s.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("RollingUpdate");
    if kind != "RollingUpdate" {
        return kind.to_string();
    }
    let knob = |name: &str, default: &str| {
        s.and_then(|s| s.pointer(&format!("/rollingUpdate/{name}")))
            .map_or(default.to_string(), |v| {
                v.as_str().map_or_else(|| v.to_string(), str::to_string)
            })
    };
    format!(
        "RollingUpdate, maxSurge {}, maxUnavailable {}",
        knob("maxSurge", "1"),
        knob("maxUnavailable", "0")
    )
}

/// One MachineDeployment (its MachineSets `sets`) or MachineSet (`sets` is itself).
fn one(
    inputs: &Inputs,
    index: &Index,
    settings: &Settings,
    kind: WorkerKind,
    object: &Value,
    sets: &[&Value],
) -> Option<PoolReport> {
    let ns = meta(object, "namespace").unwrap_or("").to_string();
    let name = meta(object, "name")?.to_string();
    let (group, template_kind, template_name) =
        reference(object.pointer("/spec/template/spec/bootstrap/configRef")?)?;
    let topology = label(object, TOPOLOGY_OWNED_LABEL).map(|_| Topology {
        cluster: label(object, CLUSTER_NAME_LABEL).map(str::to_string),
        pool: label(object, TOPOLOGY_DEPLOYMENT_LABEL).map(str::to_string),
    });
    let config_kind = template_kind
        .strip_suffix(TEMPLATE_SUFFIX)
        .unwrap_or(&template_kind)
        .to_string();
    let mut report = PoolReport {
        kind,
        namespace: ns.clone(),
        name: name.clone(),
        api_version: object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        uid: meta(object, "uid").unwrap_or("").to_string(),
        config: ConfigInfo {
            group,
            kind: template_kind.clone(),
            name: template_name.clone(),
        },
        bootstrap: records::bootstrap(&config_kind),
        infra_kind: object
            .pointer("/spec/template/spec/infrastructureRef")
            .and_then(reference)
            .map(|(_, k, _)| k),
        infra: None,
        data_secret: None,
        verdict: Verdict::Current,
        confidence: Confidence {
            level: Level::Exact,
            reasons: Vec::new(),
        },
        instances: Instances {
            source: Some("Machine".into()),
            ..Instances::default()
        },
        causes: Vec::new(),
        topology,
        fix: Vec::new(),
    };
    if object.pointer("/metadata/deletionTimestamp").is_some() {
        mark_unknown(&mut report, format!("the {} is being deleted", kind.name()));
        return Some(report);
    }
    let Some(template) = index
        .templates
        .get(&key(&template_kind, &ns, &template_name))
        .copied()
    else {
        mark_unknown(
            &mut report,
            format!("{template_kind} {ns}/{template_name} (its configRef) was not found"),
        );
        return Some(report);
    };
    let template_spec = template.pointer("/spec/template/spec");
    let rules = settings.field_rules(&config_kind);

    // The Machines of the MachineSets on this template; those of older MachineSets are CAPI's
    // roll-out, which replaces them.
    let on_template = |set: &Value| {
        set.pointer("/spec/template/spec/bootstrap/configRef")
            .and_then(reference)
            .is_some_and(|(_, k, n)| k == template_kind && n == template_name)
    };
    let machines_of = |set: &Value| {
        let set_name = meta(set, "name").unwrap_or("").to_string();
        index
            .set_machines
            .get(&(ns.clone(), set_name))
            .cloned()
            .unwrap_or_default()
    };
    let mut machines: Vec<&Value> = sets
        .iter()
        .filter(|s| on_template(s))
        .flat_map(|s| machines_of(s))
        .collect();
    let older: usize = sets
        .iter()
        .filter(|s| !on_template(s))
        .map(|s| machines_of(s).len())
        .sum();
    machines.sort_by_key(|m| (created(m), meta(m, "name")));
    report.instances.total = Some(machines.len() as u64);

    let mut unknowns = Vec::new();
    for m in &machines {
        let machine = meta(m, "name").unwrap_or("");
        let Some((_, kind, config_name)) =
            m.pointer("/spec/bootstrap/configRef").and_then(reference)
        else {
            unknowns.push(format!(
                "Machine {machine} names no bootstrap config: what it booted from cannot be compared"
            ));
            continue;
        };
        let Some(config) = index.configs.get(&key(&kind, &ns, &config_name)) else {
            unknowns.push(format!(
                "Machine {machine}'s {kind} {config_name} was not found (deleted or garbage-collected): what it booted from cannot be compared"
            ));
            continue;
        };
        let changes = changed_fields_at(&["spec"], template_spec, config.get("spec"), &rules);
        if !changes.is_empty() {
            report.instances.stale.push(StaleInstance {
                name: machine.to_string(),
                launched: created(m).unwrap_or_default(),
                because: StaleBecause::ConfigDiffers,
                certain: true,
                paths: changes
                    .iter()
                    .map(|c| template_path(&c.path.to_string()))
                    .collect(),
            });
        }
    }

    let compared = machines.len() - unknowns.len();
    let stale = report.instances.stale.len();
    let mut reasons = Vec::new();
    if older > 0 {
        reasons.push(format!(
            "{} of older MachineSets not compared: CAPI's roll-out replaces them",
            plural(older, "Machine", "Machines")
        ));
    }
    let level = match (unknowns.is_empty(), stale) {
        (true, _) => Level::Exact,
        (false, 0) => Level::Unknown,
        (false, _) => Level::Bounded,
    };
    if unknowns.is_empty() {
        reasons.insert(
            0,
            if machines.is_empty() {
                format!("no Machine made from {template_kind} {template_name}")
            } else {
                format!(
                    "each Machine's {config_kind} compared with {template_kind} {template_name}'s spec ({} compared)",
                    plural(compared, "Machine", "Machines")
                )
            },
        );
    } else {
        reasons.splice(0..0, unknowns);
    }
    report.verdict = match (stale, level) {
        (s, _) if s > 0 => Verdict::Stale,
        (_, Level::Unknown) => Verdict::Unknown,
        _ => Verdict::Current,
    };
    report.confidence = Confidence { level, reasons };
    if stale > 0 {
        report.causes.push(edit_cause(
            template,
            &template_kind,
            &template_name,
            &report,
        ));
        report.fix = deployment_fix(inputs, &report, object);
    }
    Some(report)
}

/// The template's edit behind the stale Machines, from its managedFields: the last write of
/// its spec by someone other than a controller after the oldest stale Machine was made.
fn edit_cause(template: &Value, kind: &str, name: &str, report: &PoolReport) -> Cause {
    let stale = &report.instances.stale;
    let oldest = stale.iter().map(|s| s.launched).min().unwrap_or_default();
    let paths: Vec<String> = stale
        .iter()
        .flat_map(|s| s.paths.iter().cloned())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let made_before = format!(
        "{} made before it keep{} the config they were made with",
        plural(stale.len(), "Machine", "Machines"),
        if stale.len() == 1 { "s" } else { "" }
    );
    match last_template_edit(template).filter(|e| e.time.is_some_and(|t| t > oldest)) {
        Some(edit) => {
            let topology = edit.manager == TOPOLOGY_MANAGER;
            Cause {
                kind: if topology {
                    CauseKind::TopologyPatch
                } else {
                    CauseKind::InPlaceEdit
                },
                summary: format!(
                    "{} of {kind} {name} by {} ({}) at {}; {made_before}",
                    if topology {
                        "topology patch"
                    } else {
                        "in-place edit"
                    },
                    edit.manager,
                    edit.operation,
                    edit.time.map(time::format).unwrap_or_default(),
                ),
                manager: Some(edit.manager.clone()),
                operation: Some(edit.operation.clone()),
                time: edit.time,
                paths,
                paths_are: PathsAre::Different,
                in_data_secret: None,
                replaced_by_provider: false,
            }
        }
        None => Cause {
            kind: CauseKind::InPlaceEdit,
            summary: format!(
                "the configs of {} differ from {kind} {name}; no write of its spec after they were made is in its managedFields (an edit of the Machines' own configs, or history lost to a move)",
                plural(stale.len(), "Machine", "Machines")
            ),
            manager: None,
            operation: None,
            time: None,
            paths,
            paths_are: PathsAre::Different,
            in_data_secret: None,
            replaced_by_provider: false,
        },
    }
}
