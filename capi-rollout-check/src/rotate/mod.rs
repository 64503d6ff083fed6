//! `capi-rollout-check rotate`: the rotation the policy asks for, done for the person.
//!
//! Against a cluster (kubectl's kubeconfig, context and namespace): given the MachinePool (or
//! MachineDeployment, MachineSet) and the edited config (or template) manifest, or `--edit`,
//! it creates the new config under the name the policy's refusal suggests, repoints the
//! configRef, and waits until CAPI has taken the new config up. `--reissue` rotates a
//! MachinePool's config (or a MachineDeployment's or MachineSet's template) to a fresh name
//! with the same spec (reissue.rs). For GitOps (`--manifests`):
//! it writes the new config's file and the repointed pool's, for a pull request.
//!
//! Every check that can refuse runs before the first write, so a refused rotation changes
//! nothing; every write goes through the API server, where the policy judges it.

// The errors name the objects (several keys each); they end a one-shot command, where their
// size costs nothing.
#![allow(clippy::result_large_err)]

pub mod gitops;
mod owned;
pub mod plan;
mod reissue;
mod wait;

use std::fmt;
use std::io::Write;
use std::time::Duration;

use capi_bootstrap_rollout_policy::capi::field_rules::FieldRules;
use capi_bootstrap_rollout_policy::capi::kinds::group_of_api_version;
use capi_bootstrap_rollout_policy::diff::changed_fields_at;
use capi_bootstrap_rollout_policy::settings::Settings;
use capi_rollout_check::drift::analysis::WorkerKind;
use serde_json::Value;

use crate::cluster::{repoint_patch, resource_of, Cluster, ClusterError, DryRun};
use crate::manifests::{Key, ManifestSet};
use plan::{key_of, person_owned, plan, rejections, ConfigRef, Plan, PlanError};

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
    /// `--replace-instances`: the rotation is done, replacing the instances stopped.
    Roll(crate::roll::RollError),
}

impl RotateError {
    pub fn exit_code(&self) -> u8 {
        match self {
            RotateError::Plan(PlanError::NothingToRotate { .. }) => EXIT_NOTHING_TO_ROTATE,
            RotateError::Roll(e) => e.exit_code(),
            _ => EXIT_ERROR,
        }
    }
}

impl fmt::Display for RotateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RotateError::Plan(e) => e.fmt(f),
            RotateError::Cluster(e) => e.fmt(f),
            RotateError::Roll(e) => write!(
                f,
                "the rotation is in place; replacing the instances stopped: {e}"
            ),
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

/// `machinepool/pool-1` (or `machinepools.cluster.x-k8s.io/pool-1`, `mp/pool-1`).
fn consumer_kind(arg: &str) -> Result<(WorkerKind, &str), RotateError> {
    WorkerKind::of_arg(arg).ok_or_else(|| {
        RotateError::Input(format!(
            "{arg:?}: name the MachinePool as machinepool/NAME (or machinedeployment/NAME, machineset/NAME)"
        ))
    })
}

/// Runs an editor on a text: the text saved, or why not.
pub type EditorFn = dyn Fn(&str) -> Result<String, String>;

/// Where the edited config comes from.
pub enum Edited {
    /// A manifest's text, and where it came from (for messages).
    Manifest { text: String, source: String },
    /// `--edit`: the editor, given the current config as YAML, returns the edited text.
    Editor(Box<EditorFn>),
    /// `--reissue`: the current config's spec unchanged, under a fresh name made at `now`
    /// (seconds since the epoch).
    Reissue { now: i64 },
}

pub struct Request<'a> {
    pub consumer: &'a str,
    pub namespace: Option<&'a str>,
    pub edited: Edited,
    pub dry_run: DryRun,
    /// How long to wait for CAPI to take the new config up (and then for each step of what
    /// follows: CAPA's instance refresh, `roll`'s steps); zero does not wait.
    pub timeout: Duration,
    /// A MachinePool whose provider replaces no instance: run `roll` once CAPI has taken the
    /// new config up.
    pub replace_instances: bool,
    /// A MachineDeployment: follow its roll-out to the end (every Machine on the new
    /// template, Ready), within `timeout`.
    pub wait: bool,
    /// Whether the person asked to stop (Ctrl-C), for `roll`'s steps.
    pub interrupted: &'a dyn Fn() -> bool,
}

/// How a rotation ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Done {
    /// Rotated, and CAPI took the new config up (or there was nothing to wait for).
    Rotated,
    /// Rotated, and CAPI had not taken it up within the timeout (or CAPA's instance refresh
    /// had not ended).
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

/// The consumer the request names, read, and the config it uses.
fn read_consumer(
    cluster: &dyn Cluster,
    request: &Request,
) -> Result<(WorkerKind, Value, ConfigRef), RotateError> {
    let (consumer_kind, consumer_name) = consumer_kind(request.consumer)?;
    let where_ = request
        .namespace
        .map_or("the context's namespace".to_string(), |n| {
            format!("namespace {n}")
        });
    let consumer = cluster
        .get(consumer_kind.resource(), request.namespace, consumer_name)?
        .ok_or_else(|| {
            RotateError::Object(format!(
                "{} {consumer_name} not found in {where_}",
                consumer_kind.name()
            ))
        })?;
    let uses = plan::check_consumer(&consumer)?;
    Ok((consumer_kind, consumer, uses))
}

/// The current config (read in the edited manifest's version) and the edited one (the
/// manifest, or what the editor saved).
fn read_configs(
    cluster: &dyn Cluster,
    settings: &Settings,
    request: &Request,
    consumer: &Value,
    uses: &ConfigRef,
) -> Result<(Value, Value), RotateError> {
    let namespace = key_of(consumer).namespace;
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
        Edited::Editor(_) | Edited::Reissue { .. } => {
            let resource = resource_of(&uses.kind, &uses.group, None);
            (cluster.get(&resource, Some(&namespace), &uses.name)?, None)
        }
    };
    let current = current.ok_or_else(|| {
        RotateError::Object(format!(
            "{} uses {} {}, which does not exist in namespace {namespace}",
            key_of(consumer),
            uses.kind,
            uses.name
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
        (None, Edited::Reissue { .. }) => current.clone(),
        (None, Edited::Manifest { .. }) => unreachable!("a manifest is read above"),
    };
    Ok((current, edited))
}

/// The checks before any write: the name the policy suggests is free or already holds this
/// very spec (a re-run: `true`), and RBAC allows the writes.
fn check_writes(
    cluster: &dyn Cluster,
    settings: &Settings,
    consumer_kind: WorkerKind,
    plan: &Plan,
    resources: (&str, &str),
    reissue: bool,
) -> Result<bool, RotateError> {
    let (config_resource, config_plural) = resources;
    let namespace = &plan.new.namespace;
    let existing = cluster.get(config_resource, Some(namespace), &plan.new.name)?;
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
                "{} {namespace}/{} already exists with another spec: nothing was changed; {}",
                plan.new.kind,
                plan.new.name,
                if reissue {
                    "a reissue a second later picks another name"
                } else {
                    "the name is the policy's suggestion for this spec, so look at who created it"
                }
            )))
        }
    };
    let mut needed = vec![("patch", consumer_kind.resource())];
    if !reuse {
        needed.insert(0, ("create", config_plural));
    }
    for (verb, resource) in needed {
        if !cluster.can_i(verb, resource, namespace)? {
            return Err(ClusterError::Forbidden {
                verb: verb.into(),
                resource: resource.into(),
                namespace: namespace.clone(),
                message: format!("kubectl auth can-i {verb} {resource} -n {namespace}: no"),
            }
            .into());
        }
    }
    Ok(reuse)
}

/// What the rotation changes: the edit's paths, or that a reissue changes none.
fn print_what_changes(
    out: &mut dyn Write,
    consumer_key: &Key,
    uses: &ConfigRef,
    plan: &Plan,
    edited: &Edited,
) {
    if let Edited::Reissue { .. } = edited {
        let _ = writeln!(
            out,
            "{consumer_key} uses {} {}; the reissue copies its spec, unchanged, to a fresh name \
             (the policy's \"same content\" warning is expected)",
            uses.kind, uses.name
        );
        return;
    }
    let _ = writeln!(
        out,
        "{consumer_key} uses {} {}; the edit changes:",
        uses.kind, uses.name
    );
    for path in &plan.changed {
        let _ = writeln!(out, "  {path}");
    }
}

/// `--dry-run=client`: what would be created and set.
fn print_client_dry_run(out: &mut dyn Write, consumer_key: &Key, uses: &ConfigRef, plan: &Plan) {
    let namespace = &plan.new.namespace;
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
}

/// Creates the new config (unless reused) and repoints the consumer; a refused repoint
/// deletes the config just created.
fn write_rotation(
    cluster: &dyn Cluster,
    request: &Request,
    consumer: &Value,
    consumer_kind: WorkerKind,
    (plan, uses, reuse): (&Plan, &ConfigRef, bool),
    config_plural: &str,
    (out, err): (&mut dyn Write, &mut dyn Write),
) -> Result<(), RotateError> {
    let consumer_key = key_of(consumer);
    let namespace = &consumer_key.namespace;
    let dry = request.dry_run != DryRun::None;
    let (tag, would) = if dry {
        ("(server dry run) ", "would ")
    } else {
        ("", "")
    };
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
        consumer_kind.resource(),
        namespace,
        &consumer_key.name,
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
                match cluster.delete(config_plural, namespace, &plan.new.name) {
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
    Ok(())
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
    let (consumer_kind, consumer, uses) = read_consumer(cluster, request)?;
    let consumer_key = key_of(&consumer);
    let namespace = consumer_key.namespace.clone();
    let (current, edited) = read_configs(cluster, settings, request, &consumer, &uses)?;

    let plan = match request.edited {
        Edited::Reissue { now } => reissue::plan(settings, &[&consumer], &current, now),
        _ => plan(settings, &[&consumer], &current, &edited)?,
    };
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
    let reuse = check_writes(
        cluster,
        settings,
        consumer_kind,
        &plan,
        (&config_resource, &config_plural),
        matches!(request.edited, Edited::Reissue { .. }),
    )?;
    if request.replace_instances && consumer_kind == WorkerKind::MachinePool {
        // What roll will need, before the rotation writes anything.
        crate::roll::check_rbac(cluster, &namespace).map_err(|e| match e {
            crate::roll::RollError::Cluster(c) => RotateError::Cluster(c),
            other => RotateError::Roll(other),
        })?;
    }

    print_what_changes(out, &consumer_key, &uses, &plan, &request.edited);
    if request.dry_run == DryRun::Client {
        print_client_dry_run(out, &consumer_key, &uses, &plan);
        return Ok(Done::DryRun);
    }
    write_rotation(
        cluster,
        request,
        &consumer,
        consumer_kind,
        (&plan, &uses, reuse),
        &config_plural,
        (out, err),
    )?;
    if request.dry_run != DryRun::None {
        return Ok(Done::DryRun);
    }

    let done = wait::taken_up(
        cluster,
        request,
        &consumer,
        consumer_kind,
        (&plan.new, &config_resource),
        out,
    )?;
    let _ = writeln!(
        out,
        "left: {} {namespace}/{}, rotated out; delete it once the roll-out is done:\n  kubectl delete {config_plural} {} -n {namespace}",
        uses.kind, uses.name, uses.name
    );
    Ok(done)
}

#[cfg(test)]
mod tests;
