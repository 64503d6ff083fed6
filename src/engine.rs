//! The policy as a pure function: (settings, AdmissionRequest, lookups) -> verdict. No host
//! calls, so it runs the same natively (tests, benchmarks, tools) and inside the wasm module;
//! lookups, used only in the context-aware mode, come through the [`Lookups`] trait.
//!
//! The engine only routes: it reads the payload ([`crate::reader`]), hands a request for a
//! judged kind to that kind's decision tree ([`crate::webhooks`]), adds the findings up into a
//! verdict, and applies the rules that hold for every kind: `clusterctl move`'s DELETE
//! (rule 7), CAPI's controllers (rule 3) and the exemptions (rule 6).

use crate::capi::kinds::{is_machine_pool, is_machine_template_consumer};
use crate::lookups::{Lookups, NoLookups};
use crate::reader::json::{read_document, serde_message, Read, Reader};
use crate::reader::node::Node;
use crate::reader::request::{Operation, Request, RequestDoc};
use crate::rules::controller_writes::{by_controller, is_controller};
use crate::rules::delete_and_move::{allowed_for_move, is_delete_for_move};
use crate::rules::exemptions::{exempt, exemption};
use crate::settings::Settings;
use crate::verdict::{Subject, Verdict};
use crate::webhooks::{bootstrap_config, bootstrap_template, config_ref_holder};

/// The `validate` entry point without lookups.
pub fn validate_payload(payload: &[u8]) -> Verdict {
    validate_payload_with(payload, &NoLookups)
}

/// `{"request": ..., "settings": ...}` as far as it is read: both as borrowed views of the
/// payload. `None`: the payload is no object.
struct Payload<'a> {
    settings: Option<Node<'a>>,
    request: Option<RequestDoc<'a>>,
}

fn read_payload<'a>(r: &mut Reader<'a>) -> Read<Option<Payload<'a>>> {
    let mut payload = Payload {
        settings: None,
        request: None,
    };
    let is_object = r.read_object_or_skip(|r, key| {
        if key.is("settings") {
            payload.settings = Some(r.read_node()?);
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
/// once, straight from its bytes, as far as the rules read it (see [`crate::reader::json`]); a
/// payload it refuses gets serde_json's message.
pub fn validate_payload_with(payload: &[u8], lookups: &dyn Lookups) -> Verdict {
    let fields = match read_document(payload, read_payload) {
        Ok(fields) => fields,
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
    let settings = match Settings::from_node(fields.settings.as_ref().unwrap_or(&Node::Null)) {
        Ok(s) => s,
        Err(e) => return Verdict::bad_request(format!("invalid settings: {e}")),
    };
    match &fields.request {
        Some(request) => evaluate_request(&settings, request, lookups),
        None => Verdict::bad_request("the validation payload has no request"),
    }
}

/// Judges one AdmissionRequest, given as its JSON text, without lookups.
pub fn evaluate(settings: &Settings, request: &[u8]) -> Verdict {
    evaluate_with(settings, request, &NoLookups)
}

/// Judges one AdmissionRequest given as its JSON text (tests, tools), read as the payload's
/// request is; `lookups` is asked only when `settings.context_aware`.
pub fn evaluate_with(settings: &Settings, request: &[u8], lookups: &dyn Lookups) -> Verdict {
    match read_document(request, RequestDoc::read) {
        Ok(doc) => evaluate_request(settings, &doc, lookups),
        Err(_) => Verdict::bad_request(format!(
            "cannot read the request: {}",
            serde_message(request)
        )),
    }
}

/// Judges one AdmissionRequest as read from its payload.
fn evaluate_request(settings: &Settings, doc: &RequestDoc, lookups: &dyn Lookups) -> Verdict {
    let (group_kind, version) = match doc.kind_of() {
        Ok(kind) => kind,
        Err(e) => return Verdict::bad_request(e),
    };
    let (group, kind) = (&*group_kind.group, &*group_kind.kind);
    let consumer = is_machine_pool(group, kind) || is_machine_template_consumer(group, kind);
    let config = settings.is_bootstrap_config(group, kind);
    let template = settings.is_bootstrap_template(group, kind);
    if !(consumer || config || template) {
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
    // clusterctl move deletes configs and templates still referenced (rule 7).
    if request.operation == Operation::Delete
        && (config || template)
        && is_delete_for_move(request.old_object)
    {
        return allowed_for_move();
    }
    let lookups = settings.context_aware.then_some(lookups);
    let findings = if consumer {
        match config_ref_holder::judge(settings, &request, lookups) {
            Ok(findings) => findings,
            Err(e) => {
                return Verdict::bad_request(format!(
                    "{} {:?}: {e}",
                    group_kind.qualified(),
                    request.name
                ))
            }
        }
    } else if template {
        bootstrap_template::judge(settings, &request, &subject, lookups)
    } else {
        bootstrap_config::judge(settings, &request, &subject, lookups)
    };
    let verdict = Verdict::from_findings(&subject, &findings);
    if is_controller(settings, &request.requester) {
        return by_controller(verdict, request.requester.username);
    }
    match exemption(settings, &request.requester) {
        Some(reason) => exempt(verdict, &reason),
        None => verdict,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capi::providers::DEFAULT_CONTROLLER_USERS;
    use crate::verdict::CONTROLLER_WRITE_ANNOTATION;
    use crate::webhooks::fixtures::*;
    use rstest::rstest;
    use serde_json::{json, Value};

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
    /// clusterctl installs them: providers::DEFAULT_CONTROLLER_USERS) may change a config
    /// in use in place: allowed, no warning, the changed paths in the audit log. The same
    /// request from a person is refused with the same paths.
    #[rstest]
    fn controller_writes_are_audited_never_refused(
        #[values("KubeadmConfig", "RKE2Config")] kind: &str,
    ) {
        for controller in DEFAULT_CONTROLLER_USERS {
            controller_write_is_audited(kind, controller);
        }
    }

    fn controller_write_is_audited(kind: &str, controller: &str) {
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

    #[test]
    fn other_kinds_are_untouched() {
        let payload = br#"{"request": {"kind": {"group": "", "version": "v1", "kind": "Pod"}}}"#;
        assert_eq!(validate_payload(payload), Verdict::accept());
        let custom = json!({"bootstrapConfigKinds": [{"apiGroup": "bootstrap.example.com", "kind": "ExampleConfig"}]});
        let mut old = config("KubeadmConfig", "v1beta2", files("x"), true);
        let mut new = config("KubeadmConfig", "v1beta2", files("y"), true);
        assert!(run(custom.clone(), &update(&old, &new, "alice")).allowed);
        old["apiVersion"] = json!("bootstrap.example.com/v1");
        new["apiVersion"] = json!("bootstrap.example.com/v1");
        old["kind"] = json!("ExampleConfig");
        new["kind"] = json!("ExampleConfig");
        assert!(!run(custom, &update(&old, &new, "alice")).allowed);
    }
}
