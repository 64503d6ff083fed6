//! Rule 2, in-place edits: CAPI takes a bootstrap change of a MachinePool only from a rotated
//! `configRef` (cluster-api #8858, #4145): explicit, reviewed, recorded in the pool, taken at once
//! by new instances, and rolled out where the infrastructure provider does that. A spec change
//! of a config in use is none of these, so it is refused with every changed field and the
//! rotation. Whether a pool's existing instances are replaced after a rotation is its
//! infrastructure provider's choice ([`crate::capi::infrastructure`]): with lookups the
//! refusal says what the pool's own infrastructure does, without them what holds everywhere.
//!
//! Not compared, per kind (extendable in the settings), as [`crate::capi::providers`] lists
//! them: machine-only fields, any change allowed (the bootstrap token CAPI rotates every
//! ~7.5 min), and fill-once fields, allowed from empty to a value (the discovery fields CAPI
//! fills, the providers' defaults). Empty objects equal absent ones and pruned zero values are
//! no change (see [`crate::diff`]).
//!
//! Asked on a bootstrap config's UPDATE: when the spec is compared and when the pools are
//! looked up is [`crate::webhooks::bootstrap_config`]'s decision; templates (rule 8) share
//! [`change_violations`].
//!
//! Why one file: the rule and its rstest tables together, as every rule of
//! `rules/` keeps them (ARCHITECTURE.md, To add a rule).

use crate::capi::conversion::{converted_from_another_version, served_version};
use crate::capi::defaulters::as_defaulted;
use crate::capi::field_rules::FieldRules;
use crate::capi::infrastructure::refusal_sentence;
#[cfg(test)]
use crate::capi::infrastructure::INFRASTRUCTURE_DOCS;
use crate::capi::kinds::GroupKind;
use crate::capi::owners::Owner;
use crate::capi::paths::{FieldPath, PathPattern};
use crate::capi::providers::is_recorded;
use crate::diff::{changes_at, is_unset, values_matching, Change};
use crate::fingerprint::{fingerprint, suggested_name};
use crate::reader::node::Node;
use crate::reader::object::Object;
use crate::settings::{Action, Settings};
use crate::verdict::{Finding, Subject, Violation};

/// At most this many changed paths are listed; the rest are counted.
pub const MAX_REPORTED_PATHS: usize = 10;

/// `MachinePool ns/a and MachinePool ns/b`, as the messages name the pools.
pub fn pools(subject: &Subject, owners: &[Owner]) -> String {
    owners
        .iter()
        .map(|o| format!("MachinePool {}/{}", subject.namespace, o.name))
        .collect::<Vec<_>>()
        .join(" and ")
}

/// The rotation CAPI takes a bootstrap change from: the remediation text and the new name it
/// suggests.
pub fn rotation_remediation(
    subject: &Subject,
    owners: &[Owner],
    new_spec: Option<&Node>,
    rules: &FieldRules,
) -> (String, String) {
    let name = suggested_name(&subject.name, &fingerprint(new_spec, rules));
    let kind = &subject.group_kind.kind;
    let text = format!(
        "To rotate, create a new {kind} {name:?} in namespace {ns} with the desired \
         spec, then set spec.template.spec.bootstrap.configRef.name of {pools} to {name:?}",
        ns = subject.namespace,
        pools = pools(subject, owners),
    );
    (text, name)
}

/// `rules` (a kind's non-compared fields) for a request written in `version` of `kind` (a config
/// or template kind), with what conversion to the stored version does
/// ([`crate::capi::conversion`]): the zero values that version cannot tell from absence, and,
/// when `old_object` was converted to that version from the stored one, the fields storage
/// drops, not compared. Returns the rules and those dropped fields (empty when they are
/// stored, as on CAPI v1.10).
pub fn with_conversion(
    mut rules: FieldRules,
    group_kind: &GroupKind,
    version: &str,
    old_object: Option<&Object>,
) -> (FieldRules, Vec<PathPattern>) {
    // The facts are of the recorded kinds, in their group, not of a kind of the same name elsewhere.
    if !is_recorded(group_kind) {
        return (rules, Vec::new());
    }
    let Some(served) = served_version(&group_kind.kind, version) else {
        return (rules, Vec::new());
    };
    rules.zero_is_absent = served.zero_is_absent;
    rules.zero_is_absent_root = served.spec_root();
    let mut dropped = Vec::new();
    if old_object.is_some_and(|o| converted_from_another_version(o, &group_kind.group, version)) {
        dropped.extend(
            served
                .dropped
                .iter()
                .filter_map(|p| PathPattern::parse(&format!("{}{p}", served.spec_root())).ok()),
        );
        rules.ignored.extend(dropped.iter().cloned());
    }
    (rules, dropped)
}

/// A change of a field storage drops ([`with_conversion`]) is admitted, and told to whoever made
/// it: it reaches neither the stored object nor any node. Only a change that shows is told: a
/// value `new_spec` carries against the one in the last manifest kubectl applied (the stored
/// object cannot hold it); an unchanged re-apply, a write that does not send the field, and any
/// write without that manifest (a first apply, server-side apply alone), say nothing.
pub fn check_dropped(
    subject: &Subject,
    dropped: &[PathPattern],
    old_object: Option<&Object>,
    new_spec: Option<&Node>,
) -> Option<Finding> {
    if dropped.is_empty() {
        return None;
    }
    let manifest = old_object?.last_applied?.to_str();
    // From bytes, as `serde_message` parses: one instance of serde_json's `Value` parser.
    let manifest: serde_json::Value = serde_json::from_slice(manifest.as_bytes()).ok()?;
    let applied = manifest.get("spec").map(Node::from_value);
    let mut changed: Vec<String> = Vec::new();
    for pattern in dropped {
        let before = values_matching(pattern, "spec", applied.as_ref());
        let after = values_matching(pattern, "spec", new_spec);
        // Only a value the request itself carries: storage never has one, so a write that
        // does not send the field (a label, kubectl's own last-applied and managedFields
        // patches, a manifest that no longer names it) reads as absent and changes nothing.
        for (path, new) in &after {
            if new.is_null() {
                continue;
            }
            let (old, new) = (value_in(&before, path), Some(*new));
            let differs = match (is_unset(old), is_unset(new)) {
                (true, true) => false,
                (false, false) => old != new,
                _ => true,
            };
            let path = path.to_string();
            if differs && !changed.contains(&path) {
                changed.push(path);
            }
        }
    }
    let first = changed.first()?;
    let others = match changed.len() {
        1 => String::new(),
        n => format!(" (+{} more)", n - 1),
    };
    Some(Finding::warning(format!(
        "{first}{others} changed, no effect: the stored {} version has no such field",
        subject.group_kind.kind
    )))
}

fn value_in<'v, 'a>(
    values: &[(FieldPath, &'v Node<'a>)],
    path: &FieldPath,
) -> Option<&'v Node<'a>> {
    values.iter().find(|(p, _)| p == path).map(|(_, v)| *v)
}

/// The changed fields of a config's spec, the request's `object` compared with its `oldObject`
/// as the provider's defaulter would have left it (RKE2's user data).
pub fn compared_changes(
    subject: &Subject,
    rules: &FieldRules,
    old_spec: Option<&Node>,
    new_spec: Option<&Node>,
) -> Vec<Change> {
    let (old, new) = as_defaulted(&subject.group_kind.kind, old_spec, new_spec);
    changes_at(&["spec"], old.as_deref(), new.as_deref(), rules)
}

/// The changed paths as field errors, at most [`MAX_REPORTED_PATHS`], then a count.
pub fn change_violations(changes: &[Change]) -> Vec<Violation> {
    let mut violations: Vec<Violation> = changes
        .iter()
        .take(MAX_REPORTED_PATHS)
        .map(|c| {
            Violation::new(
                c.path.to_string(),
                format!("Forbidden: {}", c.kind.as_str()),
            )
        })
        .collect();
    let more = changes.len().saturating_sub(MAX_REPORTED_PATHS);
    if more > 0 {
        violations.push(Violation::new(
            "",
            format!("and {more} more changed fields"),
        ));
    }
    violations
}

/// The remediation for a config a Cluster's topology made (label
/// `topology.cluster.x-k8s.io/owned` on the stored object): not a rotation, which stops the
/// topology controller for the whole Cluster (it refuses a pool naming a config it did not
/// make), but the ClusterClass's template, and a new pool to roll it out (docs/clusterclass.md).
pub const TOPOLOGY_REMEDIATION: &str = "Change the ClusterClass's bootstrap template instead: \
     the topology controller then patches this config in place, which is no rotation either \
     (cluster-api #10496); to put a change on every instance, add a new MachinePool topology to \
     the Cluster and remove the old one. Rotating configRef by hand stops the topology controller \
     for the whole Cluster";

/// What CAPI does with a bootstrap change, true of every pool: the refusal's reason.
pub const ONLY_A_ROTATION: &str =
    "CAPI takes a bootstrap change only from a configRef rotation (cluster-api #8858)";

/// What the pools' infrastructure does with the change ([`refusal_sentence`]).
pub fn infrastructure_effect(config_kind: &str, infrastructure: Option<&[GroupKind]>) -> String {
    refusal_sentence(config_kind, infrastructure)
}

/// Rule 2 on an UPDATE of a config in use by `owners`, given its compared `changes`
/// ([`compared_changes`]). `rules` are the kind's non-compared fields
/// (`Settings::field_rules`), built once per request; they name the suggested rotation, unless
/// the config is `topology_owned`: then [`TOPOLOGY_REMEDIATION`], and no name.
/// `infrastructure`: with lookups, the infrastructure kind of each pool in use
/// ([`infrastructure_effect`]).
#[allow(clippy::too_many_arguments)]
pub fn check(
    settings: &Settings,
    subject: &Subject,
    owners: &[Owner],
    rules: &FieldRules,
    changes: &[Change],
    new_spec: Option<&Node>,
    topology_owned: bool,
    infrastructure: Option<&[GroupKind]>,
) -> Option<Finding> {
    if owners.is_empty() || changes.is_empty() || settings.in_place_edits == Action::Allow {
        return None;
    }
    let violations = change_violations(changes);
    let pools = pools(subject, owners);
    let first = violations[0].field.clone();
    let others = if changes.len() > 1 {
        format!(" (+{} more)", changes.len() - 1)
    } else {
        String::new()
    };
    // The same refusal either way; what to do instead is the topology's or a rotation.
    let (manager, remediation, instead, suggested_name) = if topology_owned {
        (
            ", which its Cluster's topology manages (label topology.cluster.x-k8s.io/owned)",
            TOPOLOGY_REMEDIATION.to_string(),
            "change the ClusterClass",
            None,
        )
    } else {
        let (remediation, name) = rotation_remediation(subject, owners, new_spec, rules);
        ("", remediation, "rotate configRef", Some(name))
    };
    Some(Finding {
        action: settings.in_place_edits,
        violations,
        explanation: format!(
            "The config is in use by {pools}{manager}, and {ONLY_A_ROTATION}. {effect} {remediation}",
            effect = infrastructure_effect(&subject.group_kind.kind, infrastructure),
        ),
        warning: format!("{first}{others} edited in place, not recorded in {pools}; {instead}"),
        suggested_name,
    })
}

/// With lookups: a config no MachinePool references any more (rotated out) may be edited, but
/// the edit reaches no node.
pub fn check_rotated_out(subject: &Subject, changes: &[Change]) -> Option<Finding> {
    if changes.is_empty() {
        return None;
    }
    Some(Finding::warning(format!(
        "{} {} is rotated out (no MachinePool references it): this edit reaches no node",
        subject.group_kind.kind, subject.name
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capi::kinds::{GroupKind, BOOTSTRAP_GROUP};
    use crate::capi::providers::PROVIDERS;
    use crate::diff::{changed_fields, ChangeKind};
    use crate::fingerprint::spec_fingerprint;
    use rstest::rstest;
    use serde_json::{json, Value};

    fn changes(kind: &str, old: Value, new: Value) -> Vec<String> {
        let rules = Settings::default().field_rules(kind);
        changed_fields("spec", Some(&old), Some(&new), &rules)
            .into_iter()
            .map(|c| format!("{} {}", c.path, c.kind.as_str()))
            .collect()
    }

    fn joined(token: Value) -> Value {
        json!({"joinConfiguration": {"discovery": {"bootstrapToken": token}}})
    }

    #[rstest]
    #[case::token_set(joined(json!({})), joined(json!({"token": "abcdef.0123456789abcdef"})))]
    #[case::token_rotated(joined(json!({"token": "abcdef.0123456789abcdef"})), joined(json!({"token": "ghijkl.0123456789abcdef"})))]
    #[case::token_reset(joined(json!({"token": "abcdef.0123456789abcdef"})), joined(json!({"token": ""})))]
    #[case::token_removed(joined(json!({"token": "abcdef.0123456789abcdef"})), joined(json!({})))]
    #[case::endpoint_filled(joined(json!({})), joined(json!({"apiServerEndpoint": "10.0.0.1:6443"})))]
    #[case::endpoint_filled_from_empty_string(joined(json!({"apiServerEndpoint": ""})), joined(json!({"apiServerEndpoint": "10.0.0.1:6443"})))]
    #[case::ca_hashes_filled(joined(json!({"caCertHashes": []})), joined(json!({"caCertHashes": ["sha256:aa"]})))]
    #[case::skip_ca_set(joined(json!({"unsafeSkipCAVerification": false})), joined(json!({"unsafeSkipCAVerification": true})))]
    #[case::capi_creates_join_configuration(json!({}), json!({"joinConfiguration": {"discovery": {"bootstrapToken": {"token": "abcdef.0123456789abcdef", "apiServerEndpoint": "10.0.0.1:6443", "caCertHashes": ["sha256:aa"]}}}}))]
    #[case::file_discovery_filled(json!({"joinConfiguration": {"discovery": {"file": {"kubeConfig": {"user": {"exec": {"command": "x"}}}}}}}), json!({"joinConfiguration": {"discovery": {"file": {"kubeConfig": {"cluster": {"server": "https://10.0.0.1:6443", "certificateAuthorityData": "Y2E="}, "user": {"exec": {"command": "x", "apiVersion": "client.authentication.k8s.io/v1"}}}}}}}))]
    #[case::v1beta1_defaults(json!({"joinConfiguration": {"nodeRegistration": {}}}), json!({"format": "cloud-config", "joinConfiguration": {"nodeRegistration": {"imagePullPolicy": "IfNotPresent"}}}))]
    #[case::null_equals_absent(json!({"files": null}), json!({}))]
    #[case::key_order(json!({"files": [{"path": "/a", "content": "x"}]}), json!({"files": [{"content": "x", "path": "/a"}]}))]
    fn kubeadm_machine_written_changes_are_not_edits(#[case] old: Value, #[case] new: Value) {
        assert_eq!(changes("KubeadmConfig", old, new), Vec::<String>::new());
    }

    #[rstest]
    #[case::file_content(json!({"files": [{"path": "/a", "content": "x"}, {"path": "/b", "content": "y"}]}), json!({"files": [{"path": "/a", "content": "x"}, {"path": "/b", "content": "z"}]}), &["spec.files[1].content changed"])]
    #[case::file_added(json!({"files": [{"path": "/a", "content": "x"}]}), json!({"files": [{"path": "/a", "content": "x"}, {"path": "/b", "content": "y"}]}), &["spec.files[1] added"])]
    #[case::file_removed(json!({"files": [{"path": "/a", "content": "x"}]}), json!({}), &["spec.files removed"])]
    #[case::endpoint_changed(joined(json!({"apiServerEndpoint": "10.0.0.1:6443"})), joined(json!({"apiServerEndpoint": "10.0.0.2:6443"})), &["spec.joinConfiguration.discovery.bootstrapToken.apiServerEndpoint changed"])]
    #[case::endpoint_removed(joined(json!({"apiServerEndpoint": "10.0.0.1:6443"})), joined(json!({})), &["spec.joinConfiguration.discovery.bootstrapToken.apiServerEndpoint removed"])]
    #[case::ca_hash_replaced(joined(json!({"caCertHashes": ["sha256:aa"]})), joined(json!({"caCertHashes": ["sha256:bb"]})), &["spec.joinConfiguration.discovery.bootstrapToken.caCertHashes[0] changed"])]
    #[case::format_changed(json!({"format": "cloud-config"}), json!({"format": "ignition"}), &["spec.format changed"])]
    #[case::kubelet_arg_map(json!({"joinConfiguration": {"nodeRegistration": {"kubeletExtraArgs": {"max-pods": "110"}}}}), json!({"joinConfiguration": {"nodeRegistration": {"kubeletExtraArgs": {"max-pods": "200", "node-labels": "a=b"}}}}), &["spec.joinConfiguration.nodeRegistration.kubeletExtraArgs.max-pods changed", "spec.joinConfiguration.nodeRegistration.kubeletExtraArgs.node-labels added"])]
    #[case::kubelet_arg_list(json!({"joinConfiguration": {"nodeRegistration": {"kubeletExtraArgs": [{"name": "max-pods", "value": "110"}]}}}), json!({"joinConfiguration": {"nodeRegistration": {"kubeletExtraArgs": [{"name": "max-pods", "value": "200"}]}}}), &["spec.joinConfiguration.nodeRegistration.kubeletExtraArgs[0].value changed"])]
    #[case::join_configuration_added_with_content(json!({}), json!({"joinConfiguration": {"nodeRegistration": {"name": "n"}, "discovery": {"bootstrapToken": {"token": "t"}}}}), &["spec.joinConfiguration added"])]
    // Found by tests/properties.rs: a list shrinking by null or {} elements is a change.
    #[case::list_shrinks_by_empty_elements(json!({"files": [null, null]}), json!({"files": [{}]}), &["spec.files[1] removed"])]
    #[case::type_changed(json!({"files": [{"path": "/a"}]}), json!({"files": "nope"}), &["spec.files changed"])]
    #[case::sorted_paths(json!({"preKubeadmCommands": ["a"], "files": [{"path": "/a"}]}), json!({"preKubeadmCommands": ["b"], "files": [{"path": "/b"}]}), &["spec.files[0].path changed", "spec.preKubeadmCommands[0] changed"])]
    fn kubeadm_user_edits_are_reported_with_exact_paths(
        #[case] old: Value,
        #[case] new: Value,
        #[case] expected: &[&str],
    ) {
        assert_eq!(changes("KubeadmConfig", old, new), expected);
    }

    /// The request's `old`/`new` specs of a KubeadmConfig written in `version`, the stored
    /// object converted to it (`converted`: CAPI v1.11+, v1beta2 stored) or not (CAPI v1.10).
    fn changes_written_in(version: &str, converted: bool, old: Value, new: Value) -> Vec<String> {
        let annotations = if converted {
            json!({"cluster.x-k8s.io/conversion-data": "{\"apiVersion\":\"bootstrap.cluster.x-k8s.io/v1beta2\",\"spec\":{}}"})
        } else {
            json!({})
        };
        let object =
            serde_json::to_vec(&json!({"metadata": {"annotations": annotations}})).unwrap();
        let object = Object::from_json(&object).unwrap();
        let base = Settings::default().field_rules("KubeadmConfig");
        let kind = GroupKind::new(BOOTSTRAP_GROUP, "KubeadmConfig");
        let (rules, _) = with_conversion(base, &kind, version, Some(&object));
        changed_fields("spec", Some(&old), Some(&new), &rules)
            .into_iter()
            .map(|c| format!("{} {}", c.path, c.kind.as_str()))
            .collect()
    }

    // A GitOps repository in v1beta1 re-applied unchanged. Read back through v1beta1
    // from v1beta2 storage, the dropped field and the zeros are gone from `oldObject`.
    #[rstest]
    #[case::retry_join_zero_readded_v1beta2_stored("v1beta1", true, json!({}), json!({"useExperimentalRetryJoin": false}), &[])]
    #[case::retry_join_true_readded_v1beta2_stored("v1beta1", true, json!({}), json!({"useExperimentalRetryJoin": true}), &[])]
    #[case::retry_join_flipped_v1beta2_stored("v1beta1", true, json!({"useExperimentalRetryJoin": true}), json!({"useExperimentalRetryJoin": false}), &[])]
    #[case::append_zero_readded_v1beta2_stored("v1beta1", true, json!({"files": [{"path": "/a"}]}), json!({"files": [{"path": "/a", "append": false}]}), &[])]
    // CAPI v1.10 stores v1beta1: its zeros are still no change, a value is an edit.
    #[case::append_zero_added_v1beta1_stored("v1beta1", false, json!({"files": [{"path": "/a"}]}), json!({"files": [{"path": "/a", "append": false}]}), &[])]
    #[case::retry_join_zero_added_v1beta1_stored("v1beta1", false, json!({}), json!({"useExperimentalRetryJoin": false}), &[])]
    #[case::retry_join_set_v1beta1_stored("v1beta1", false, json!({}), json!({"useExperimentalRetryJoin": true}), &["spec.useExperimentalRetryJoin added"])]
    #[case::retry_join_flipped_v1beta1_stored("v1beta1", false, json!({"useExperimentalRetryJoin": true}), json!({"useExperimentalRetryJoin": false}), &["spec.useExperimentalRetryJoin changed"])]
    #[case::append_set_v1beta1_stored("v1beta1", false, json!({"files": [{"path": "/a"}]}), json!({"files": [{"path": "/a", "append": true}]}), &["spec.files[0].append added"])]
    // A real edit beside a dropped field: only the real path.
    #[case::real_edit_beside_dropped("v1beta1", true, json!({"files": [{"path": "/a", "content": "x"}]}), json!({"useExperimentalRetryJoin": true, "files": [{"path": "/a", "content": "y", "append": false}]}), &["spec.files[0].content changed"])]
    // A version without facts (a kind's own, an unknown one) is compared as before.
    #[case::unknown_version("v1alpha9", true, json!({}), json!({"useExperimentalRetryJoin": false}), &["spec.useExperimentalRetryJoin added"])]
    fn fields_storage_drops_and_zeros_it_cannot_hold(
        #[case] version: &str,
        #[case] converted: bool,
        #[case] old: Value,
        #[case] new: Value,
        #[case] expected: &[&str],
    ) {
        assert_eq!(changes_written_in(version, converted, old, new), expected);
    }

    /// The no-effect warning on a v1beta1 write to a v1beta2-stored KubeadmConfig whose last
    /// client-side apply (`last_applied`: its spec) is known, or not.
    fn dropped_warning(last_applied: Option<Value>, new: Value) -> Option<String> {
        let mut annotations = json!({"cluster.x-k8s.io/conversion-data": "{\"apiVersion\":\"bootstrap.cluster.x-k8s.io/v1beta2\"}"});
        if let Some(spec) = last_applied {
            annotations["kubectl.kubernetes.io/last-applied-configuration"] = json!(
                json!({"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta1", "spec": spec})
                    .to_string()
            );
        }
        let old = serde_json::to_vec(&json!({"metadata": {"annotations": annotations}})).unwrap();
        let old = Object::from_json(&old).unwrap();
        let base = Settings::default().field_rules("KubeadmConfig");
        let kind = GroupKind::new(BOOTSTRAP_GROUP, "KubeadmConfig");
        let (_, dropped) = with_conversion(base, &kind, "v1beta1", Some(&old));
        let subject = subject("KubeadmConfig", "pool-1-a");
        let new = Node::from_value(&new);
        check_dropped(&subject, &dropped, Some(&old), Some(&new)).map(|f| f.warning)
    }

    #[rstest]
    #[case::unchanged_reapply(Some(json!({"useExperimentalRetryJoin": true})), json!({"useExperimentalRetryJoin": true}), None)]
    #[case::unchanged_zero(Some(json!({"useExperimentalRetryJoin": false})), json!({"useExperimentalRetryJoin": false}), None)]
    #[case::zero_for_absent(Some(json!({})), json!({"useExperimentalRetryJoin": false}), None)]
    #[case::server_side_apply(None, json!({"useExperimentalRetryJoin": true}), None)]
    #[case::set(Some(json!({"useExperimentalRetryJoin": false})), json!({"useExperimentalRetryJoin": true}), Some("spec.useExperimentalRetryJoin changed, no effect: the stored KubeadmConfig version has no such field"))]
    #[case::set_to_zero(Some(json!({"useExperimentalRetryJoin": true})), json!({"useExperimentalRetryJoin": false}), Some("spec.useExperimentalRetryJoin changed, no effect: the stored KubeadmConfig version has no such field"))]
    // Regression (cluster test): kubectl apply --server-side first patches the last-applied
    // annotation alone (field manager kubectl-last-applied), then managedFields: the objects
    // those write carry no dropped field, which is no change of one.
    #[case::not_sent(Some(json!({"useExperimentalRetryJoin": true, "joinConfiguration": {"apiVersion": "kubeadm.k8s.io/v1beta3"}})), json!({}), None)]
    #[case::removed_from_the_manifest(Some(json!({"useExperimentalRetryJoin": true})), json!({"useExperimentalRetryJoin": null}), None)]
    fn a_dropped_field_changed_is_told_not_refused(
        #[case] last_applied: Option<Value>,
        #[case] new: Value,
        #[case] expected: Option<&str>,
    ) {
        let warning = dropped_warning(last_applied, new);
        assert_eq!(warning.as_deref(), expected);
        assert!(warning.is_none_or(|w| w.len() <= 120));
    }

    #[test]
    fn an_unreadable_last_applied_manifest_tells_nothing() {
        let old = br#"{"metadata": {"annotations": {"cluster.x-k8s.io/conversion-data": "{\"apiVersion\":\"bootstrap.cluster.x-k8s.io/v1beta2\"}", "kubectl.kubernetes.io/last-applied-configuration": "{not json"}}}"#;
        let old = Object::from_json(old).unwrap();
        let kind = GroupKind::new(BOOTSTRAP_GROUP, "KubeadmConfig");
        let (_, dropped) = with_conversion(FieldRules::default(), &kind, "v1beta1", Some(&old));
        assert_eq!(dropped.len(), 10);
        let subject = subject("KubeadmConfig", "a");
        let new = json!({"useExperimentalRetryJoin": true});
        assert_eq!(
            check_dropped(
                &subject,
                &dropped,
                Some(&old),
                Some(&Node::from_value(&new))
            ),
            None
        );
    }

    /// Every record but kubeadm's (read from the records, so a new provider is covered).
    #[test]
    fn token_is_only_machine_only_for_kubeadm() {
        let others: Vec<&str> = crate::capi::providers::PROVIDERS
            .iter()
            .map(|p| p.config_kind)
            .filter(|kind| *kind != "KubeadmConfig")
            .collect();
        assert!(others.len() >= 7, "{others:?}");
        for kind in others {
            let old = joined(json!({"token": "a"}));
            let new = joined(json!({"token": "b"}));
            assert_eq!(
                changes(kind, old, new),
                ["spec.joinConfiguration.discovery.bootstrapToken.token changed"],
                "{kind}"
            );
        }
    }

    #[rstest]
    #[case::k0s_version_filled("K0sWorkerConfig", json!({}), json!({"version": "v1.31.1+k0s.0"}), &[])]
    #[case::k3s_version_filled("KThreesConfig", json!({"version": ""}), json!({"version": "v1.31.1+k3s1"}), &[])]
    #[case::k3s_version_changed("KThreesConfig", json!({"version": "v1.30.1+k3s1"}), json!({"version": "v1.31.1+k3s1"}), &["spec.version changed"])]
    #[case::rke2_version_is_an_edit("RKE2Config", json!({}), json!({"agentConfig": {"version": "v1.31.1+rke2r1"}}), &["spec.agentConfig added"])]
    #[case::eks_args("EKSConfig", json!({"kubeletExtraArgs": {"max-pods": "58"}}), json!({"kubeletExtraArgs": {"max-pods": "110"}}), &["spec.kubeletExtraArgs.max-pods changed"])]
    #[case::talos_patch("TalosConfig", json!({"generateType": "join", "configPatches": [{"op": "add", "path": "/machine/x", "value": 1}]}), json!({"generateType": "join", "configPatches": [{"op": "add", "path": "/machine/x", "value": 2}]}), &["spec.configPatches[0].value changed"])]
    fn other_providers(
        #[case] kind: &str,
        #[case] old: Value,
        #[case] new: Value,
        #[case] expected: &[&str],
    ) {
        assert_eq!(changes(kind, old, new), expected);
    }

    #[test]
    fn settings_extend_the_defaults() {
        let settings = Settings::from_value(&json!({
            "ignoredPaths": {"KubeadmConfig": ["spec.files[*].content"]},
            "fillOncePaths": {"RKE2Config": ["spec.agentConfig.version"]}
        }))
        .unwrap();
        let rules = settings.field_rules("KubeadmConfig");
        let old = json!({"files": [{"path": "/a", "content": "x"}], "joinConfiguration": {"discovery": {"bootstrapToken": {"token": "a"}}}});
        let new = json!({"files": [{"path": "/a", "content": "y"}], "joinConfiguration": {"discovery": {"bootstrapToken": {"token": "b"}}}});
        assert!(changed_fields("spec", Some(&old), Some(&new), &rules).is_empty());
        let rules = settings.field_rules("RKE2Config");
        let filled = changed_fields(
            "spec",
            Some(&json!({"agentConfig": {"nodeName": "n"}})),
            Some(&json!({"agentConfig": {"nodeName": "n", "version": "v1.31.1+rke2r1"}})),
            &rules,
        );
        assert!(filled.is_empty(), "{filled:?}");
        let changed = changed_fields(
            "spec",
            Some(&json!({"agentConfig": {"version": "v1.30.1+rke2r1"}})),
            Some(&json!({"agentConfig": {"version": "v1.31.1+rke2r1"}})),
            &rules,
        );
        assert_eq!(changed.len(), 1);
        assert_eq!(changed[0].kind, ChangeKind::Changed);
    }

    /// [`check`] on two specs: the changes computed as the engine computes them.
    fn judge(
        settings: &Settings,
        subject: &Subject,
        owners: &[Owner],
        rules: &FieldRules,
        old: Option<&Value>,
        new: Option<&Value>,
    ) -> Option<Finding> {
        let (old, new) = (old.map(Node::from_value), new.map(Node::from_value));
        let changes = compared_changes(subject, rules, old.as_ref(), new.as_ref());
        check(
            settings,
            subject,
            owners,
            rules,
            &changes,
            new.as_ref(),
            false,
            None,
        )
    }

    fn subject(kind: &str, name: &str) -> Subject {
        Subject {
            group_kind: GroupKind::new(BOOTSTRAP_GROUP, kind),
            namespace: "default".into(),
            name: name.into(),
        }
    }

    fn owner() -> Vec<Owner> {
        vec![Owner {
            name: "worker-a".into(),
            uid: "2c7e7b6a-0000-4000-8000-000000000001".into(),
        }]
    }

    /// Every kind of the provider records, in its record's group.
    #[test]
    fn every_default_kind_rejects_an_edit_of_a_config_in_use() {
        for p in PROVIDERS {
            an_edit_of_a_config_in_use_is_rejected(p.group, p.config_kind);
        }
    }

    fn an_edit_of_a_config_in_use_is_rejected(group: &str, kind: &str) {
        let old = json!({"files": [{"path": "/etc/a", "content": "one"}]});
        let new = json!({"files": [{"path": "/etc/a", "content": "two"}]});
        let finding = judge(
            &Settings::default(),
            &Subject {
                group_kind: GroupKind::new(group, kind),
                ..subject(kind, "worker-a-0123abcd")
            },
            &owner(),
            &Settings::default().field_rules(kind),
            Some(&old),
            Some(&new),
        )
        .unwrap();
        assert_eq!(finding.action, Action::Reject);
        assert_eq!(
            finding.violations,
            vec![Violation::new(
                "spec.files[0].content",
                "Forbidden: changed"
            )]
        );
        let name = suggested_name(
            "worker-a",
            &spec_fingerprint(Some(&new), &Settings::default().field_rules(kind)),
        );
        assert!(finding.explanation.contains(&format!(
            "create a new {kind} {name:?} in namespace default with the desired spec, then set \
             spec.template.spec.bootstrap.configRef.name of MachinePool default/worker-a to {name:?}"
        )), "{}", finding.explanation);
    }

    /// A topology's config: the remediation is the ClusterClass, never a rotation (a pool
    /// pointed at a config of a person's stops the topology controller, seen in the cluster
    /// test), and no name is suggested; the verdict and the paths are rule 2's.
    #[rstest]
    #[case::reject(Action::Reject, "spec.files[0].content edited in place, not recorded in MachinePool default/worker-a; change the ClusterClass")]
    #[case::warn(Action::Warn, "spec.files[0].content edited in place, not recorded in MachinePool default/worker-a; change the ClusterClass")]
    fn a_topology_config_edit_names_the_cluster_class(
        #[case] action: Action,
        #[case] warning: &str,
    ) {
        let settings = Settings {
            in_place_edits: action,
            ..Settings::default()
        };
        let rules = settings.field_rules("KubeadmConfig");
        let (old, new) = (
            json!({"files": [{"path": "/etc/a", "content": "one"}]}),
            json!({"files": [{"path": "/etc/a", "content": "two"}]}),
        );
        let (old, new) = (Node::from_value(&old), Node::from_value(&new));
        let subject = subject("KubeadmConfig", "c2-pool-0-x7k2p");
        let changes = compared_changes(&subject, &rules, Some(&old), Some(&new));
        let finding = check(
            &settings,
            &subject,
            &owner(),
            &rules,
            &changes,
            Some(&new),
            true,
            None,
        )
        .unwrap();
        assert_eq!(finding.action, action);
        assert_eq!(
            finding.violations,
            vec![Violation::new(
                "spec.files[0].content",
                "Forbidden: changed"
            )]
        );
        assert_eq!(finding.suggested_name, None);
        assert!(
            finding.explanation.ends_with(TOPOLOGY_REMEDIATION)
                && !finding.explanation.contains("configRef.name of"),
            "{}",
            finding.explanation
        );
        assert_eq!(finding.warning, warning);
        assert!(finding.warning.len() <= 120);
    }

    #[test]
    fn not_in_use_or_allowed_means_no_finding() {
        let old = json!({"files": []});
        let new = json!({"files": [{"path": "/x"}]});
        assert!(judge(
            &Settings::default(),
            &subject("KubeadmConfig", "c"),
            &[],
            &Settings::default().field_rules("KubeadmConfig"),
            Some(&old),
            Some(&new)
        )
        .is_none());
        let allow = Settings {
            in_place_edits: Action::Allow,
            ..Settings::default()
        };
        assert!(judge(
            &allow,
            &subject("KubeadmConfig", "c"),
            &owner(),
            &Settings::default().field_rules("KubeadmConfig"),
            Some(&old),
            Some(&new)
        )
        .is_none());
    }

    #[test]
    fn long_change_lists_are_bounded_and_counted() {
        let old =
            json!({"preKubeadmCommands": (0..25).map(|i| format!("echo {i}")).collect::<Vec<_>>()});
        let new = json!({"preKubeadmCommands": (0..25).map(|i| format!("echo {}", i + 1)).collect::<Vec<_>>()});
        let finding = judge(
            &Settings::default(),
            &subject("KubeadmConfig", "c"),
            &owner(),
            &Settings::default().field_rules("KubeadmConfig"),
            Some(&old),
            Some(&new),
        )
        .unwrap();
        assert_eq!(finding.violations.len(), MAX_REPORTED_PATHS + 1);
        assert_eq!(finding.violations[9].field, "spec.preKubeadmCommands[9]");
        assert_eq!(
            finding.violations[10],
            Violation::new("", "and 15 more changed fields")
        );
        assert!(finding
            .warning
            .starts_with("spec.preKubeadmCommands[0] (+24 more) edited in place"));
    }

    const DOCS: &str = INFRASTRUCTURE_DOCS;

    fn kinds(kinds: &[(&str, &str)]) -> Vec<GroupKind> {
        kinds.iter().map(|(g, k)| GroupKind::new(g, k)).collect()
    }

    /// What the refusal says of the pools' infrastructure: what holds everywhere without
    /// lookups or for a kind without a record; with lookups, what the pool's kind does after a
    /// rotation, or, where new content under the same Secret rolls every node, that this edit
    /// would, unless the bootstrap provider renders once.
    #[rstest]
    #[case::no_lookups("KubeadmConfig", None, "Whether existing instances are then replaced is the infrastructure provider's choice (DOCS).")]
    #[case::no_pool_kind_read("KubeadmConfig", Some(&[][..]), "Whether existing instances are then replaced is the infrastructure provider's choice (DOCS).")]
    #[case::unknown_kind("KubeadmConfig", Some(&[("infrastructure.cluster.x-k8s.io", "ExampleMachinePool")][..]), "Whether existing instances are then replaced is the infrastructure provider's choice (DOCS).")]
    #[case::no_infrastructure_ref("KubeadmConfig", Some(&[("", "")][..]), "Whether existing instances are then replaced is the infrastructure provider's choice (DOCS).")]
    #[case::azure("KubeadmConfig", Some(&[("infrastructure.cluster.x-k8s.io", "AzureMachinePool")][..]), "On a rotation, AzureMachinePool replaces no existing instance: new instances take the new data; delete the pool's Machines to replace them (CAPI drains each node first); CAPZ documents deleting their AzureMachinePoolMachines (DOCS).")]
    #[case::aws("KubeadmConfig", Some(&[("infrastructure.cluster.x-k8s.io", "AWSMachinePool")][..]), "On a rotation, AWSMachinePool replaces the existing instances with an instance refresh, unless spec.refreshPreferences.disable is true; CAPA v2.11.1 starts none on the first change after an upgrade from a CAPA that did not tag the launch template with the data Secret's name, and does not retry one that fails to start (DOCS).")]
    #[case::eks_config_on_eks("EKSConfig", Some(&[("infrastructure.cluster.x-k8s.io", "AWSManagedMachinePool")][..]), "This edit would still reach the nodes, unrecorded: AWSManagedMachinePool rolls every node on a new launch template version, an in-place edit included, if it has spec.awsLaunchTemplate; a rotation rolls them too, recorded in the pool (DOCS).")]
    #[case::rke2_on_eks_renders_once("RKE2Config", Some(&[("infrastructure.cluster.x-k8s.io", "AWSManagedMachinePool")][..]), "On a rotation, AWSManagedMachinePool rolls every node on the new launch template version if it has spec.awsLaunchTemplate; without one it reads no bootstrap data (DOCS).")]
    #[case::aks("KubeadmConfig", Some(&[("infrastructure.cluster.x-k8s.io", "AzureManagedMachinePool")][..]), "AzureManagedMachinePool never reads bootstrap data: neither a rotation nor an edit reaches its nodes (DOCS).")]
    #[case::other_group("KubeadmConfig", Some(&[("example.com", "AzureMachinePool")][..]), "Whether existing instances are then replaced is the infrastructure provider's choice (DOCS).")]
    #[case::two_pools_one_kind("KubeadmConfig", Some(&[("infrastructure.cluster.x-k8s.io", "DockerMachinePool"), ("infrastructure.cluster.x-k8s.io", "DockerMachinePool")][..]), "On a rotation, DockerMachinePool replaces no existing instance: new instances take the new data; delete the pool's Machines to replace them (DOCS).")]
    #[case::two_kinds("KubeadmConfig", Some(&[("infrastructure.cluster.x-k8s.io", "DockerMachinePool"), ("infrastructure.cluster.x-k8s.io", "ExampleMachinePool")][..]), "On a rotation, DockerMachinePool replaces no existing instance: new instances take the new data; delete the pool's Machines to replace them (DOCS). Whether existing instances are then replaced is the infrastructure provider's choice (DOCS).")]
    fn what_the_refusal_says_of_the_infrastructure(
        #[case] config_kind: &str,
        #[case] pools: Option<&[(&str, &str)]>,
        #[case] expected: &str,
    ) {
        let pools = pools.map(kinds);
        assert_eq!(
            infrastructure_effect(config_kind, pools.as_deref()),
            expected.replace("DOCS", DOCS)
        );
    }
}
