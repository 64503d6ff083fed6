//! Bootstrap templates (KubeadmConfigTemplate and the other providers' ...Template kinds), named
//! by MachineDeployments and MachineSets in `spec.template.spec.bootstrap.configRef`. CAPI does
//! not roll in-place edits of `spec.template.spec` out to existing Machines; its book says to copy
//! the template under a new name and rotate the ref (tasks/updating-machine-templates.md,
//! cluster-api #4145). Two exceptions, as CAPI has them:
//! - a template a ClusterClass owns (non-controller ownerReference) is edited in place on purpose:
//!   the topology controller propagates it to every Cluster of the class at its next full
//!   reconcile, rotating their own copies (a warning says so);
//! - a per-cluster copy (label `topology.cluster.x-k8s.io/owned`) is the topology controller's to
//!   change: only `controllerUsers` may.

use crate::capi::kinds::{
    group_of_api_version, CAPI_GROUP, CLUSTER_CLASS, MACHINE_DEPLOYMENT, MACHINE_SET,
    TEMPLATE_SUFFIX,
};
use crate::capi::provider_writes::{as_defaulted, default_template_field_rules};
use crate::diff::changes_at;
use crate::fingerprint::{fingerprint, suggested_name};
use crate::lookups::{consumers, consumers_in, is_being_deleted, referencing, Lookups};
use crate::reader::json::Node;
use crate::reader::object::Object;
use crate::reader::request::{Operation, Request};
use crate::rules::controller_writes::is_topology_owned;
use crate::rules::in_place_edit::change_violations;
use crate::settings::{Action, Settings};
use crate::verdict::{Finding, Subject, Violation};

const TEMPLATE_SPEC: [&str; 3] = ["spec", "template", "spec"];

/// Names of the ClusterClasses that reference this template (their ownerReferences).
pub fn cluster_classes(object: Option<&Object>) -> Vec<String> {
    object
        .map(|o| o.owner_references())
        .unwrap_or_default()
        .iter()
        .filter(|r| {
            r.kind.as_deref() == Some(CLUSTER_CLASS)
                && group_of_api_version(r.api_version.as_deref().unwrap_or("")) == CAPI_GROUP
        })
        .filter_map(|r| r.name.as_deref().map(str::to_string))
        .collect()
}

/// `spec.template.spec` of a template.
fn template_spec<'o, 'a>(object: Option<&'o Object<'a>>) -> Option<&'o Node<'a>> {
    object
        .and_then(|o| o.spec.as_ref())
        .and_then(|spec| spec.at(&TEMPLATE_SPEC[1..]))
}

/// The MachineDeployments and MachineSets whose configRef names the template, as
/// `MachineDeployment ns/name`; `Err` when a lookup failed.
fn users(
    settings: &Settings,
    lookups: &dyn Lookups,
    subject: &Subject,
    live_only: bool,
) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    for kind in [MACHINE_DEPLOYMENT, MACHINE_SET] {
        let answer = consumers(lookups, &settings.capi_version, kind, &subject.namespace)?;
        let items = consumers_in(&answer, kind)?;
        names.extend(
            referencing(
                &items,
                &subject.group_kind,
                &subject.namespace,
                &subject.name,
            )
            .into_iter()
            .filter(|(_, item)| !live_only || !is_being_deleted(item))
            .map(|(owner, _)| format!("{kind} {}/{}", subject.namespace, owner.name)),
        );
    }
    Ok(names)
}

/// Judges a request on a bootstrap template.
pub fn check(
    settings: &Settings,
    request: &Request,
    subject: &Subject,
    lookups: Option<&dyn Lookups>,
) -> Vec<Finding> {
    if settings.template_edits == Action::Ignore {
        return Vec::new();
    }
    match request.operation {
        Operation::Update => check_update(settings, request, subject, lookups),
        Operation::Delete => match lookups.map(|l| users(settings, l, subject, true)) {
            Some(Ok(users)) if !users.is_empty() => vec![Finding {
                action: settings.template_edits,
                violations: vec![Violation::new(
                    "metadata.name",
                    format!(
                        "Forbidden: referenced by the configRef of {}",
                        users.join(" and ")
                    ),
                )],
                explanation: format!(
                    "Deleting it breaks the creation of their Machines. Point their \
                     spec.template.spec.bootstrap.configRef at another {} first",
                    subject.group_kind.kind
                ),
                warning: String::new(),
                suggested_name: None,
            }],
            Some(Err(e)) => vec![Finding::lookup_failed("MachineDeployment/MachineSet", &e)],
            _ => Vec::new(),
        },
        Operation::Create | Operation::Connect => Vec::new(),
    }
}

fn check_update(
    settings: &Settings,
    request: &Request,
    subject: &Subject,
    lookups: Option<&dyn Lookups>,
) -> Vec<Finding> {
    let (old, new) = (
        template_spec(request.old_object),
        template_spec(request.object),
    );
    // What the provider's template defaulter writes (RKE2's format) is no edit.
    let kind = &subject.group_kind.kind;
    let rules = default_template_field_rules(kind);
    let config_kind = kind.strip_suffix(TEMPLATE_SUFFIX).unwrap_or(kind);
    let (old_defaulted, new_defaulted) = as_defaulted(config_kind, old, new);
    let changes = changes_at(
        &TEMPLATE_SPEC,
        old_defaulted.as_deref(),
        new_defaulted.as_deref(),
        &rules,
    );
    if changes.is_empty() {
        return Vec::new();
    }
    let violations = change_violations(&changes);
    let first = violations[0].field.clone();
    if is_topology_owned(request.old_object) {
        // The topology controller itself is allowed by the engine (controllerUsers), with
        // these paths in the audit log.
        return vec![Finding {
            action: settings.template_edits,
            violations,
            explanation: format!(
                "This {kind} is a Cluster's copy that CAPI's topology controller manages \
                 (label topology.cluster.x-k8s.io/owned): change the ClusterClass's template instead"
            ),
            warning: format!("{first} of a topology-managed {kind} edited: the topology controller owns it"),
            suggested_name: None,
        }];
    }
    let classes = cluster_classes(request.old_object);
    if !classes.is_empty() {
        return vec![Finding::warning(format!(
            "ClusterClass {} uses this template: every Cluster of it rolls its Machines at the next reconcile",
            classes.join(", ")
        ))];
    }
    let mut findings = Vec::new();
    let users = match lookups.map(|l| users(settings, l, subject, false)) {
        Some(Ok(users)) if users.is_empty() => {
            return vec![Finding::warning(format!(
                "{kind} {} is referenced by no MachineDeployment or MachineSet: this edit reaches no Machine",
                subject.name
            ))];
        }
        Some(Ok(users)) => users.join(" and "),
        Some(Err(e)) => {
            findings.push(Finding::lookup_failed("MachineDeployment/MachineSet", &e));
            "the MachineDeployments and MachineSets that use it".to_string()
        }
        None => "the MachineDeployments and MachineSets that use it".to_string(),
    };
    let name = suggested_name(&subject.name, &fingerprint(new, &rules));
    findings.push(Finding {
        action: settings.template_edits,
        violations,
        explanation: format!(
            "CAPI does not roll in-place bootstrap template edits out to existing Machines \
             (cluster-api #4145): copy the template under a new name instead. To roll a change \
             out, create a new {kind} {name:?} in namespace {ns} with the desired \
             spec.template.spec, then set spec.template.spec.bootstrap.configRef.name of {users} \
             to {name:?}",
            ns = subject.namespace,
        ),
        warning: format!("{first} edited in place: not rolled out to existing Machines; copy and rotate configRef"),
        suggested_name: Some(name),
    });
    findings
}
