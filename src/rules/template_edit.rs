//! Rule 8, bootstrap templates (KubeadmConfigTemplate and the other providers' ...Template
//! kinds), named by MachineDeployments and MachineSets in `spec.template.spec.bootstrap.configRef`.
//! CAPI does not roll in-place edits of `spec.template.spec` out to existing Machines; its book
//! says to copy the template under a new name and rotate the ref
//! (tasks/updating-machine-templates.md, cluster-api #4145). Two exceptions, as CAPI has them:
//! - a template a ClusterClass owns (non-controller ownerReference) is edited in place on purpose:
//!   the topology controller propagates it to every Cluster of the class at its next full
//!   reconcile, rotating the MachineDeployments' copies (they roll out) and patching the
//!   MachinePools' configs in place (no rotation, cluster-api #10496; a warning says both);
//! - a per-cluster copy (label `topology.cluster.x-k8s.io/owned`) is the topology controller's to
//!   change: only `controllerUsers` may (rule 3).
//!
//! And one a provider has: an edit its own docs make in place, of its fields alone
//! ([`crate::capi::providers::DocumentedEdit`], k0smotron's version bump), is admitted with a
//! warning saying what rolls it out.
//!
//! Each finding below is worded here; which one a request gets is
//! [`crate::webhooks::bootstrap_template`]'s decision. `templateEdits` says what they do.

use crate::capi::providers::DocumentedEdit;
use crate::settings::Settings;
use crate::verdict::{Finding, Subject, Violation};

/// Who uses the template when the lookups cannot say.
pub const UNKNOWN_USERS: &str = "the MachineDeployments and MachineSets that use it";

/// An edit of a topology-managed copy (`violations`: the changed paths).
pub fn topology_copy_edited(
    settings: &Settings,
    kind: &str,
    violations: Vec<Violation>,
) -> Finding {
    let first = violations[0].field.clone();
    Finding {
        action: settings.template_edits,
        violations,
        explanation: format!(
            "This {kind} is a Cluster's copy that CAPI's topology controller manages \
             (label topology.cluster.x-k8s.io/owned): change the ClusterClass's template instead"
        ),
        warning: format!(
            "{first} of a topology-managed {kind} edited: the topology controller owns it"
        ),
        suggested_name: None,
    }
}

/// An edit of a template ClusterClasses own: on purpose, said as a warning.
pub fn class_template_edited(classes: &[String]) -> Finding {
    Finding::warning(format!(
        "ClusterClass {} uses this template: MachineDeployments roll at next reconcile, MachinePools not rotated",
        classes.join(", ")
    ))
}

/// An edit of the fields a provider documents editing in place, and of nothing else (`first`:
/// the first changed path): admitted, with what rolls it out.
pub fn documented_edit(first: &str, edit: &DocumentedEdit) -> Finding {
    Finding::warning(format!(
        "{first} edited in place ({}): {}",
        edit.documented_by, edit.rolled_out_by
    ))
}

/// With lookups: an edit of a template nothing references reaches no Machine.
pub fn unreferenced_template_edited(kind: &str, name: &str) -> Finding {
    Finding::warning(format!(
        "{kind} {name} is referenced by no MachineDeployment or MachineSet: this edit reaches no Machine"
    ))
}

/// An in-place edit of a template in use by `users` (named, or [`UNKNOWN_USERS`]), with the
/// copy under `name` that rolls it out.
pub fn template_edited(
    settings: &Settings,
    subject: &Subject,
    violations: Vec<Violation>,
    users: &str,
    name: String,
) -> Finding {
    let first = violations[0].field.clone();
    let kind = &subject.group_kind.kind;
    Finding {
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
    }
}

/// With lookups: deleting a template live MachineDeployments or MachineSets reference.
pub fn referenced_template_deleted(
    settings: &Settings,
    subject: &Subject,
    users: &[String],
) -> Finding {
    Finding {
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capi::kinds::GroupKind;
    use crate::settings::Action;
    use rstest::rstest;

    fn subject() -> Subject {
        Subject {
            group_kind: GroupKind::builtin("bootstrap.cluster.x-k8s.io", "KubeadmConfigTemplate"),
            namespace: "fleet".into(),
            name: "md-a-0123abcd".into(),
        }
    }

    fn changed() -> Vec<Violation> {
        vec![
            Violation::new("spec.template.spec.files[0].content", "Forbidden: changed"),
            Violation::new("spec.template.spec.format", "Forbidden: changed"),
        ]
    }

    fn settings(mode: Action) -> Settings {
        Settings {
            template_edits: mode,
            ..Settings::default()
        }
    }

    #[rstest]
    #[case::named("MachineDeployment fleet/md-a and MachineSet fleet/ms-a")]
    #[case::unknown(UNKNOWN_USERS)]
    fn an_edit_names_the_copy_that_rolls_it_out(#[case] users: &str) {
        let finding = template_edited(
            &settings(Action::Warn),
            &subject(),
            changed(),
            users,
            "md-a-5e6f7a8b".into(),
        );
        assert_eq!(finding.action, Action::Warn);
        assert_eq!(finding.violations, changed());
        assert!(
            finding.explanation.ends_with(&format!(
                "create a new KubeadmConfigTemplate \"md-a-5e6f7a8b\" in namespace fleet with the \
             desired spec.template.spec, then set spec.template.spec.bootstrap.configRef.name \
             of {users} to \"md-a-5e6f7a8b\""
            )),
            "{}",
            finding.explanation
        );
        assert_eq!(
            finding.warning,
            "spec.template.spec.files[0].content edited in place: not rolled out to existing \
             Machines; copy and rotate configRef"
        );
        assert_eq!(finding.suggested_name.as_deref(), Some("md-a-5e6f7a8b"));
    }

    #[test]
    fn a_topology_copy_is_the_controllers() {
        let finding = topology_copy_edited(
            &settings(Action::Reject),
            "KubeadmConfigTemplate",
            changed(),
        );
        assert_eq!(
            (finding.action, finding.suggested_name),
            (Action::Reject, None)
        );
        assert_eq!(
            finding.warning,
            "spec.template.spec.files[0].content of a topology-managed KubeadmConfigTemplate \
             edited: the topology controller owns it"
        );
        assert!(finding
            .explanation
            .ends_with("change the ClusterClass's template instead"));
    }

    #[rstest]
    #[case::one(&["quick-start"], "ClusterClass quick-start uses this template")]
    #[case::two(&["a", "b"], "ClusterClass a, b uses this template")]
    fn a_class_template_edit_is_a_warning(#[case] classes: &[&str], #[case] start: &str) {
        let classes: Vec<String> = classes.iter().map(|c| c.to_string()).collect();
        let finding = class_template_edited(&classes);
        assert_eq!(finding.action, Action::Warn);
        assert!(finding.violations.is_empty());
        assert_eq!(
            finding.warning,
            format!("{start}: MachineDeployments roll at next reconcile, MachinePools not rotated")
        );
    }

    #[test]
    fn a_documented_edit_is_a_warning_saying_what_rolls_it_out() {
        let edit = crate::capi::providers::provider_of_template("K0sWorkerConfigTemplate")
            .and_then(|p| p.template_documented_edit.as_ref())
            .unwrap();
        let finding = documented_edit("spec.template.spec.version", edit);
        assert_eq!(
            (finding.action, finding.violations.len()),
            (Action::Warn, 0)
        );
        assert_eq!(
            finding.warning,
            "spec.template.spec.version edited in place (k0smotron docs): rolls out with the \
             MachineDeployment's version bump only"
        );
        assert!(finding.warning.len() <= 120, "{}", finding.warning.len());
    }

    #[test]
    fn an_unreferenced_template_is_a_warning() {
        let finding = unreferenced_template_edited("KubeadmConfigTemplate", "md-a-0123abcd");
        assert_eq!(
            (finding.action, finding.warning.as_str()),
            (Action::Warn, "KubeadmConfigTemplate md-a-0123abcd is referenced by no MachineDeployment or MachineSet: this edit reaches no Machine")
        );
    }

    #[test]
    fn deleting_a_referenced_template_names_its_users() {
        let users = [
            "MachineDeployment fleet/md-a".to_string(),
            "MachineSet fleet/ms-a".to_string(),
        ];
        let finding = referenced_template_deleted(&settings(Action::Reject), &subject(), &users);
        assert_eq!(
            finding.violations,
            [Violation::new(
                "metadata.name",
                "Forbidden: referenced by the configRef of MachineDeployment fleet/md-a and MachineSet fleet/ms-a"
            )]
        );
        assert!(finding
            .explanation
            .ends_with("at another KubeadmConfigTemplate first"));
    }
}
