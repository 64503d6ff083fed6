//! Rule 1, rotation: a MachinePool changes its bootstrap config by pointing
//! `spec.template.spec.bootstrap.configRef` at another object. That is allowed, to any
//! provider's kind, and checked: the new ref must be resolvable, in the pool's namespace.

use serde_json::Value;

use crate::contract::{check_config_ref, CONFIG_REF};
use crate::kinds::{at, group_of_api_version, str_field, GroupKind};
use crate::request::{Operation, Request};
use crate::settings::{Action, Settings};
use crate::verdict::{Finding, Violation};

/// The identity of a configRef: {group, kind, name}. apiVersion is not part of it: in v1beta1
/// CAPI bumps it to a newer version of the same group on its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefIdentity {
    pub group: String,
    pub kind: String,
    pub name: String,
    /// v1beta1 only; empty means the MachinePool's namespace.
    pub namespace: String,
}

impl RefIdentity {
    pub fn of(config_ref: &Value) -> Self {
        let group = str_field(config_ref, "apiGroup")
            .or_else(|| str_field(config_ref, "apiVersion").map(group_of_api_version))
            .unwrap_or("");
        let field = |key| str_field(config_ref, key).unwrap_or("").to_string();
        RefIdentity {
            group: group.to_string(),
            kind: field("kind"),
            name: field("name"),
            namespace: field("namespace"),
        }
    }
}

/// The configRef of a MachinePool: `Ok(None)` when absent (dataSecretName only), an error when
/// it is not an object.
pub fn config_ref(machine_pool: Option<&Value>) -> Result<Option<&Value>, String> {
    let keys = ["spec", "template", "spec", "bootstrap", "configRef"];
    match machine_pool.and_then(|mp| at(mp, &keys)) {
        None | Some(Value::Null) => Ok(None),
        Some(r @ Value::Object(_)) => Ok(Some(r)),
        Some(_) => Err(format!(
            "{CONFIG_REF}: Invalid value: must be an object reference"
        )),
    }
}

/// Rule 1 (and rule 5 for the ref) on a MachinePool CREATE or UPDATE.
pub fn check(settings: &Settings, request: &Request) -> Result<Vec<Finding>, String> {
    let new_ref = config_ref(request.object)?;
    let old_ref = match request.operation {
        Operation::Update => config_ref(request.old_object).unwrap_or(None),
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
                    "Invalid value: {:?}: must be the MachinePool's namespace {:?}",
                    new_id.namespace, request.namespace
                ),
            )],
            explanation: format!(
                "CAPI looks bootstrap configs up only in the MachinePool's namespace. Create the \
                 config in namespace {:?} and omit configRef.namespace",
                request.namespace
            ),
            warning: String::new(),
        });
    }
    findings.extend(check_config_ref(settings, request.version, new_ref));
    let target = GroupKind::new(&new_id.group, &new_id.kind);
    // A ref without group or kind is already flagged by the contract check above.
    let resolvable = !new_id.group.is_empty() && !new_id.kind.is_empty();
    if resolvable && !settings.is_bootstrap_config(&target.group, &target.kind) {
        findings.push(Finding {
            action: Action::Warn,
            violations: Vec::new(),
            explanation: String::new(),
            warning: format!(
                "configRef kind {} is not in bootstrapConfigKinds: its in-place edits are not checked",
                target.qualified()
            ),
        });
    }
    Ok(findings)
}
