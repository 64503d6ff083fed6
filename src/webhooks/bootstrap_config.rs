//! A bootstrap config (KubeadmConfig and the other kinds of `bootstrapConfigKinds`): what its
//! CREATE, UPDATE and DELETE are judged by, and when the namespace's MachinePools are worth a
//! lookup. The pool list is asked for only when its answer can change the verdict (a CREATE,
//! which may reuse a consumed name; a DELETE; an UPDATE with a compared spec change or an
//! ownerReference removal): CAPI's frequent writes (token rotation, fill-once fields, status,
//! labels) make no host call.
//!
//! - CREATE: the status contract (rule 5); with lookups, a name whose data secret a pool
//!   already consumed (rule 7), unless the config is a moved or restored one.
//! - UPDATE of a config in use (referenced by a pool with lookups, else controlled by one):
//!   ownerReference removal (rule 4) and in-place edits (rule 2); rotated out (with lookups):
//!   a warning that the edit reaches no node; a changed status: the contract (rule 5).
//! - DELETE: with lookups, a config a live pool references (rule 7); without them (or when they
//!   fail), a person's DELETE of a config its pool controls, in use or rotated out: what
//!   `deleteOwnedConfigs` says (a warning by default).

use crate::capi::kinds::{GroupKind, MACHINE_POOL};
use crate::capi::owners::{machine_pool_controllers, Owner};
use crate::lookups::{
    consumers_in, consuming_data_secret, is_being_deleted, machine_pools, referencing, Consumer,
    Lookups,
};
use crate::reader::node::Node;
use crate::reader::object::Object;
use crate::reader::request::{Operation, Request};
use crate::rules::contract::check_config_status;
use crate::rules::controller_writes::is_topology_owned;
use crate::rules::delete_and_move::{
    check_delete, check_owned_delete, check_recreate, config_owners, is_moved_or_restored,
};
use crate::rules::in_place_edit::{self, rotation_remediation};
use crate::rules::ownership::{check_removal, removed_controllers};
use crate::settings::{Action, Settings};
use crate::verdict::{Finding, Subject};

/// The host's answer to the MachinePool list of the request's namespace, asked with `lookups`
/// when there are any; a failed lookup adds its warning and leaves the ownerReference rules to
/// decide. Read with [`pools_in`].
fn list_pools(
    settings: &Settings,
    request: &Request,
    lookups: Option<&dyn Lookups>,
    findings: &mut Vec<Finding>,
) -> Option<Vec<u8>> {
    match machine_pools(lookups?, &settings.capi_version, request.namespace) {
        Ok(answer) => Some(answer),
        Err(e) => {
            findings.push(Finding::lookup_failed("MachinePool", &e));
            None
        }
    }
}

/// The pools of a list answer; an unreadable answer is a failed lookup.
fn pools_in<'a>(
    answer: Option<&'a [u8]>,
    findings: &mut Vec<Finding>,
) -> Option<Vec<Consumer<'a>>> {
    match consumers_in(answer?, MACHINE_POOL) {
        Ok(pools) => Some(pools),
        Err(e) => {
            findings.push(Finding::lookup_failed(MACHINE_POOL, &e));
            None
        }
    }
}

/// The pools not being deleted whose current configRef names the subject.
fn live_referencing_pools(pools: &[Consumer], subject: &Subject) -> Vec<Owner> {
    referencing(
        pools,
        &subject.group_kind,
        &subject.namespace,
        &subject.name,
    )
    .into_iter()
    .filter(|(_, pool)| !is_being_deleted(pool))
    .map(|(owner, _)| owner)
    .collect()
}

/// The findings on a request for a bootstrap config; `lookups` only in the context-aware mode.
pub fn judge(
    settings: &Settings,
    request: &Request,
    subject: &Subject,
    lookups: Option<&dyn Lookups>,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    match request.operation {
        Operation::Create => judge_create(settings, request, subject, lookups, &mut findings),
        Operation::Update => judge_update(settings, request, subject, lookups, &mut findings),
        Operation::Delete => judge_delete(settings, request, subject, lookups, &mut findings),
        Operation::Connect => {}
    }
    findings
}

/// A CREATE: the status contract, and (with lookups) a name whose data secret a pool consumed.
fn judge_create(
    settings: &Settings,
    request: &Request,
    subject: &Subject,
    lookups: Option<&dyn Lookups>,
    findings: &mut Vec<Finding>,
) {
    findings.extend(check_config_status(settings, status(request.object)));
    // A config created with its pool's ownerReference is one moved or restored, not a
    // new one under a consumed name (rule 7).
    if !is_moved_or_restored(request.object) {
        let answer = list_pools(settings, request, lookups, findings);
        if let Some(pools) = pools_in(answer.as_deref(), findings) {
            let consumers = consuming_data_secret(&pools, &subject.name);
            findings.extend(check_recreate(subject, &consumers));
        }
    }
}

/// An UPDATE: the spec and ownerReference changes of a config that can be in use, then a
/// changed status's contract.
fn judge_update(
    settings: &Settings,
    request: &Request,
    subject: &Subject,
    lookups: Option<&dyn Lookups>,
    findings: &mut Vec<Finding>,
) {
    let owners = machine_pool_controllers(request.old_object);
    // Without lookups only a config a MachinePool controls can be in use.
    if lookups.is_some() || !owners.is_empty() {
        judge_edit(settings, request, subject, lookups, &owners, findings);
    }
    if status(request.object) != status(request.old_object) {
        findings.extend(check_config_status(settings, status(request.object)));
    }
}

/// An UPDATE's edit of a config that can be in use (`owners`: the pools that control it): the
/// fields storage drops, a rotated-out config's edit, and, in use, the ownerReference removal
/// and the in-place edit.
fn judge_edit(
    settings: &Settings,
    request: &Request,
    subject: &Subject,
    lookups: Option<&dyn Lookups>,
    owners: &[Owner],
    findings: &mut Vec<Finding>,
) {
    let (old_spec, new_spec) = (spec(request.old_object), spec(request.object));
    // The kind's non-compared fields and the compared changes, once per request
    // (parsing the rules is a visible share of the token rotation CAPI writes
    // every ~7.5 minutes).
    // A version's zeros and the fields storage drops count as no change (rule 2,
    // crate::capi::conversion).
    let (rules, dropped) = in_place_edit::with_conversion(
        settings.field_rules(&subject.group_kind.kind),
        &subject.group_kind,
        request.version,
        request.old_object,
    );
    findings.extend(in_place_edit::check_dropped(
        subject,
        &dropped,
        request.old_object,
        new_spec,
    ));
    // With inPlaceEdits: allow and no lookups nothing reads them: no diff.
    let changes = if lookups.is_some() || settings.in_place_edits != Action::Allow {
        in_place_edit::compared_changes(subject, &rules, old_spec, new_spec)
    } else {
        Vec::new()
    };
    let removed = removed_controllers(owners, request.object);
    let answer = if changes.is_empty() && removed.is_empty() {
        None
    } else {
        list_pools(settings, request, lookups, findings)
    };
    let pools = pools_in(answer.as_deref(), findings);
    // In use: referenced by a pool (lookups), else controlled by one.
    let referenced = pools.as_ref().map(|pools| {
        referencing(
            pools,
            &subject.group_kind,
            &subject.namespace,
            &subject.name,
        )
    });
    let in_use = match &referenced {
        Some(referenced) => referenced.iter().map(|(owner, _)| owner.clone()).collect(),
        None => owners.to_vec(),
    };
    // With lookups, what each pool's infrastructure does with the change.
    let infrastructure: Option<Vec<GroupKind>> = referenced.as_ref().map(|referenced| {
        referenced
            .iter()
            .map(|(_, pool)| pool.infrastructure())
            .collect()
    });
    if pools.is_some() && in_use.is_empty() && !owners.is_empty() {
        findings.extend(in_place_edit::check_rotated_out(subject, &changes));
    }
    if !in_use.is_empty() {
        findings.extend(check_removal(
            settings,
            &request.requester,
            request.namespace,
            &removed,
            || rotation_remediation(subject, &in_use, new_spec, &rules),
        ));
        // The topology controller's in-place patches (cluster-api #10496) and
        // every other controllerUsers write are judged too, and then allowed with
        // the changed paths in the audit log (rule 3, controller_writes::by_controller).
        findings.extend(in_place_edit::check(
            settings,
            subject,
            &in_use,
            &rules,
            &changes,
            new_spec,
            is_topology_owned(request.old_object),
            infrastructure.as_deref(),
        ));
    }
}

/// A DELETE: with the pool list, a config a live pool references; without it, what the
/// config's ownerReferences tell.
fn judge_delete(
    settings: &Settings,
    request: &Request,
    subject: &Subject,
    lookups: Option<&dyn Lookups>,
    findings: &mut Vec<Finding>,
) {
    let answer = list_pools(settings, request, lookups, findings);
    match pools_in(answer.as_deref(), findings) {
        Some(pools) => findings.extend(check_delete(
            settings,
            subject,
            &live_referencing_pools(&pools, subject),
        )),
        // Without an answer only the ownerReference tells, in use and rotated out alike.
        None => findings.extend(check_owned_delete(
            settings,
            &request.requester,
            subject,
            &config_owners(request.old_object),
        )),
    }
}

fn spec<'o, 'a>(object: Option<&'o Object<'a>>) -> Option<&'o Node<'a>> {
    object.and_then(|o| o.spec.as_ref())
}

fn status<'o, 'a>(object: Option<&'o Object<'a>>) -> Option<&'o Node<'a>> {
    object.and_then(|o| o.status.as_ref())
}

#[cfg(test)]
mod tests {
    use crate::engine::validate_payload;
    use crate::settings::{Action, Settings};
    use crate::verdict::{ReportedViolation, Verdict, CONTROLLER_WRITE_ANNOTATION};
    use crate::webhooks::fixtures::*;
    use rstest::rstest;
    use serde_json::{json, Value};

    #[test]
    fn the_rejection_message_names_paths_pool_and_rotation() {
        let old = config(
            "KubeadmConfig",
            "v1beta2",
            files("net.ipv4.ip_forward=1"),
            true,
        );
        let new = config(
            "KubeadmConfig",
            "v1beta2",
            files("net.ipv4.ip_forward=0"),
            true,
        );
        let verdict = run(json!({}), &update(&old, &new, "alice"));
        let name = crate::fingerprint::suggested_name(
            "worker-a",
            &crate::fingerprint::spec_fingerprint(
                new.get("spec"),
                &Settings::default().field_rules("KubeadmConfig"),
            ),
        );
        assert!(!verdict.allowed);
        assert_eq!(verdict.code, Some(403));
        assert_eq!(
            verdict.message.unwrap(),
            format!(
                "KubeadmConfig.bootstrap.cluster.x-k8s.io \"worker-a-0123abcd\" is invalid: \
                 [spec.files[1].content: Forbidden: changed]. The config is in use by MachinePool \
                 default/worker-a, and CAPI takes a bootstrap change only from a configRef \
                 rotation (cluster-api #8858). Whether existing instances are then replaced is the \
                 infrastructure provider's choice ({docs}). To rotate, create a new KubeadmConfig \
                 \"{name}\" in namespace default with the desired spec, then set \
                 spec.template.spec.bootstrap.configRef.name of MachinePool default/worker-a to \"{name}\"",
                docs = crate::capi::infrastructure::INFRASTRUCTURE_DOCS,
            )
        );
        assert!(verdict.warnings.is_empty());
    }

    /// The name the remediation proposes for `new`'s spec, as the message words it.
    fn proposed(new: &Value) -> String {
        crate::fingerprint::suggested_name(
            "worker-a",
            &crate::fingerprint::spec_fingerprint(
                new.get("spec"),
                &Settings::default().field_rules("KubeadmConfig"),
            ),
        )
    }

    fn reported(field: &str, detail: &str, action: Action) -> ReportedViolation {
        ReportedViolation {
            field: field.to_string(),
            detail: detail.to_string(),
            action,
        }
    }

    /// The violations and the suggested name as data, beside the message that words them.
    #[rstest]
    #[case::content_edit_rejected("reject", "alice", false, &[("spec.files[1].content", "Forbidden: changed", Action::Reject)], true)]
    #[case::content_edit_warned("warn", "alice", true, &[("spec.files[1].content", "Forbidden: changed", Action::Warn)], true)]
    #[case::content_edit_allowed("allow", "alice", true, &[], false)]
    #[case::exempt_user_keeps_what_was_found("reject", "admin", true, &[("spec.files[1].content", "Forbidden: changed", Action::Reject)], true)]
    #[case::strip_and_edit("reject", "strip", false, &[("metadata.ownerReferences", "Forbidden: removes the controller reference to MachinePool default/worker-a", Action::Reject), ("spec.files[1].content", "Forbidden: changed", Action::Reject)], true)]
    fn verdict_carries_violations_and_suggested_name(
        #[case] mode: &str,
        #[case] user: &str,
        #[case] allowed: bool,
        #[case] expected: &[(&str, &str, Action)],
        #[case] suggests: bool,
    ) {
        let old = config("KubeadmConfig", "v1beta2", files("x"), true);
        let mut new = config("KubeadmConfig", "v1beta2", files("y"), true);
        if user == "strip" {
            new = strip_owner(new);
        }
        let verdict = run(
            json!({"inPlaceEdits": mode, "exemptUsers": ["admin"]}),
            &update(&old, &new, user),
        );
        assert_eq!(verdict.allowed, allowed, "{verdict:?}");
        let expected: Vec<ReportedViolation> = expected
            .iter()
            .map(|(field, detail, action)| reported(field, detail, *action))
            .collect();
        assert_eq!(verdict.violations, expected);
        let name = proposed(&new);
        assert_eq!(verdict.suggested_name, suggests.then(|| name.clone()));
        if let (false, Some(message)) = (allowed, &verdict.message) {
            assert!(
                message.contains(&format!("create a new KubeadmConfig \"{name}\"")),
                "{message}"
            );
        }
        // The AdmissionResponse has no place for them: they are in its message only.
        let response = serde_json::to_value(verdict.into_response()).unwrap();
        assert!(response.get("violations").is_none() && response.get("suggested_name").is_none());
    }

    #[test]
    fn allowed_without_findings_carries_no_violations() {
        let old = config("KubeadmConfig", "v1beta2", files("x"), true);
        let mut new = old.clone();
        new["spec"]["joinConfiguration"]["discovery"]["bootstrapToken"]["token"] =
            json!("ghijkl.0123456789abcdef");
        let verdict = run(json!({}), &update(&old, &new, "alice"));
        assert!(verdict.allowed);
        assert!(verdict.violations.is_empty());
        assert_eq!(verdict.suggested_name, None);
    }

    /// Every kind of the provider records, in its record's group, in both versions.
    #[rstest]
    fn every_default_kind_and_version(#[values("v1beta1", "v1beta2")] version: &str) {
        for p in crate::capi::providers::PROVIDERS {
            an_edit_is_refused(p.group, p.config_kind, version);
        }
    }

    fn an_edit_is_refused(group: &str, kind: &str, version: &str) {
        let old = config(
            kind,
            version,
            json!({"files": [{"path": "/a", "content": "x"}]}),
            true,
        );
        let new = config(
            kind,
            version,
            json!({"files": [{"path": "/a", "content": "y"}]}),
            true,
        );
        let verdict = run(json!({}), &update(&old, &new, "alice"));
        assert!(!verdict.allowed, "{kind}.{group}");
        let message = verdict.message.unwrap();
        assert!(message.starts_with(&format!("{kind}.{group} \"worker-a-0123abcd\" is invalid: [spec.files[0].content: Forbidden: changed]")), "{message}");
        // Not in use: allowed.
        let old = config(kind, version, json!({"files": []}), false);
        assert!(run(json!({}), &update(&old, &new, "alice")).allowed);
    }

    #[rstest]
    #[case::token_rotation_v1beta2("v1beta2", KUBEADM_BOOTSTRAP)]
    #[case::token_rotation_v1beta1("v1beta1", KUBEADM_BOOTSTRAP)]
    #[case::token_by_anyone("v1beta2", "alice")]
    fn token_rotation_is_allowed(#[case] version: &str, #[case] user: &str) {
        let old = config("KubeadmConfig", version, files("x"), true);
        let mut new = old.clone();
        new["spec"]["joinConfiguration"]["discovery"]["bootstrapToken"]["token"] =
            json!("ghijkl.0123456789abcdef");
        new["metadata"]["generation"] = json!(4);
        assert_eq!(run(json!({}), &update(&old, &new, user)), Verdict::accept());
    }

    #[rstest]
    #[case::reject("reject", false, 0)]
    #[case::warn("warn", true, 1)]
    #[case::allow("allow", true, 0)]
    fn in_place_edits_setting(#[case] mode: &str, #[case] allowed: bool, #[case] warnings: usize) {
        let old = config("KubeadmConfig", "v1beta2", files("x"), true);
        let new = config("KubeadmConfig", "v1beta2", files("y"), true);
        let verdict = run(json!({"inPlaceEdits": mode}), &update(&old, &new, "alice"));
        assert_eq!(
            (verdict.allowed, verdict.warnings.len()),
            (allowed, warnings)
        );
        if warnings == 1 {
            assert_eq!(
                verdict.warnings[0],
                "spec.files[1].content edited in place, not recorded in MachinePool default/worker-a; rotate configRef"
            );
        }
    }

    #[test]
    fn metadata_only_changes_are_allowed() {
        let old = config("KubeadmConfig", "v1beta2", files("x"), true);
        let mut new = old.clone();
        new["metadata"]["labels"]["team"] = json!("payments");
        new["metadata"]["annotations"] = json!({"note": "x"});
        assert_eq!(
            run(json!({}), &update(&old, &new, "alice")),
            Verdict::accept()
        );
    }

    #[rstest]
    #[case::user_strips("alice", false, &["metadata.ownerReferences: Forbidden: removes the controller reference to MachinePool default/worker-a"])]
    #[case::user_demotes_to_non_controller("alice-demote", false, &["metadata.ownerReferences: Forbidden: removes the controller reference to MachinePool default/worker-a"])]
    #[case::garbage_collector("system:serviceaccount:kube-system:generic-garbage-collector", true, &[])]
    #[case::capi_manager(CAPI_MANAGER, true, &[])]
    fn ownership_laundering(#[case] user: &str, #[case] allowed: bool, #[case] fragments: &[&str]) {
        let old = config("KubeadmConfig", "v1beta2", files("x"), true);
        let new = if user == "alice-demote" {
            let mut new = old.clone();
            new["metadata"]["ownerReferences"][0]["controller"] = json!(false);
            new
        } else {
            strip_owner(old.clone())
        };
        let verdict = run(json!({}), &update(&old, &new, user));
        assert_eq!(verdict.allowed, allowed);
        for fragment in fragments {
            assert!(verdict.message.as_deref().unwrap().contains(fragment));
        }
    }

    #[test]
    fn strip_and_edit_at_once_is_judged_on_the_old_object() {
        let old = config("KubeadmConfig", "v1beta2", files("x"), true);
        let new = strip_owner(config("KubeadmConfig", "v1beta2", files("y"), true));
        let message = run(json!({}), &update(&old, &new, "alice"))
            .message
            .unwrap();
        assert!(message.contains(
            "is invalid: [metadata.ownerReferences: Forbidden: removes the controller reference to \
             MachinePool default/worker-a, spec.files[1].content: Forbidden: changed]"
        ), "{message}");
    }

    #[test]
    fn ownerref_moved_to_another_pool_is_a_removal() {
        let old = config("KubeadmConfig", "v1beta2", files("x"), true);
        let mut new = old.clone();
        new["metadata"]["ownerReferences"][0]["uid"] = json!("another-uid");
        new["metadata"]["ownerReferences"][0]["name"] = json!("worker-b");
        assert!(!run(json!({}), &update(&old, &new, "alice")).allowed);
    }

    #[test]
    fn spec_smuggled_into_a_status_update_is_judged() {
        let old = config("KubeadmConfig", "v1beta2", files("x"), true);
        let mut new = config("KubeadmConfig", "v1beta2", files("y"), true);
        new["status"] = json!({"initialization": {"dataSecretCreated": true}, "dataSecretName": "worker-a-0123abcd"});
        let mut req = update(&old, &new, "alice");
        req["subResource"] = json!("status");
        let verdict = run(json!({}), &req);
        assert!(!verdict.allowed);
        assert!(verdict.warnings.is_empty());
    }

    #[rstest]
    #[case::v1beta2_created("v1beta2", json!({"initialization": {"dataSecretCreated": true}}), "status.dataSecretName missing while status.initialization.dataSecretCreated is true (bootstrap contract)")]
    #[case::v1beta1_ready("v1beta1", json!({"ready": true}), "status.dataSecretName missing while status.ready is true (bootstrap contract)")]
    fn status_contract(#[case] version: &str, #[case] status: Value, #[case] warning: &str) {
        let old = config("KubeadmConfig", version, files("x"), true);
        let mut new = old.clone();
        new["status"] = status;
        // A provider this policy does not know the controller of: flagged to it.
        let mut req = update(&old, &new, EXAMPLE_BOOTSTRAP);
        req["subResource"] = json!("status");
        let verdict = run(json!({}), &req);
        assert!(verdict.allowed);
        assert_eq!(verdict.warnings, [warning]);
        let verdict = run(json!({"contractViolations": "reject"}), &req);
        assert!(verdict
            .message
            .unwrap()
            .contains("[status.dataSecretName: Required: "));
        // CABPK itself (a controllerUsers identity): never refused, the finding audited.
        req["userInfo"]["username"] = json!(KUBEADM_BOOTSTRAP);
        let verdict = run(json!({"contractViolations": "reject"}), &req);
        assert!(
            verdict.allowed && verdict.warnings.is_empty(),
            "{verdict:?}"
        );
        assert!(verdict.audit_annotations[CONTROLLER_WRITE_ANNOTATION]
            .contains("would have rejected: [status.dataSecretName: Required: "));
        // Unchanged status on a main-resource update is not flagged again.
        let mut later = new.clone();
        later["metadata"]["labels"]["x"] = json!("y");
        assert!(
            run(
                json!({"contractViolations": "reject"}),
                &update(&new, &later, "alice")
            )
            .allowed
        );
    }

    #[rstest]
    #[case::spec_a_string(json!("not an object"), "[spec: Forbidden: changed]")]
    #[case::spec_a_list(json!([1, 2]), "[spec: Forbidden: changed]")]
    #[case::spec_null(json!(null), "[spec.files: Forbidden: removed, spec.joinConfiguration")]
    fn odd_specs_get_a_clear_answer(#[case] spec: Value, #[case] fragment: &str) {
        let old = config("KubeadmConfig", "v1beta2", files("x"), true);
        let mut new = old.clone();
        new["spec"] = spec;
        let verdict = run(json!({}), &update(&old, &new, "alice"));
        assert!(
            verdict.message.as_deref().unwrap().contains(fragment),
            "{verdict:?}"
        );
    }

    #[test]
    fn deep_and_huge_objects_do_not_crash() {
        // Nesting beyond serde_json's limit of 128 is refused while parsing.
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let payload = format!(
            r#"{{"request": {{"kind": {{"group": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig"}}, "operation": "CREATE", "object": {{"spec": {deep}}}}}}}"#
        );
        let verdict = validate_payload(payload.as_bytes());
        assert_eq!(verdict.code, Some(400));
        assert!(verdict
            .message
            .unwrap()
            .contains("recursion limit exceeded"));
        // 120 levels (just inside the limit) and 2 MB of files are judged normally.
        let mut nested = json!("leaf");
        for _ in 0..120 {
            nested = json!({"n": nested});
        }
        let big: Vec<Value> = (0..200)
            .map(|i| json!({"path": format!("/f{i}"), "content": "x".repeat(10_000)}))
            .collect();
        let old = config(
            "KubeadmConfig",
            "v1beta2",
            json!({"files": big, "x": nested}),
            true,
        );
        let mut new = old.clone();
        new["spec"]["files"][199]["content"] = json!("y");
        let verdict = run(json!({}), &update(&old, &new, "alice"));
        assert!(verdict
            .message
            .unwrap()
            .contains("[spec.files[199].content: Forbidden: changed]"));
    }

    #[rstest]
    #[case::delete_of_a_config_no_pool_owns("DELETE", false)]
    #[case::connect("CONNECT", true)]
    fn accepted_silently_without_lookups(#[case] operation: &str, #[case] owned: bool) {
        let old = config("KubeadmConfig", "v1beta2", files("x"), owned);
        assert_eq!(
            run(json!({}), &request(operation, None, Some(&old), "alice")),
            Verdict::accept()
        );
    }

    const OWNED_DELETE: &str = "MachinePool worker-a owns it: a same-name re-create is no \
        rotation; rotate configRef (contextAware: true refuses)";

    /// The DELETE half of `kubectl replace --force` of a config in use, without
    /// lookups: what each requester gets under each `deleteOwnedConfigs`.
    #[rstest]
    #[case::person_warned_by_default(json!({}), "alice", true, &[OWNED_DELETE], None)]
    #[case::person_warned(json!({"deleteOwnedConfigs": "warn"}), "alice", true, &[OWNED_DELETE], None)]
    #[case::person_refused(json!({"deleteOwnedConfigs": "reject"}), "alice", false, &[], None)]
    #[case::person_allowed(json!({"deleteOwnedConfigs": "allow"}), "alice", true, &[], None)]
    #[case::in_place_edits_allow_changes_nothing(json!({"inPlaceEdits": "allow"}), "alice", true, &[OWNED_DELETE], None)]
    #[case::exempt_user(json!({"deleteOwnedConfigs": "reject", "exemptUsers": ["admin"]}), "admin", true, &[], Some(("exemption", "allowed because user \"admin\" is in exemptUsers; would have rejected: KubeadmConfig.bootstrap.cluster.x-k8s.io \"worker-a-0123abcd\" is invalid: [metadata.ownerReferences: Forbidden: owned by MachinePool default/worker-a]. Without lookups")))]
    #[case::garbage_collector(json!({"deleteOwnedConfigs": "reject"}), "system:serviceaccount:kube-system:generic-garbage-collector", true, &[], None)]
    #[case::namespace_controller(json!({"deleteOwnedConfigs": "reject"}), "system:serviceaccount:kube-system:namespace-controller", true, &[], None)]
    #[case::capi_manager(json!({"deleteOwnedConfigs": "reject"}), CAPI_MANAGER, true, &[], None)]
    fn deleting_an_owned_config_without_lookups(
        #[case] settings: Value,
        #[case] user: &str,
        #[case] allowed: bool,
        #[case] warnings: &[&str],
        #[case] audited: Option<(&str, &str)>,
    ) {
        let old = config("KubeadmConfig", "v1beta2", files("x"), true);
        let verdict = run(settings, &request("DELETE", None, Some(&old), user));
        assert_eq!(verdict.allowed, allowed, "{verdict:?}");
        assert_eq!(verdict.warnings, warnings);
        match audited {
            Some((key, fragment)) => assert!(
                verdict.audit_annotations[key].starts_with(fragment),
                "{:?}",
                verdict.audit_annotations
            ),
            // CAPI's machinery and the cleanup controllers leave no trace either.
            None => assert!(verdict.audit_annotations.is_empty(), "{verdict:?}"),
        }
        if !allowed {
            assert_eq!(verdict.code, Some(403));
            let message = verdict.message.unwrap();
            assert!(
                message.starts_with(
                    "KubeadmConfig.bootstrap.cluster.x-k8s.io \"worker-a-0123abcd\" is invalid: \
                 [metadata.ownerReferences: Forbidden: owned by MachinePool default/worker-a]. \
                 Without lookups the policy cannot tell whether it is still in use or rotated out"
                ),
                "{message}"
            );
            assert!(message.contains("create a new KubeadmConfig under another name and set spec.template.spec.bootstrap.configRef.name of MachinePool default/worker-a to it"), "{message}");
        }
    }

    #[rstest]
    #[case::default_mode(json!({}))]
    #[case::reject_mode(json!({"deleteOwnedConfigs": "reject"}))]
    fn a_delete_for_move_is_unchanged(#[case] settings: Value) {
        let mut old = config("KubeadmConfig", "v1beta2", files("x"), true);
        old["metadata"]["annotations"] = json!({"clusterctl.cluster.x-k8s.io/delete-for-move": ""});
        let verdict = run(settings, &request("DELETE", None, Some(&old), "alice"));
        assert!(
            verdict.allowed && verdict.warnings.is_empty(),
            "{verdict:?}"
        );
        assert!(verdict.audit_annotations.contains_key("delete-for-move"));
    }

    #[test]
    fn a_dry_run_delete_gets_the_same_warning() {
        let old = config("KubeadmConfig", "v1beta2", files("x"), true);
        let mut req = request("DELETE", None, Some(&old), "alice");
        req["dryRun"] = json!(true);
        assert_eq!(run(json!({}), &req).warnings, [OWNED_DELETE]);
    }
}
