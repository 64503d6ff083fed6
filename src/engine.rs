//! The policy as a pure function: (settings, AdmissionRequest, lookups) -> verdict. No host
//! calls, so it runs the same natively (tests, benchmarks, tools) and inside the wasm module;
//! lookups, used only in the context-aware mode, come through the [`Lookups`] trait.

use serde_json::Value;

use crate::capi::kinds::{is_machine_pool, is_machine_template_consumer, MACHINE_POOL};
use crate::lookups::{
    consumers_in, consuming_data_secret, is_being_deleted, machine_pools, referencing, Consumer,
    Lookups, NoLookups,
};
use crate::reader::json::{read_document, serde_message, Invalid, Node, Read, Reader};
use crate::reader::object::Object;
use crate::reader::request::{Operation, Request, RequestDoc};
use crate::rules::contract::check_config_status;
use crate::rules::delete_and_move;
use crate::rules::in_place_edit::{self, rotation_remediation};
use crate::rules::ownership::{
    check_removal, machine_pool_controllers, removed_controllers, Owner,
};
use crate::rules::rotation;
use crate::settings::{Action, Settings};
use crate::verdict::{Finding, Subject, Verdict};
use crate::webhooks::bootstrap_template;

/// The `validate` entry point without lookups.
pub fn validate_payload(payload: &[u8]) -> Verdict {
    validate_payload_with(payload, &NoLookups)
}

/// `{"request": ..., "settings": ...}` as far as it is read: the settings as written (they are
/// small and read as a `Value`), the request typed. `None`: the payload is no object.
struct Payload<'a> {
    settings: Option<&'a str>,
    request: Option<RequestDoc<'a>>,
}

fn read_payload<'a>(r: &mut Reader<'a>) -> Read<Option<Payload<'a>>> {
    let mut payload = Payload {
        settings: None,
        request: None,
    };
    let is_object = r.read_object_or_skip(|r, key| {
        if key.is("settings") {
            payload.settings = Some(r.read_raw()?);
        } else if key.is("request") {
            payload.request = Some(RequestDoc::read(r)?);
        } else {
            r.skip()?;
        }
        Ok(())
    })?;
    Ok(is_object.then_some(payload))
}

/// The `validate` entry point: reads `{"request": ..., "settings": ...}`. The payload is read
/// once, straight from its bytes, as far as the rules read it (see [`crate::reader::json`]); a payload
/// it refuses gets serde_json's message.
pub fn validate_payload_with(payload: &[u8], lookups: &dyn Lookups) -> Verdict {
    let read = read_document(payload, read_payload).and_then(|fields| {
        let settings = match fields.as_ref().and_then(|f| f.settings) {
            Some(raw) => serde_json::from_str(raw).map_err(|_| Invalid("settings"))?,
            None => Value::Null,
        };
        Ok((fields, settings))
    });
    let (fields, settings) = match read {
        Ok(read) => read,
        Err(_) => {
            return Verdict::bad_request(format!(
                "cannot read the validation payload: {}",
                serde_message(payload)
            ))
        }
    };
    let Some(fields) = fields else {
        return Verdict::bad_request("the validation payload must be a JSON object");
    };
    let settings = match Settings::from_value(&settings) {
        Ok(s) => s,
        Err(e) => return Verdict::bad_request(format!("invalid settings: {e}")),
    };
    match &fields.request {
        Some(request) => evaluate_request(&settings, request, lookups),
        None => Verdict::bad_request("the validation payload has no request"),
    }
}

/// Judges one AdmissionRequest without lookups.
pub fn evaluate(settings: &Settings, request: &Value) -> Verdict {
    evaluate_with(settings, request, &NoLookups)
}

/// Judges one AdmissionRequest given as a `Value` (tests, tools); `lookups` is asked only when
/// `settings.context_aware`. It is read as the payload's request is.
pub fn evaluate_with(settings: &Settings, request: &Value, lookups: &dyn Lookups) -> Verdict {
    let json = serde_json::to_vec(request).unwrap_or_default();
    match read_document(&json, RequestDoc::read) {
        Ok(doc) => evaluate_request(settings, &doc, lookups),
        Err(_) => {
            Verdict::bad_request(format!("cannot read the request: {}", serde_message(&json)))
        }
    }
}

/// Judges one AdmissionRequest as read from its payload.
pub fn evaluate_request(settings: &Settings, doc: &RequestDoc, lookups: &dyn Lookups) -> Verdict {
    let (group_kind, version) = match doc.kind_of() {
        Ok(kind) => kind,
        Err(e) => return Verdict::bad_request(e),
    };
    let (group, kind) = (&*group_kind.group, &*group_kind.kind);
    let ours = is_machine_pool(group, kind)
        || is_machine_template_consumer(group, kind)
        || settings.is_bootstrap_config(group, kind)
        || settings.is_bootstrap_template(group, kind);
    if !ours {
        return Verdict::accept();
    }
    let request = match Request::parse(doc, group_kind.clone(), &version) {
        Ok(r) => r,
        Err(e) => return Verdict::bad_request(e),
    };
    let subject = Subject {
        group_kind: request.group_kind.clone(),
        namespace: request.namespace.to_string(),
        name: request.name.to_string(),
    };
    // clusterctl move deletes configs and templates still referenced (clusterctl_move.rs).
    if request.operation == Operation::Delete
        && (settings.is_bootstrap_config(group, kind)
            || settings.is_bootstrap_template(group, kind))
        && delete_and_move::is_delete_for_move(request.old_object)
    {
        let mut verdict = Verdict::accept();
        verdict.audit_annotations.insert(
            delete_and_move::DELETE_FOR_MOVE_ANNOTATION.to_string(),
            format!(
                "allowed: the stored object carries {} (clusterctl move deletes it from the source cluster)",
                delete_and_move::DELETE_FOR_MOVE
            ),
        );
        return verdict;
    }
    let lookups = settings.context_aware.then_some(lookups);
    let findings = if is_machine_pool(group, kind) || is_machine_template_consumer(group, kind) {
        // Rotation targets are looked up for MachinePools (configs) only.
        let lookups = lookups.filter(|_| is_machine_pool(group, kind));
        match machine_pool(settings, &request, lookups) {
            Ok(findings) => findings,
            Err(e) => {
                return Verdict::bad_request(format!(
                    "{} {:?}: {e}",
                    group_kind.qualified(),
                    request.name
                ))
            }
        }
    } else if settings.is_bootstrap_template(group, kind) {
        bootstrap_template::check(settings, &request, &subject, lookups)
    } else {
        bootstrap_config(settings, &request, &subject, lookups)
    };
    let verdict = Verdict::from_findings(&subject, &findings);
    if request.requester.is_controller(settings) {
        return verdict.by_controller(request.requester.username);
    }
    match request.requester.exemption(settings) {
        Some(reason) => verdict.exempt(&reason),
        None => verdict,
    }
}

fn machine_pool(
    settings: &Settings,
    request: &Request,
    lookups: Option<&dyn Lookups>,
) -> Result<Vec<Finding>, String> {
    match (request.operation, request.sub_resource) {
        (Operation::Create | Operation::Update, "") => rotation::check(settings, request, lookups),
        _ => Ok(Vec::new()),
    }
}

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

/// The pools whose current configRef names the subject (`live_only`: not being deleted).
fn referencing_pools(pools: &[Consumer], subject: &Subject, live_only: bool) -> Vec<Owner> {
    referencing(
        pools,
        &subject.group_kind,
        &subject.namespace,
        &subject.name,
    )
    .into_iter()
    .filter(|(_, pool)| !live_only || !is_being_deleted(pool))
    .map(|(owner, _)| owner)
    .collect()
}

/// A request on a bootstrap config. Lookups are lazy: the pool list is asked for only when its
/// answer can change the verdict (a CREATE, which may reuse a consumed name; a DELETE; an
/// UPDATE with a compared spec change or an ownerReference removal). CAPI's frequent writes
/// (token rotation, fill-once fields, status, labels) make no host call.
fn bootstrap_config(
    settings: &Settings,
    request: &Request,
    subject: &Subject,
    lookups: Option<&dyn Lookups>,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    match request.operation {
        Operation::Create => {
            findings.extend(check_config_status(settings, status(request.object)));
            // A config created with its pool's ownerReference is one moved or restored, not a
            // new one under a consumed name (clusterctl_move.rs).
            if !delete_and_move::is_moved_or_restored(request.object) {
                let answer = list_pools(settings, request, lookups, &mut findings);
                if let Some(pools) = pools_in(answer.as_deref(), &mut findings) {
                    let consumers = consuming_data_secret(&pools, &subject.name);
                    findings.extend(in_place_edit::check_recreate(subject, &consumers));
                }
            }
        }
        Operation::Update => {
            let (old_spec, new_spec) = (spec(request.old_object), spec(request.object));
            let owners = machine_pool_controllers(request.old_object);
            // Without lookups only a config a MachinePool controls can be in use.
            if lookups.is_some() || !owners.is_empty() {
                // The kind's non-compared fields and the compared changes, once per request
                // (parsing the rules is a visible share of the token rotation CAPI writes
                // every ~7.5 minutes).
                let rules = settings.field_rules(&subject.group_kind.kind);
                // With inPlaceEdits: allow and no lookups nothing reads them: no diff.
                let changes = if lookups.is_some() || settings.in_place_edits != Action::Ignore {
                    in_place_edit::compared_changes(subject, &rules, old_spec, new_spec)
                } else {
                    Vec::new()
                };
                let removed = removed_controllers(&owners, request.object);
                let answer = if changes.is_empty() && removed.is_empty() {
                    None
                } else {
                    list_pools(settings, request, lookups, &mut findings)
                };
                let pools = pools_in(answer.as_deref(), &mut findings);
                // In use: referenced by a pool (lookups), else controlled by one.
                let in_use = match &pools {
                    Some(pools) => referencing_pools(pools, subject, false),
                    None => owners.clone(),
                };
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
                    // the changed paths in the audit log (Verdict::by_controller).
                    findings.extend(in_place_edit::check(
                        settings, subject, &in_use, &rules, &changes, new_spec,
                    ));
                }
            }
            if status(request.object) != status(request.old_object) {
                findings.extend(check_config_status(settings, status(request.object)));
            }
        }
        Operation::Delete => {
            // Without lookups nothing tells a referenced config from a rotated-out one.
            let answer = list_pools(settings, request, lookups, &mut findings);
            if let Some(pools) = pools_in(answer.as_deref(), &mut findings) {
                findings.extend(in_place_edit::check_delete(
                    settings,
                    subject,
                    &referencing_pools(&pools, subject, true),
                ));
            }
        }
        Operation::Connect => {}
    }
    findings
}

fn spec<'o, 'a>(object: Option<&'o Object<'a>>) -> Option<&'o Node<'a>> {
    object.and_then(|o| o.spec.as_ref())
}

fn status<'o, 'a>(object: Option<&'o Object<'a>>) -> Option<&'o Node<'a>> {
    object.and_then(|o| o.status.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capi::provider_writes::DEFAULT_CONTROLLER_USERS;
    use crate::settings::Action;
    use crate::verdict::{ReportedViolation, CONTROLLER_WRITE_ANNOTATION};
    use rstest::rstest;
    use serde_json::json;

    const POOL_UID: &str = "6f1c2f7e-8a53-4c1b-9d8e-0b6f4a1e2c3d";
    const KUBEADM_BOOTSTRAP: &str =
        "system:serviceaccount:capi-kubeadm-bootstrap-system:capi-kubeadm-bootstrap-manager";
    const CAPI_MANAGER: &str = "system:serviceaccount:capi-system:capi-manager";
    /// A third-party provider's controller, not in the default controllerUsers.
    const ACME_BOOTSTRAP: &str = "system:serviceaccount:acme-system:acme-bootstrap-manager";

    fn owner_ref(version: &str) -> Value {
        json!({"apiVersion": format!("cluster.x-k8s.io/{version}"), "kind": "MachinePool",
               "name": "worker-a", "uid": POOL_UID, "controller": true, "blockOwnerDeletion": true})
    }

    /// A bootstrap config as stored: labels, the pool's controller reference when `owned`.
    fn config(kind: &str, version: &str, spec: Value, owned: bool) -> Value {
        let mut object = json!({
            "apiVersion": format!("bootstrap.cluster.x-k8s.io/{version}"),
            "kind": kind,
            "metadata": {"name": "worker-a-0123abcd", "namespace": "default", "generation": 3,
                         "uid": "0d5c7f8e-1111-4222-8333-444455556666",
                         "labels": {"cluster.x-k8s.io/cluster-name": "prod"}},
            "spec": spec,
        });
        if owned {
            object["metadata"]["ownerReferences"] = json!([owner_ref("v1beta2")]);
        }
        object
    }

    fn files(content: &str) -> Value {
        json!({"files": [{"path": "/etc/motd", "content": "hello"}, {"path": "/etc/sysctl.d/90-k8s.conf", "content": content}],
               "joinConfiguration": {"discovery": {"bootstrapToken": {"token": "abcdef.0123456789abcdef", "apiServerEndpoint": "10.0.0.1:6443"}}}})
    }

    fn request(operation: &str, object: Option<&Value>, old: Option<&Value>, user: &str) -> Value {
        let any = object.or(old).unwrap();
        let api_version = any["apiVersion"].as_str().unwrap();
        let (group, version) = api_version.split_once('/').unwrap();
        let mut request = json!({
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": group, "version": version, "kind": any["kind"]},
            "resource": {"group": group, "version": version, "resource": "x"},
            "operation": operation,
            "namespace": "default",
            "name": any["metadata"]["name"],
            "userInfo": {"username": user, "groups": ["system:authenticated"]},
        });
        if let Some(o) = object {
            request["object"] = o.clone();
        }
        if let Some(o) = old {
            request["oldObject"] = o.clone();
        }
        request
    }

    fn update(old: &Value, new: &Value, user: &str) -> Value {
        request("UPDATE", Some(new), Some(old), user)
    }

    fn run(settings: Value, request: &Value) -> Verdict {
        evaluate(&Settings::from_value(&settings).unwrap(), request)
    }

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
                 default/worker-a, and CAPI does not roll in-place bootstrap edits out to existing \
                 instances (cluster-api #8858). To roll a change out, create a new KubeadmConfig \
                 \"{name}\" in namespace default with the desired spec, then set \
                 spec.template.spec.bootstrap.configRef.name of MachinePool default/worker-a to \"{name}\""
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

    #[rstest]
    fn every_default_kind_and_version(
        #[values(
            "KubeadmConfig",
            "EKSConfig",
            "NodeadmConfig",
            "RKE2Config",
            "K0sWorkerConfig",
            "KThreesConfig",
            "MicroK8sConfig",
            "TalosConfig"
        )]
        kind: &str,
        #[values("v1beta1", "v1beta2")] version: &str,
    ) {
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
        assert!(!verdict.allowed);
        let message = verdict.message.unwrap();
        assert!(message.starts_with(&format!("{kind}.bootstrap.cluster.x-k8s.io \"worker-a-0123abcd\" is invalid: [spec.files[0].content: Forbidden: changed]")), "{message}");
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
                "spec.files[1].content edited in place: not rolled out to MachinePool default/worker-a; rotate configRef"
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

    fn topology(mut object: Value) -> Value {
        object["metadata"]["labels"]["topology.cluster.x-k8s.io/owned"] = json!("");
        object
    }

    #[rstest]
    #[case::controller_patches_topology_config(true, true, CAPI_MANAGER, true)]
    #[case::someone_else_on_topology_config(true, true, "alice", false)]
    // controllerUsers are never refused, label or not (audited: controller_writes_are_audited).
    #[case::controller_on_plain_config(false, false, CAPI_MANAGER, true)]
    #[case::label_borrowed_in_the_same_request(false, true, "alice", false)]
    #[case::label_added_by_the_controller_itself(false, true, CAPI_MANAGER, true)]
    fn clusterclass_topology(
        #[case] old_label: bool,
        #[case] new_label: bool,
        #[case] user: &str,
        #[case] allowed: bool,
    ) {
        let label = |o: Value, yes: bool| if yes { topology(o) } else { o };
        let old = label(
            config("KubeadmConfig", "v1beta2", files("x"), true),
            old_label,
        );
        let new = label(
            config("KubeadmConfig", "v1beta2", files("y"), true),
            new_label,
        );
        assert_eq!(run(json!({}), &update(&old, &new, user)).allowed, allowed);
    }

    /// Every default controller identity (CAPI core and each default kind's provider, as
    /// clusterctl installs them: provider_writes::DEFAULT_CONTROLLER_USERS) may change a config
    /// in use in place: allowed, no warning, the changed paths in the audit log. The same
    /// request from a person is refused with the same paths.
    #[rstest]
    fn controller_writes_are_audited_never_refused(
        #[values(0, 1, 2, 3, 4, 5, 6, 7)] index: usize,
        #[values("KubeadmConfig", "RKE2Config")] kind: &str,
    ) {
        let controller = DEFAULT_CONTROLLER_USERS[index];
        let old = config(kind, "v1beta2", files("x"), true);
        let new = config(kind, "v1beta2", files("y"), true);
        let verdict = run(json!({}), &update(&old, &new, controller));
        assert!(verdict.allowed, "{controller}: {verdict:?}");
        assert!(verdict.warnings.is_empty());
        assert_eq!(verdict.message, None);
        assert_eq!(
            verdict.audit_annotations[CONTROLLER_WRITE_ANNOTATION],
            format!(
                "allowed because {controller:?} is in controllerUsers; would have rejected: \
                 [spec.files[1].content: Forbidden: changed]"
            )
        );
        let person = run(json!({}), &update(&old, &new, "alice"));
        assert!(!person.allowed);
        assert!(person
            .message
            .unwrap()
            .contains("[spec.files[1].content: Forbidden: changed]"));
        assert!(person.audit_annotations.is_empty());
    }

    #[rstest]
    #[case::warn_mode(json!({"inPlaceEdits": "warn"}), "would have warned: [spec.files[1].content: Forbidden: changed]")]
    #[case::allow_mode_finds_nothing(json!({"inPlaceEdits": "allow"}), "")]
    fn controller_writes_never_warn(#[case] settings: Value, #[case] audited: &str) {
        let old = config("KubeadmConfig", "v1beta2", files("x"), true);
        let new = config("KubeadmConfig", "v1beta2", files("y"), true);
        let verdict = run(settings, &update(&old, &new, KUBEADM_BOOTSTRAP));
        assert!(verdict.allowed);
        assert!(verdict.warnings.is_empty(), "{:?}", verdict.warnings);
        let annotation = verdict.audit_annotations.get(CONTROLLER_WRITE_ANNOTATION);
        match audited {
            "" => assert_eq!(annotation, None),
            fragment => assert!(annotation.unwrap().ends_with(fragment), "{annotation:?}"),
        }
    }

    #[test]
    fn a_controller_token_rotation_leaves_no_trace() {
        let old = config("KubeadmConfig", "v1beta2", files("x"), true);
        let mut new = old.clone();
        new["spec"]["joinConfiguration"]["discovery"]["bootstrapToken"]["token"] =
            json!("ghijkl.0123456789abcdef");
        assert_eq!(
            run(json!({}), &update(&old, &new, KUBEADM_BOOTSTRAP)),
            Verdict::accept()
        );
    }

    #[test]
    fn controller_users_setting_names_the_topology_controller() {
        let old = topology(config("KubeadmConfig", "v1beta2", files("x"), true));
        let new = topology(config("KubeadmConfig", "v1beta2", files("y"), true));
        let settings = json!({"controllerUsers": ["system:serviceaccount:capi:manager"]});
        assert!(
            run(
                settings.clone(),
                &update(&old, &new, "system:serviceaccount:capi:manager")
            )
            .allowed
        );
        assert!(!run(settings, &update(&old, &new, CAPI_MANAGER)).allowed);
    }

    fn strip_owner(mut object: Value) -> Value {
        object["metadata"]["ownerReferences"] = json!([]);
        object
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

    #[rstest]
    #[case::user("alice", Some("user \"alice\" is in exemptUsers"))]
    #[case::group("bob", Some("user \"bob\" is in exempt group \"platform-admins\""))]
    #[case::prefix("alice2", None)]
    #[case::case_changed("ALICE", None)]
    fn exemptions(#[case] user: &str, #[case] reason: Option<&str>) {
        let old = config("KubeadmConfig", "v1beta2", files("x"), true);
        let new = config("KubeadmConfig", "v1beta2", files("y"), true);
        let mut req = update(&old, &new, user);
        if user == "bob" {
            req["userInfo"]["groups"] = json!(["platform-admins"]);
        }
        let verdict = run(
            json!({"exemptUsers": ["alice"], "exemptGroups": ["platform-admins"]}),
            &req,
        );
        assert_eq!(verdict.allowed, reason.is_some());
        if let Some(reason) = reason {
            let note = &verdict.audit_annotations[crate::verdict::EXEMPTION_ANNOTATION];
            assert!(note.starts_with(&format!("allowed because {reason}; would have rejected: KubeadmConfig.bootstrap.cluster.x-k8s.io \"worker-a-0123abcd\" is invalid: [spec.files[1].content")), "{note}");
        }
    }

    #[test]
    fn dry_run_gets_the_real_verdict() {
        let old = config("KubeadmConfig", "v1beta2", files("x"), true);
        let new = config("KubeadmConfig", "v1beta2", files("y"), true);
        let mut req = update(&old, &new, "alice");
        req["dryRun"] = json!(true);
        assert!(!run(json!({}), &req).allowed);
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
        let mut req = update(&old, &new, ACME_BOOTSTRAP);
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

    fn pool(version: &str, config_ref: Option<Value>) -> Value {
        let mut bootstrap = json!({});
        if let Some(r) = config_ref {
            bootstrap["configRef"] = r;
        }
        json!({"apiVersion": format!("cluster.x-k8s.io/{version}"), "kind": "MachinePool",
               "metadata": {"name": "worker-a", "namespace": "default", "uid": POOL_UID},
               "spec": {"clusterName": "prod", "replicas": 3,
                        "template": {"spec": {"clusterName": "prod", "bootstrap": bootstrap}}}})
    }

    fn v1beta1_ref(api_version: &str, kind: &str, name: &str) -> Value {
        json!({"apiVersion": api_version, "kind": kind, "name": name, "namespace": "default"})
    }

    fn v1beta2_ref(kind: &str, name: &str) -> Value {
        json!({"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": kind, "name": name})
    }

    const B1: &str = "bootstrap.cluster.x-k8s.io/v1beta1";
    const B2: &str = "bootstrap.cluster.x-k8s.io/v1beta2";

    #[rstest]
    #[case::v1beta2_rotation("v1beta2", Some(v1beta2_ref("KubeadmConfig", "a-1")), Some(v1beta2_ref("KubeadmConfig", "a-2")), true, &[])]
    #[case::v1beta1_rotation("v1beta1", Some(v1beta1_ref(B1, "KubeadmConfig", "a-1")), Some(v1beta1_ref(B1, "KubeadmConfig", "a-2")), true, &[])]
    #[case::to_another_provider("v1beta2", Some(v1beta2_ref("KubeadmConfig", "a-1")), Some(v1beta2_ref("EKSConfig", "a-1")), true, &[])]
    #[case::v1beta1_api_version_bump("v1beta1", Some(v1beta1_ref(B1, "KubeadmConfig", "a-1")), Some(v1beta1_ref(B2, "KubeadmConfig", "a-1")), true, &[])]
    #[case::dropped_for_data_secret_name("v1beta1", Some(v1beta1_ref(B1, "KubeadmConfig", "a-1")), None, true, &[])]
    #[case::other_namespace("v1beta1", Some(v1beta1_ref(B1, "KubeadmConfig", "a-1")), Some(json!({"apiVersion": B1, "kind": "KubeadmConfig", "name": "a-2", "namespace": "other"})), false, &["[spec.template.spec.bootstrap.configRef.namespace: Invalid value: \"other\": must be the MachinePool's namespace \"default\"]"])]
    #[case::missing_api_version("v1beta1", Some(v1beta1_ref(B1, "KubeadmConfig", "a-1")), Some(json!({"kind": "KubeadmConfig", "name": "a-2"})), true, &["spec.template.spec.bootstrap.configRef.apiVersion missing: CAPI cannot resolve the bootstrap config (contract)"])]
    // Regression: a ref without apiVersion also drew "kind KubeadmConfig is not in bootstrapConfigKinds".
    #[case::missing_api_version_one_warning_only("v1beta1", None, Some(json!({"kind": "KubeadmConfig", "name": "a-2"})), true, &["spec.template.spec.bootstrap.configRef.apiVersion missing"])]
    #[case::unlisted_kind("v1beta2", Some(v1beta2_ref("KubeadmConfig", "a-1")), Some(json!({"apiGroup": "bootstrap.example.com", "kind": "AcmeConfig", "name": "a-2"})), true, &["configRef kind AcmeConfig.bootstrap.example.com is not in bootstrapConfigKinds: its in-place edits are not checked"])]
    fn machine_pool_rotation(
        #[case] version: &str,
        #[case] old_ref: Option<Value>,
        #[case] new_ref: Option<Value>,
        #[case] allowed: bool,
        #[case] expected: &[&str],
    ) {
        let verdict = run(
            json!({}),
            &update(&pool(version, old_ref), &pool(version, new_ref), "alice"),
        );
        assert_eq!(verdict.allowed, allowed, "{verdict:?}");
        let said = verdict
            .message
            .clone()
            .into_iter()
            .chain(verdict.warnings.clone())
            .collect::<Vec<_>>()
            .join("\n");
        for fragment in expected {
            assert!(said.contains(fragment), "{said}");
        }
        assert!(verdict.warnings.len() <= 1, "{:?}", verdict.warnings);
        if expected.is_empty() {
            assert_eq!(verdict, Verdict::accept());
        }
    }

    #[test]
    fn unchanged_ref_is_never_rejudged() {
        // policy.yaml's matchCondition skips these updates; the verdict must not depend on it.
        let broken = json!({"kind": "KubeadmConfig"});
        let old = pool("v1beta1", Some(broken.clone()));
        let mut new = pool("v1beta1", Some(broken));
        new["spec"]["replicas"] = json!(5);
        assert_eq!(
            run(
                json!({"contractViolations": "reject"}),
                &update(&old, &new, "alice")
            ),
            Verdict::accept()
        );
    }

    #[test]
    fn machine_pool_create_is_checked() {
        let new = pool("v1beta1", Some(json!({"name": "a-1"})));
        let verdict = run(
            json!({"contractViolations": "reject"}),
            &request("CREATE", Some(&new), None, "alice"),
        );
        assert_eq!(verdict.message.unwrap(), "MachinePool.cluster.x-k8s.io \"worker-a\" is invalid: [spec.template.spec.bootstrap.configRef.apiVersion: Required: the bootstrap contract resolves the config by it, spec.template.spec.bootstrap.configRef.kind: Required: the bootstrap contract resolves the config by it]. The bootstrap provider contract needs apiVersion, kind and name in the configRef to find the config");
    }

    #[rstest]
    #[case::not_json(b"{".to_vec(), "cannot read the validation payload")]
    #[case::not_an_object(b"[]".to_vec(), "must be a JSON object")]
    #[case::no_request(br#"{"settings": {}}"#.to_vec(), "has no request")]
    #[case::bad_settings(br#"{"settings": {"inPlaceEdit": "reject"}, "request": {}}"#.to_vec(), "invalid settings: inPlaceEdit: unknown setting")]
    #[case::no_kind(br#"{"settings": {}, "request": {"operation": "UPDATE"}}"#.to_vec(), "request.kind is missing")]
    #[case::kind_number(br#"{"request": {"kind": {"kind": 5}}}"#.to_vec(), "request.kind.kind must be a string")]
    #[case::no_operation(br#"{"request": {"kind": {"group": "cluster.x-k8s.io", "kind": "MachinePool"}}}"#.to_vec(), "request.operation is missing")]
    #[case::update_without_old(br#"{"request": {"kind": {"group": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig"}, "operation": "UPDATE", "object": {}}}"#.to_vec(), "request.oldObject is required for Update")]
    #[case::object_null_on_update(br#"{"request": {"kind": {"group": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig"}, "operation": "UPDATE", "object": null, "oldObject": {}}}"#.to_vec(), "request.object is required for Update")]
    #[case::object_a_string(br#"{"request": {"kind": {"group": "cluster.x-k8s.io", "kind": "MachinePool"}, "operation": "CREATE", "object": "x"}}"#.to_vec(), "request.object must be an object")]
    #[case::config_ref_string(br#"{"request": {"kind": {"group": "cluster.x-k8s.io", "kind": "MachinePool"}, "operation": "CREATE", "name": "p", "object": {"spec": {"template": {"spec": {"bootstrap": {"configRef": "kc-1"}}}}}}}"#.to_vec(), "MachinePool.cluster.x-k8s.io \"p\": spec.template.spec.bootstrap.configRef: Invalid value: must be an object reference")]
    fn malformed_input_gets_a_clear_400(#[case] payload: Vec<u8>, #[case] fragment: &str) {
        let verdict = validate_payload(&payload);
        assert!(!verdict.allowed);
        assert_eq!(verdict.code, Some(400));
        assert!(
            verdict.message.as_deref().unwrap().contains(fragment),
            "{verdict:?}"
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
    #[case::delete_in_use("DELETE")]
    #[case::connect("CONNECT")]
    fn delete_is_accepted_for_now(#[case] operation: &str) {
        let old = config("KubeadmConfig", "v1beta2", files("x"), true);
        assert_eq!(
            run(json!({}), &request(operation, None, Some(&old), "alice")),
            Verdict::accept()
        );
    }

    #[test]
    fn other_kinds_are_untouched() {
        let payload = br#"{"request": {"kind": {"group": "", "version": "v1", "kind": "Pod"}}}"#;
        assert_eq!(validate_payload(payload), Verdict::accept());
        let custom = json!({"bootstrapConfigKinds": [{"apiGroup": "bootstrap.example.com", "kind": "AcmeConfig"}]});
        let mut old = config("KubeadmConfig", "v1beta2", files("x"), true);
        let mut new = config("KubeadmConfig", "v1beta2", files("y"), true);
        assert!(run(custom.clone(), &update(&old, &new, "alice")).allowed);
        old["apiVersion"] = json!("bootstrap.example.com/v1");
        new["apiVersion"] = json!("bootstrap.example.com/v1");
        old["kind"] = json!("AcmeConfig");
        new["kind"] = json!("AcmeConfig");
        assert!(!run(custom, &update(&old, &new, "alice")).allowed);
    }
}
