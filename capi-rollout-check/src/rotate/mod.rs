//! `capi-rollout-check rotate`: the rotation the policy asks for, done for the person.
//!
//! Against a cluster (kubectl's kubeconfig, context and namespace): given the MachinePool (or
//! MachineDeployment, MachineSet) and the edited config (or template) manifest, or `--edit`,
//! it creates the new config under the name the policy's refusal suggests, repoints the
//! configRef, and waits until CAPI has taken the new config up. For GitOps (`--manifests`):
//! it writes the new config's file and the repointed pool's, for a pull request.
//!
//! Every check that can refuse runs before the first write, so a refused rotation changes
//! nothing; every write goes through the API server, where the policy judges it.

// The errors name the objects (several keys each); they end a one-shot command, where their
// size costs nothing.
#![allow(clippy::result_large_err)]

pub mod cluster;
pub mod gitops;
pub mod plan;

use std::fmt;
use std::io::Write;
use std::time::Duration;

use capi_bootstrap_rollout_policy::capi::field_rules::FieldRules;
use capi_bootstrap_rollout_policy::capi::kinds::{group_of_api_version, is_machine_pool};
use capi_bootstrap_rollout_policy::diff::changed_fields_at;
use capi_bootstrap_rollout_policy::settings::Settings;
use serde_json::Value;

use crate::manifests::ManifestSet;
use cluster::{poll, repoint_patch, Cluster, ClusterError, DryRun};
use plan::{key_of, person_owned, plan, rejections, ConfigRef, PlanError};

/// Exit codes of `rotate`.
pub const EXIT_NOTHING_TO_ROTATE: u8 = 1;
pub const EXIT_ERROR: u8 = 2;
pub const EXIT_NOT_YET_ROLLED: u8 = 3;

/// Why a rotation was not done.
#[derive(Debug)]
pub enum RotateError {
    Plan(PlanError),
    Cluster(ClusterError),
    /// Unusable input: the message says what and where.
    Input(String),
    /// Something the rotation needs does not exist or is taken.
    Object(String),
    /// A write was refused after the checks (by the API server or the policy): what was undone.
    Refused(String),
}

impl RotateError {
    pub fn exit_code(&self) -> u8 {
        match self {
            RotateError::Plan(PlanError::NothingToRotate { .. }) => EXIT_NOTHING_TO_ROTATE,
            _ => EXIT_ERROR,
        }
    }
}

impl fmt::Display for RotateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RotateError::Plan(e) => e.fmt(f),
            RotateError::Cluster(e) => e.fmt(f),
            RotateError::Input(m) | RotateError::Object(m) | RotateError::Refused(m) => {
                f.write_str(m)
            }
        }
    }
}

impl std::error::Error for RotateError {}

impl From<PlanError> for RotateError {
    fn from(e: PlanError) -> Self {
        RotateError::Plan(e)
    }
}

impl From<ClusterError> for RotateError {
    fn from(e: ClusterError) -> Self {
        RotateError::Cluster(e)
    }
}

/// The consumer kinds, as kubectl names them.
struct ConsumerKind {
    kind: &'static str,
    resource: &'static str,
}

const CONSUMERS: [(&[&str], ConsumerKind); 3] = [
    (
        &["machinepool", "machinepools", "mp"],
        ConsumerKind {
            kind: "MachinePool",
            resource: "machinepools.cluster.x-k8s.io",
        },
    ),
    (
        &["machinedeployment", "machinedeployments", "md"],
        ConsumerKind {
            kind: "MachineDeployment",
            resource: "machinedeployments.cluster.x-k8s.io",
        },
    ),
    (
        &["machineset", "machinesets", "ms"],
        ConsumerKind {
            kind: "MachineSet",
            resource: "machinesets.cluster.x-k8s.io",
        },
    ),
];

/// `machinepool/pool-1` (or `machinepools.cluster.x-k8s.io/pool-1`, `mp/pool-1`).
fn consumer_kind(arg: &str) -> Result<(&'static ConsumerKind, &str), RotateError> {
    let usage = || {
        RotateError::Input(format!(
            "{arg:?}: name the MachinePool as machinepool/NAME (or machinedeployment/NAME, machineset/NAME)"
        ))
    };
    let (kind, name) = arg.split_once('/').ok_or_else(usage)?;
    let kind = kind
        .strip_suffix(".cluster.x-k8s.io")
        .unwrap_or(kind)
        .to_lowercase();
    let found = CONSUMERS
        .iter()
        .find(|(names, _)| names.contains(&kind.as_str()))
        .ok_or_else(usage)?;
    if name.is_empty() {
        return Err(usage());
    }
    Ok((&found.1, name))
}

/// kubectl's resource name of a config kind: `kubeadmconfigs.bootstrap.cluster.x-k8s.io`, with
/// the version when given (`kubeadmconfigs.v1beta1.bootstrap.cluster.x-k8s.io`).
pub fn resource_of(kind: &str, group: &str, version: Option<&str>) -> String {
    let plural = format!("{}s", kind.to_lowercase());
    match version {
        Some(v) => format!("{plural}.{v}.{group}"),
        None => format!("{plural}.{group}"),
    }
}

/// Runs an editor on a text: the text saved, or why not.
pub type EditorFn = dyn Fn(&str) -> Result<String, String>;

/// Where the edited config comes from.
pub enum Edited {
    /// A manifest's text, and where it came from (for messages).
    Manifest { text: String, source: String },
    /// `--edit`: the editor, given the current config as YAML, returns the edited text.
    Editor(Box<EditorFn>),
}

pub struct Request<'a> {
    pub consumer: &'a str,
    pub namespace: Option<&'a str>,
    pub edited: Edited,
    pub dry_run: DryRun,
    /// How long to wait for CAPI to take the new config up; zero does not wait.
    pub timeout: Duration,
}

/// How a rotation ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Done {
    /// Rotated, and CAPI took the new config up (or there was nothing to wait for).
    Rotated,
    /// Rotated, and CAPI had not taken it up within the timeout.
    NotYetRolled,
    /// A dry run.
    DryRun,
}

/// Parses one object from a manifest's text.
pub fn one_object(text: &str, source: &str) -> Result<Value, RotateError> {
    let mut set = ManifestSet::default();
    set.add_text(source, text, None)
        .map_err(|e| RotateError::Input(e.to_string()))?;
    let mut objects = set.objects.into_values();
    match (objects.next(), objects.next()) {
        (Some(one), None) => Ok(one.object),
        (None, _) => Err(RotateError::Input(format!(
            "{source}: no object in it; give the edited config's manifest"
        ))),
        (Some(_), Some(_)) => Err(RotateError::Input(format!(
            "{source}: more than one object; give the edited config's manifest alone"
        ))),
    }
}

/// The text `--edit` opens: the config as a person owns it.
pub fn edit_text(settings: &Settings, config: &Value) -> String {
    let object = person_owned(settings, config);
    let yaml = yaml_serde::to_string(&object).unwrap_or_default();
    format!(
        "# Edit the spec of {} and save: the rotation creates a new config under the name the\n\
         # policy derives from it and repoints the pool. Fields CAPI's controllers write are left\n\
         # out. An unchanged file rotates nothing.\n{yaml}",
        key_of(config)
    )
}

fn same_spec(settings: &Settings, a: &Value, b: &Value) -> bool {
    let key = key_of(a);
    let rules = if settings.is_bootstrap_config(&key.group, &key.kind) {
        settings.field_rules(&key.kind)
    } else {
        FieldRules::default()
    };
    changed_fields_at(&["spec"], a.get("spec"), b.get("spec"), &rules).is_empty()
}

/// The rotation against a cluster. Writes what it does to `out`; the policy's warnings on the
/// writes to `err`.
pub fn rotate(
    cluster: &dyn Cluster,
    settings: &Settings,
    request: &Request,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<Done, RotateError> {
    let (consumer_kind, consumer_name) = consumer_kind(request.consumer)?;
    let where_ = request
        .namespace
        .map_or("the context's namespace".to_string(), |n| {
            format!("namespace {n}")
        });
    let consumer = cluster
        .get(consumer_kind.resource, request.namespace, consumer_name)?
        .ok_or_else(|| {
            RotateError::Object(format!(
                "{} {consumer_name} not found in {where_}",
                consumer_kind.kind
            ))
        })?;
    let consumer_key = key_of(&consumer);
    let namespace = consumer_key.namespace.clone();
    let uses = plan::check_consumer(&consumer)?;

    // The edited manifest, and the current config read in the manifest's version.
    let (current, edited) = match &request.edited {
        Edited::Manifest { text, source } => {
            let edited = one_object(text, source)?;
            let api_version = edited
                .get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or("");
            let same_kind = group_of_api_version(api_version) == uses.group
                && edited.get("kind").and_then(Value::as_str) == Some(uses.kind.as_str());
            let version = api_version
                .split_once('/')
                .map(|(_, v)| v)
                .filter(|_| same_kind);
            let resource = resource_of(&uses.kind, &uses.group, version);
            let current = cluster.get(&resource, Some(&namespace), &uses.name)?;
            (current, Some(edited))
        }
        Edited::Editor(_) => {
            let resource = resource_of(&uses.kind, &uses.group, None);
            (cluster.get(&resource, Some(&namespace), &uses.name)?, None)
        }
    };
    let current = current.ok_or_else(|| {
        RotateError::Object(format!(
            "{consumer_key} uses {} {}, which does not exist in namespace {namespace}",
            uses.kind, uses.name
        ))
    })?;
    let edited = match (edited, &request.edited) {
        (Some(edited), _) => edited,
        (None, Edited::Editor(editor)) => {
            let text = edit_text(settings, &current);
            let changed = editor(&text).map_err(RotateError::Input)?;
            if changed == text {
                return Err(PlanError::NothingToRotate {
                    config: key_of(&current),
                }
                .into());
            }
            one_object(&changed, "the edited file")?
        }
        (None, Edited::Manifest { .. }) => unreachable!("a manifest is read above"),
    };

    let plan = plan(settings, &[&consumer], &current, &edited)?;
    let rejected = rejections(settings, &[&consumer], &current, &plan);
    if !rejected.is_empty() {
        return Err(RotateError::Refused(format!(
            "the policy would refuse this rotation, so nothing was changed: {}",
            rejected.join("; ")
        )));
    }
    let version = plan.new_object["apiVersion"]
        .as_str()
        .and_then(|v| v.split_once('/'))
        .map(|(_, v)| v.to_string());
    let config_resource = resource_of(&plan.new.kind, &plan.new.group, version.as_deref());
    let config_plural = resource_of(&plan.new.kind, &plan.new.group, None);

    // The name the policy suggests: free, or already holding this very spec (a re-run).
    let existing = cluster.get(&config_resource, Some(&namespace), &plan.new.name)?;
    let reuse = match &existing {
        None => false,
        Some(e)
            if e.pointer("/metadata/deletionTimestamp").is_none()
                && same_spec(settings, e, &plan.new_object) =>
        {
            true
        }
        Some(_) => {
            return Err(RotateError::Object(format!(
            "{} {namespace}/{} already exists with another spec: nothing was changed; the name is \
                 the policy's suggestion for this spec, so look at who created it",
            plan.new.kind, plan.new.name
        )))
        }
    };

    // RBAC, before any write.
    let mut needed = vec![("patch", consumer_kind.resource)];
    if !reuse {
        needed.insert(0, ("create", config_plural.as_str()));
    }
    for (verb, resource) in needed {
        if !cluster.can_i(verb, resource, &namespace)? {
            return Err(ClusterError::Forbidden {
                verb: verb.into(),
                resource: resource.into(),
                namespace: namespace.clone(),
                message: format!("kubectl auth can-i {verb} {resource} -n {namespace}: no"),
            }
            .into());
        }
    }

    let dry = request.dry_run != DryRun::None;
    let would = if dry { "would " } else { "" };
    let _ = writeln!(
        out,
        "{consumer_key} uses {} {}; the edit changes:",
        uses.kind, uses.name
    );
    for path in &plan.changed {
        let _ = writeln!(out, "  {path}");
    }
    if request.dry_run == DryRun::Client {
        let _ = writeln!(
            out,
            "(dry run) would create {} {namespace}/{}:",
            plan.new.kind, plan.new.name
        );
        let _ = write!(
            out,
            "{}",
            yaml_serde::to_string(&plan.new_object).unwrap_or_default()
        );
        let _ = writeln!(
            out,
            "(dry run) would set {consumer_key} configRef.name: {} -> {}",
            uses.name, plan.new.name
        );
        return Ok(Done::DryRun);
    }

    let tag = if dry { "(server dry run) " } else { "" };
    if reuse {
        let _ = writeln!(
            out,
            "{tag}{} {namespace}/{} exists with this spec already: used as it is",
            plan.new.kind, plan.new.name
        );
    } else {
        let written = cluster.create(&plan.new_object, request.dry_run)?;
        for w in written.warnings {
            let _ = writeln!(err, "Warning: {w}");
        }
        let _ = writeln!(
            out,
            "{tag}{would}created {} {namespace}/{}",
            plan.new.kind, plan.new.name
        );
    }
    let patch = repoint_patch(&uses.name, &plan.new.name);
    match cluster.patch(
        consumer_kind.resource,
        &namespace,
        consumer_name,
        &patch,
        request.dry_run,
    ) {
        Ok(written) => {
            for w in written.warnings {
                let _ = writeln!(err, "Warning: {w}");
            }
        }
        Err(e) => {
            let undone = if reuse || dry {
                String::new()
            } else {
                match cluster.delete(&config_plural, &namespace, &plan.new.name) {
                    Ok(_) => format!(
                        "; the new {} {} was deleted again",
                        plan.new.kind, plan.new.name
                    ),
                    Err(d) => format!(
                        "; the new {} {} is left: delete it ({d})",
                        plan.new.kind, plan.new.name
                    ),
                }
            };
            return Err(RotateError::Refused(format!(
                "{consumer_key} was not repointed: {e}{undone}"
            )));
        }
    }
    let _ = writeln!(
        out,
        "{tag}{consumer_key}: configRef.name {} -> {}",
        uses.name, plan.new.name
    );
    if dry {
        return Ok(Done::DryRun);
    }

    let done = wait_taken_up(
        cluster,
        &consumer,
        consumer_kind,
        &plan.new,
        &config_resource,
        request.timeout,
        out,
    )?;
    let _ = writeln!(
        out,
        "left: {} {namespace}/{}, rotated out; delete it once the roll-out is done:\n  kubectl delete {config_plural} {} -n {namespace}",
        uses.kind, uses.name, uses.name
    );
    Ok(done)
}

/// Waits until CAPI has taken the new config up: a MachinePool's dataSecretName is the new
/// config's; a MachineDeployment has a MachineSet on the new template. A MachineSet does not
/// replace its Machines on a template change: nothing to wait for.
fn wait_taken_up(
    cluster: &dyn Cluster,
    consumer: &Value,
    kind: &ConsumerKind,
    new: &crate::manifests::Key,
    config_resource: &str,
    timeout: Duration,
    out: &mut dyn Write,
) -> Result<Done, RotateError> {
    let key = key_of(consumer);
    if timeout.is_zero() {
        return Ok(Done::Rotated);
    }
    let interval = Duration::from_secs(1);
    if is_machine_pool(&key.group, &key.kind) {
        let old_secret = consumer
            .pointer("/spec/template/spec/bootstrap/dataSecretName")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let found = poll(cluster, timeout, interval, || {
            let Some(config) = cluster.get(config_resource, Some(&key.namespace), &new.name)?
            else {
                return Ok(None);
            };
            let Some(secret) = config
                .pointer("/status/dataSecretName")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
            else {
                return Ok(None);
            };
            let pool = cluster.get(kind.resource, Some(&key.namespace), &key.name)?;
            let copied = pool
                .as_ref()
                .and_then(|p| p.pointer("/spec/template/spec/bootstrap/dataSecretName"))
                .and_then(Value::as_str);
            Ok((copied == Some(secret) && secret != old_secret).then(|| secret.to_string()))
        })?;
        return Ok(match found {
            Some(secret) => {
                let _ = writeln!(out, "{key}: CAPI copied dataSecretName {secret} into the pool: the infrastructure provider replaces the instances");
                Done::Rotated
            }
            None => {
                let _ = writeln!(out, "{key}: CAPI has not copied {}'s dataSecretName into the pool within {}s; the rotation is in place (kubectl describe {} {} -n {})",
                    new.name, timeout.as_secs(), kind.resource, key.name, key.namespace);
                Done::NotYetRolled
            }
        });
    }
    if kind.kind == "MachineDeployment" {
        let selector = format!("cluster.x-k8s.io/deployment-name={}", key.name);
        let found = poll(cluster, timeout, interval, || {
            let sets = cluster.list("machinesets.cluster.x-k8s.io", &key.namespace, &selector)?;
            Ok(sets
                .into_iter()
                .find(|s| ConfigRef::of(s).is_some_and(|r| r.name == new.name))
                .map(|s| key_of(&s).name))
        })?;
        return Ok(match found {
            Some(set) => {
                let _ = writeln!(
                    out,
                    "{key}: CAPI made MachineSet {set} on {}: it replaces the Machines",
                    new.name
                );
                Done::Rotated
            }
            None => {
                let _ = writeln!(
                    out,
                    "{key}: no MachineSet on {} within {}s; the rotation is in place",
                    new.name,
                    timeout.as_secs()
                );
                Done::NotYetRolled
            }
        });
    }
    let _ = writeln!(out, "{key}: a MachineSet does not replace its Machines on a template change; new Machines use {}", new.name);
    Ok(Done::Rotated)
}

#[cfg(test)]
mod tests;
