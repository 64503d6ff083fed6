//! A bootstrap template (KubeadmConfigTemplate and the other providers' ...Template kinds of
//! `bootstrapConfigKinds`): what its UPDATE and DELETE are judged by (rule 8,
//! [`crate::rules::template_edit`]). A CREATE is accepted. An UPDATE that changes
//! `spec.template.spec` (what the provider's defaulter writes aside) is, in this order: a
//! topology-managed copy's edit; a ClusterClass template's edit (a warning); the in-place edit
//! the provider documents, of its fields alone (a warning); with lookups, the edit of a
//! template nothing references (a warning); otherwise an in-place edit. A DELETE is
//! judged with lookups; without them (or when they fail) a person's DELETE of a template its
//! Cluster owns gets what `deleteOwnedConfigs` says (rule 7).

use crate::capi::defaulters::as_defaulted;
use crate::capi::kinds::{MACHINE_DEPLOYMENT, MACHINE_SET, TEMPLATE_SUFFIX};
use crate::capi::owners::cluster_classes;
use crate::capi::providers::{default_template_field_rules, documented_template_edit};
use crate::diff::changes_at;
use crate::fingerprint::{fingerprint, suggested_name};
use crate::lookups::{consumers, consumers_in, is_being_deleted, referencing, Lookups};
use crate::reader::node::Node;
use crate::reader::object::Object;
use crate::reader::request::{Operation, Request};
use crate::rules::controller_writes::is_topology_owned;
use crate::rules::delete_and_move::{check_owned_delete, template_owners};
use crate::rules::in_place_edit::{change_violations, check_dropped, with_conversion};
use crate::rules::template_edit::{
    class_template_edited, documented_edit, referenced_template_deleted, template_edited,
    topology_copy_edited, unreferenced_template_edited, UNKNOWN_USERS,
};
use crate::settings::{Action, Settings};
use crate::verdict::{Finding, Subject};

const TEMPLATE_SPEC: [&str; 3] = ["spec", "template", "spec"];

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

/// The findings on a request for a bootstrap template; `lookups` only in the context-aware
/// mode.
pub fn judge(
    settings: &Settings,
    request: &Request,
    subject: &Subject,
    lookups: Option<&dyn Lookups>,
) -> Vec<Finding> {
    match request.operation {
        Operation::Update if settings.template_edits != Action::Allow => {
            update(settings, request, subject, lookups)
        }
        Operation::Delete => delete(settings, request, subject, lookups),
        _ => Vec::new(),
    }
}

/// With lookups, a template live MachineDeployments or MachineSets reference (`templateEdits`);
/// without them (or when they fail), a person's DELETE of an owned template
/// (`deleteOwnedConfigs`, rule 7).
fn delete(
    settings: &Settings,
    request: &Request,
    subject: &Subject,
    lookups: Option<&dyn Lookups>,
) -> Vec<Finding> {
    let owned = || {
        check_owned_delete(
            settings,
            &request.requester,
            subject,
            &template_owners(request.old_object),
        )
    };
    let Some(lookups) = lookups else {
        return owned().into_iter().collect();
    };
    if settings.template_edits == Action::Allow {
        return Vec::new();
    }
    match users(settings, lookups, subject, true) {
        Ok(users) if users.is_empty() => Vec::new(),
        Ok(users) => vec![referenced_template_deleted(settings, subject, &users)],
        Err(e) => {
            let mut findings = vec![Finding::lookup_failed("MachineDeployment/MachineSet", &e)];
            findings.extend(owned());
            findings
        }
    }
}

fn update(
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
    let (rules, dropped) = with_conversion(
        default_template_field_rules(kind),
        &subject.group_kind,
        request.version,
        request.old_object,
    );
    let config_kind = kind.strip_suffix(TEMPLATE_SUFFIX).unwrap_or(kind);
    let (old_defaulted, new_defaulted) = as_defaulted(config_kind, old, new);
    let changes = changes_at(
        &TEMPLATE_SPEC,
        old_defaulted.as_deref(),
        new_defaulted.as_deref(),
        &rules,
    );
    let full_spec = request.object.and_then(|o| o.spec.as_ref());
    let no_effect = check_dropped(subject, &dropped, request.old_object, full_spec);
    if changes.is_empty() {
        return no_effect.into_iter().collect();
    }
    let violations = change_violations(&changes);
    if is_topology_owned(request.old_object) {
        // The topology controller itself is allowed by the engine (controllerUsers), with
        // these paths in the audit log.
        return vec![topology_copy_edited(settings, kind, violations)];
    }
    let classes = cluster_classes(request.old_object);
    if !classes.is_empty() {
        return vec![class_template_edited(&classes)];
    }
    // The provider's own docs make this edit in place (k0smotron's version bump): admitted.
    if let Some(edit) = documented_template_edit(kind, changes.iter().map(|c| &c.path)) {
        return vec![documented_edit(&violations[0].field, edit)];
    }
    let mut findings = Vec::new();
    let users = match lookups.map(|l| users(settings, l, subject, false)) {
        Some(Ok(users)) if users.is_empty() => {
            return vec![unreferenced_template_edited(kind, &subject.name)];
        }
        Some(Ok(users)) => users.join(" and "),
        Some(Err(e)) => {
            findings.push(Finding::lookup_failed("MachineDeployment/MachineSet", &e));
            UNKNOWN_USERS.to_string()
        }
        None => UNKNOWN_USERS.to_string(),
    };
    let name = suggested_name(&subject.name, &fingerprint(new, &rules));
    findings.push(template_edited(settings, subject, violations, &users, name));
    findings
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capi::kinds::GroupKind;
    use crate::reader::json::read_document;
    use crate::reader::request::RequestDoc;
    use rstest::rstest;
    use serde_json::{json, Value};

    fn template(content: &str, metadata: Value) -> Value {
        let mut metadata = metadata;
        metadata["name"] = json!("md-0-0123abcd");
        json!({"metadata": metadata,
               "spec": {"template": {"spec": {"files": [{"path": "/etc/a", "content": content}]}}}})
    }

    /// [`judge`] on a request for a `kind` template in `version`, without lookups.
    fn judged(
        kind: &str,
        version: &str,
        operation: &str,
        old: Value,
        new: Value,
        settings: Value,
    ) -> Vec<Finding> {
        let json = serde_json::to_vec(&json!({
            "kind": {"group": "bootstrap.cluster.x-k8s.io", "version": version, "kind": kind},
            "operation": operation, "namespace": "fleet", "name": "md-0-0123abcd",
            "object": new, "oldObject": old,
        }))
        .unwrap();
        let doc = read_document(&json, RequestDoc::read).unwrap();
        let (group_kind, version) = doc.kind_of().unwrap();
        let request = Request::parse(&doc, group_kind, &version).unwrap();
        let subject = Subject {
            group_kind: GroupKind::new("bootstrap.cluster.x-k8s.io", kind),
            namespace: "fleet".into(),
            name: "md-0-0123abcd".into(),
        };
        let settings = Settings::from_value(&settings).unwrap();
        judge(&settings, &request, &subject, None)
    }

    /// What [`judge`] finds on a v1beta2 request for a `kind` template: a rejection as its first
    /// violation, a warning as its text.
    fn findings(
        kind: &str,
        operation: &str,
        old: Value,
        new: Value,
        settings: Value,
    ) -> Vec<String> {
        judged(kind, "v1beta2", operation, old, new, settings)
            .into_iter()
            .map(|f| match (f.action, f.violations.first()) {
                (Action::Reject, Some(v)) => format!("Reject {}: {}", v.field, v.detail),
                (action, _) => format!("{action:?} {}", f.warning),
            })
            .collect()
    }

    const KC: &str = "KubeadmConfigTemplate";

    /// The owner CAPI's MachineDeployment and MachineSet controllers give a template they use.
    fn cluster_owned() -> Value {
        json!({"ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                                    "name": "prod", "uid": "5e0c1a2b-0000-4000-8000-000000000001"}]})
    }

    #[rstest]
    #[case::an_edit("UPDATE", template("a", json!({})), template("b", json!({})), json!({}), &["Reject spec.template.spec.files[0].content: Forbidden: changed"])]
    #[case::warned("UPDATE", template("a", json!({})), template("b", json!({})), json!({"templateEdits": "warn"}), &["Warn spec.template.spec.files[0].content edited in place: not rolled out to existing Machines; copy and rotate configRef"])]
    #[case::allowed("UPDATE", template("a", json!({})), template("b", json!({})), json!({"templateEdits": "allow"}), &[])]
    #[case::metadata_only("UPDATE", template("a", json!({})), template("a", json!({"labels": {"x": "y"}})), json!({}), &[])]
    #[case::topology_copy("UPDATE", template("a", json!({"labels": {"topology.cluster.x-k8s.io/owned": ""}})), template("b", json!({})), json!({}), &["Reject spec.template.spec.files[0].content: Forbidden: changed"])]
    #[case::topology_copy_warned("UPDATE", template("a", json!({"labels": {"topology.cluster.x-k8s.io/owned": ""}})), template("b", json!({})), json!({"templateEdits": "warn"}), &["Warn spec.template.spec.files[0].content of a topology-managed KubeadmConfigTemplate edited: the topology controller owns it"])]
    #[case::label_added_in_the_same_request("UPDATE", template("a", json!({})), template("b", json!({"labels": {"topology.cluster.x-k8s.io/owned": ""}})), json!({"templateEdits": "warn"}), &["Warn spec.template.spec.files[0].content edited in place: not rolled out to existing Machines; copy and rotate configRef"])]
    #[case::class_template("UPDATE", template("a", json!({"ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "ClusterClass", "name": "quick-start"}]})), template("b", json!({})), json!({}), &["Warn ClusterClass quick-start uses this template: MachineDeployments roll at next reconcile, MachinePools not rotated"])]
    #[case::create("CREATE", json!(null), template("a", json!({})), json!({}), &[])]
    #[case::delete_without_lookups("DELETE", template("a", json!({})), json!(null), json!({}), &[])]
    #[case::delete_of_a_cluster_s_template("DELETE", template("a", cluster_owned()), json!(null), json!({}), &["Warn Cluster prod owns it: a same-name re-create is no rotation; rotate configRef (contextAware: true refuses)"])]
    #[case::delete_warned_whatever_template_edits("DELETE", template("a", cluster_owned()), json!(null), json!({"templateEdits": "allow"}), &["Warn Cluster prod owns it: a same-name re-create is no rotation; rotate configRef (contextAware: true refuses)"])]
    #[case::delete_refused("DELETE", template("a", cluster_owned()), json!(null), json!({"deleteOwnedConfigs": "reject"}), &["Reject metadata.ownerReferences: Forbidden: owned by Cluster fleet/prod"])]
    #[case::delete_allowed("DELETE", template("a", cluster_owned()), json!(null), json!({"deleteOwnedConfigs": "allow"}), &[])]
    #[case::delete_of_a_class_template("DELETE", template("a", json!({"ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "ClusterClass", "name": "quick-start"}]})), json!(null), json!({"deleteOwnedConfigs": "reject"}), &[])]
    fn the_decision_tree(
        #[case] operation: &str,
        #[case] old: Value,
        #[case] new: Value,
        #[case] settings: Value,
        #[case] expected: &[&str],
    ) {
        assert_eq!(findings(KC, operation, old, new, settings), expected);
    }

    fn k0s_template(version: &str, args: &[&str]) -> Value {
        json!({"metadata": {"name": "md-0-0123abcd"},
               "spec": {"template": {"spec": {"version": version, "args": args}}}})
    }

    /// k0smotron's documented version bump of a K0sWorkerConfigTemplate: the version alone is
    /// admitted with a warning whatever `templateEdits` says (but `allow`, which says nothing);
    /// with another field it is an edit like any other, the version listed too.
    #[rstest]
    #[case::version_alone(k0s_template("v1.31.3+k0s.0", &[]), json!({}), &["Warn spec.template.spec.version edited in place (k0smotron docs): rolls out with the MachineDeployment's version bump only"])]
    #[case::version_alone_warn_mode(k0s_template("v1.31.3+k0s.0", &[]), json!({"templateEdits": "warn"}), &["Warn spec.template.spec.version edited in place (k0smotron docs): rolls out with the MachineDeployment's version bump only"])]
    #[case::version_alone_allow_mode(k0s_template("v1.31.3+k0s.0", &[]), json!({"templateEdits": "allow"}), &[])]
    #[case::version_and_args(k0s_template("v1.31.3+k0s.0", &["--labels=pool=a"]), json!({}), &["Reject spec.template.spec.args: Forbidden: added"])]
    #[case::args_alone(k0s_template("v1.30.1+k0s.0", &["--labels=pool=a"]), json!({}), &["Reject spec.template.spec.args: Forbidden: added"])]
    fn k0smotron_s_documented_version_bump(
        #[case] new: Value,
        #[case] settings: Value,
        #[case] expected: &[&str],
    ) {
        let old = k0s_template("v1.30.1+k0s.0", &[]);
        assert_eq!(
            findings("K0sWorkerConfigTemplate", "UPDATE", old, new, settings),
            expected
        );
    }

    #[test]
    fn a_version_and_another_field_lists_both() {
        let old = k0s_template("v1.30.1+k0s.0", &[]);
        let new = k0s_template("v1.31.3+k0s.0", &["--labels=pool=a"]);
        let findings = judged(
            "K0sWorkerConfigTemplate",
            "v1beta1",
            "UPDATE",
            old,
            new,
            json!({}),
        );
        let fields: Vec<&str> = findings[0]
            .violations
            .iter()
            .map(|v| v.field.as_str())
            .collect();
        assert_eq!(
            fields,
            ["spec.template.spec.args", "spec.template.spec.version"]
        );
    }

    #[test]
    fn rke2_s_defaulted_format_is_no_edit() {
        let old = json!({"metadata": {}, "spec": {"template": {"spec": {"agentConfig": {}}}}});
        let new = json!({"metadata": {}, "spec": {"template": {"spec": {"agentConfig": {"format": "cloud-config"}}}}});
        assert_eq!(
            findings(
                "RKE2ConfigTemplate",
                "UPDATE",
                old.clone(),
                new.clone(),
                json!({})
            ),
            Vec::<String>::new()
        );
        // The same write on a KubeadmConfigTemplate is an edit.
        assert_eq!(
            findings(KC, "UPDATE", old, new, json!({})),
            ["Reject spec.template.spec.agentConfig.format: Forbidden: added"]
        );
    }
}
