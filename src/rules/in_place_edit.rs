//! Rule 2, in-place edits: a spec change of a bootstrap config in use by a MachinePool is not
//! rolled out to the pool's existing instances (cluster-api #8858, #4145), so it is refused
//! with every changed field and the rotation that does roll it out.
//!
//! Not compared, per kind (extendable in the settings), as [`crate::capi::provider_writes`] lists
//! them: machine-only fields, any change allowed (the bootstrap token CAPI rotates every
//! ~7.5 min), and fill-once fields, allowed from empty to a value (the discovery fields CAPI
//! fills, the providers' defaults). Empty objects equal absent ones and pruned zero values are
//! no change (see [`crate::diff`]).
//!
//! Asked on a bootstrap config's UPDATE: when the spec is compared and when the pools are
//! looked up is [`crate::webhooks::bootstrap_config`]'s decision; templates (rule 8) share
//! [`change_violations`].

use crate::capi::owners::Owner;
use crate::capi::provider_writes::as_defaulted;
use crate::diff::{changes_at, Change, FieldRules};
use crate::fingerprint::{fingerprint, suggested_name};
use crate::reader::json::Node;
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

/// The rotation that rolls a bootstrap change out: the remediation text and the new name it
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
        "To roll a change out, create a new {kind} {name:?} in namespace {ns} with the desired \
         spec, then set spec.template.spec.bootstrap.configRef.name of {pools} to {name:?}",
        ns = subject.namespace,
        pools = pools(subject, owners),
    );
    (text, name)
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

/// Rule 2 on an UPDATE of a config in use by `owners`, given its compared `changes`
/// ([`compared_changes`]). `rules` are the kind's non-compared fields
/// (`Settings::field_rules`), built once per request; they name the suggested rotation.
pub fn check(
    settings: &Settings,
    subject: &Subject,
    owners: &[Owner],
    rules: &FieldRules,
    changes: &[Change],
    new_spec: Option<&Node>,
) -> Option<Finding> {
    if owners.is_empty() || changes.is_empty() || settings.in_place_edits == Action::Allow {
        return None;
    }
    let violations = change_violations(changes);
    let pools = pools(subject, owners);
    let first = violations[0].field.clone();
    let (remediation, name) = rotation_remediation(subject, owners, new_spec, rules);
    let others = if changes.len() > 1 {
        format!(" (+{} more)", changes.len() - 1)
    } else {
        String::new()
    };
    Some(Finding {
        action: settings.in_place_edits,
        violations,
        explanation: format!(
            "The config is in use by {pools}, and CAPI does not roll in-place bootstrap edits out \
             to existing instances (cluster-api #8858). {remediation}"
        ),
        warning: format!(
            "{first}{others} edited in place: not rolled out to {pools}; rotate configRef"
        ),
        suggested_name: Some(name),
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
    use crate::capi::kinds::{GroupKind, BOOTSTRAP_GROUP, DEFAULT_BOOTSTRAP_CONFIG_KINDS};
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
    // Regression (found by tests/properties.rs): a list shrinking by null or {} elements was no change.
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

    #[rstest]
    fn token_is_only_machine_only_for_kubeadm(
        #[values(
            "EKSConfig",
            "NodeadmConfig",
            "RKE2Config",
            "K0sWorkerConfig",
            "KThreesConfig",
            "MicroK8sConfig",
            "TalosConfig"
        )]
        kind: &str,
    ) {
        let old = joined(json!({"token": "a"}));
        let new = joined(json!({"token": "b"}));
        assert_eq!(
            changes(kind, old, new),
            ["spec.joinConfiguration.discovery.bootstrapToken.token changed"]
        );
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
        check(settings, subject, owners, rules, &changes, new.as_ref())
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

    #[rstest]
    fn every_default_kind_rejects_an_edit_of_a_config_in_use(
        #[values(0, 1, 2, 3, 4, 5, 6, 7)] index: usize,
    ) {
        let kind = DEFAULT_BOOTSTRAP_CONFIG_KINDS[index];
        let old = json!({"files": [{"path": "/etc/a", "content": "one"}]});
        let new = json!({"files": [{"path": "/etc/a", "content": "two"}]});
        let finding = judge(
            &Settings::default(),
            &subject(kind, "worker-a-0123abcd"),
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
}
