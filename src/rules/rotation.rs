//! Rule 1, rotation: a MachinePool changes its bootstrap config by pointing
//! `spec.template.spec.bootstrap.configRef` at another object. That is allowed, to any
//! provider's kind, and checked: the new ref must be resolvable, in the pool's namespace.

use crate::capi::config_ref::{config_ref_in, RefIdentity, CONFIG_REF};
use crate::capi::kinds::{is_machine_pool, GroupKind};
use crate::diff::canonical_form;
use crate::lookups::{self, Lookups};
use crate::reader::json::Node;
use crate::reader::request::{Operation, Request};
use crate::rules::contract::{check_config_ref, check_config_status};
use crate::rules::ownership::machine_pool_controllers;
use crate::settings::{Action, Settings};
use crate::verdict::{Finding, Violation};

/// Rule 1 (and rule 5 for the ref) on a MachinePool CREATE or UPDATE; with lookups, the
/// rotation's target is checked too.
pub fn check(
    settings: &Settings,
    request: &Request,
    lookups: Option<&dyn Lookups>,
) -> Result<Vec<Finding>, String> {
    let new_ref = config_ref_in(request.object.and_then(|o| o.spec.as_ref()))?;
    let old_ref = match request.operation {
        Operation::Update => {
            config_ref_in(request.old_object.and_then(|o| o.spec.as_ref())).unwrap_or(None)
        }
        _ => None,
    };
    let Some(new_ref) = new_ref else {
        // No ref (any more): the pool uses a hand-set dataSecretName. Allowed.
        return Ok(Vec::new());
    };
    let new_id = RefIdentity::of(new_ref);
    if request.operation == Operation::Update
        && old_ref.map(RefIdentity::of).as_ref() == Some(&new_id)
    {
        // Unchanged (an apiVersion bump included): nothing this request decides.
        return Ok(Vec::new());
    }
    let mut findings = Vec::new();
    if !new_id.namespace.is_empty() && new_id.namespace != request.namespace {
        findings.push(Finding {
            action: Action::Reject,
            violations: vec![Violation::new(
                format!("{CONFIG_REF}.namespace"),
                format!(
                    "Invalid value: {:?}: must be the {}'s namespace {:?}",
                    new_id.namespace, request.group_kind.kind, request.namespace
                ),
            )],
            explanation: format!(
                "CAPI looks bootstrap configs up only in the {}'s namespace. Create the config \
                 in namespace {:?} and omit configRef.namespace",
                request.group_kind.kind, request.namespace
            ),
            warning: String::new(),
            suggested_name: None,
        });
    }
    findings.extend(check_config_ref(settings, request.version, new_ref));
    let target = GroupKind::new(&new_id.group, &new_id.kind);
    // A ref without group or kind is already flagged by the contract check above.
    let resolvable = !new_id.group.is_empty() && !new_id.kind.is_empty();
    // MachinePools name configs; MachineDeployments and MachineSets name templates.
    let pool = is_machine_pool(&request.group_kind.group, &request.group_kind.kind);
    let covered = if pool {
        settings.is_bootstrap_config(&target.group, &target.kind)
    } else {
        settings.is_bootstrap_template(&target.group, &target.kind)
    };
    if resolvable && !covered {
        findings.push(Finding::warning(format!(
            "configRef kind {} is not in bootstrapConfigKinds: its in-place edits are not checked",
            target.qualified()
        )));
    }
    if let (Some(lookups), Operation::Update, true) = (lookups, request.operation, resolvable) {
        if settings.is_bootstrap_config(&target.group, &target.kind) && !new_id.name.is_empty() {
            findings.extend(check_target(
                settings, request, lookups, &target, &new_id, old_ref,
            ));
        }
    }
    Ok(findings)
}

/// With lookups, on a rotation: the new target exists, no other pool controls it, it differs
/// from the old target, and it honours the contract once ready.
fn check_target(
    settings: &Settings,
    request: &Request,
    lookups: &dyn Lookups,
    target: &GroupKind,
    new_id: &RefIdentity,
    old_ref: Option<&Node>,
) -> Vec<Finding> {
    let Some(api_version) = settings.lookup_api_version(target) else {
        return Vec::new();
    };
    let named = format!("{} {}/{}", target.kind, request.namespace, new_id.name);
    let short = format!("{} {}", target.kind, new_id.name);
    let new_config = lookups::config(
        lookups,
        api_version.clone(),
        &target.kind,
        request.namespace,
        &new_id.name,
    );
    let new_config = match new_config
        .as_deref()
        .map_err(Clone::clone)
        .and_then(|answer| lookups::config_in(answer, &target.kind))
    {
        Ok(Some(config)) => config,
        Ok(None) => {
            return vec![Finding::warning(format!(
                "configRef target {short} does not exist yet: the MachinePool waits for it"
            ))]
        }
        Err(e) => return vec![Finding::lookup_failed(&target.kind, &e)],
    };
    let mut findings = Vec::new();
    let pool_uid = request.object.and_then(|o| o.uid.as_deref()).unwrap_or("");
    let others: Vec<String> = machine_pool_controllers(Some(&new_config))
        .into_iter()
        .filter(|o| {
            if o.uid.is_empty() || pool_uid.is_empty() {
                o.name != request.name
            } else {
                o.uid != pool_uid
            }
        })
        .map(|o| format!("MachinePool {}/{}", request.namespace, o.name))
        .collect();
    if !others.is_empty() {
        findings.push(Finding {
            action: Action::Reject,
            violations: vec![Violation::new(
                format!("{CONFIG_REF}.name"),
                format!(
                    "Forbidden: {named} is controlled by {}",
                    others.join(" and ")
                ),
            )],
            explanation: format!(
                "CAPI cannot adopt a config another MachinePool controls, so this pool would stop \
                 reconciling. Create a new {} for MachinePool {}/{} and point configRef at it",
                target.kind, request.namespace, request.name
            ),
            warning: String::new(),
            suggested_name: None,
        });
    }
    if let Some(old_id) = old_ref.map(RefIdentity::of) {
        if old_id.group == target.group && old_id.kind == target.kind && !old_id.name.is_empty() {
            let old_config = lookups::config(
                lookups,
                api_version,
                &target.kind,
                request.namespace,
                &old_id.name,
            );
            if let Some(Ok(Some(old_config))) = old_config
                .as_deref()
                .ok()
                .map(|answer| lookups::config_in(answer, &target.kind))
            {
                let rules = settings.field_rules(&target.kind);
                // The canonical specs themselves, not their fingerprints: exact.
                if canonical_form("spec", old_config.spec.as_ref(), &rules)
                    == canonical_form("spec", new_config.spec.as_ref(), &rules)
                {
                    findings.push(Finding::warning(format!(
                        "{} has the same content as {}: the rotation replaces every instance for nothing",
                        new_id.name, old_id.name
                    )));
                }
            }
        }
    }
    if let Some(mut flag) = check_config_status(settings, new_config.status.as_ref()) {
        flag.warning = format!(
            "configRef target {short} is ready without status.dataSecretName (bootstrap contract)"
        );
        for v in &mut flag.violations {
            v.detail = format!("{} (of {named})", v.detail);
        }
        findings.push(flag);
    }
    findings
}
