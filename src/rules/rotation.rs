//! Rule 1, rotation: a MachinePool changes its bootstrap config by pointing
//! `spec.template.spec.bootstrap.configRef` at another object. That is allowed, to any
//! provider's kind, and checked: the new ref must be resolvable, in the pool's namespace, and
//! (with lookups) its target must exist, be free and differ from the old one. When a ref counts
//! as rotated is [`crate::webhooks::config_ref_holder`]'s decision.

use crate::canonical_form::canonical_form;
use crate::capi::config_ref::{RefIdentity, CONFIG_REF};
use crate::capi::kinds::{is_machine_pool, GroupKind};
use crate::capi::owners::machine_pool_controllers;
use crate::lookups::{self, Lookups};
use crate::reader::node::Node;
use crate::reader::object::Object;
use crate::reader::request::Request;
use crate::rules::contract::check_config_status;
use crate::settings::{Action, Settings};
use crate::verdict::{Finding, Violation};

/// A ref naming another namespace: CAPI looks configs up only in the referrer's own.
pub fn check_namespace(request: &Request, new_id: &RefIdentity) -> Option<Finding> {
    if new_id.namespace.is_empty() || new_id.namespace == request.namespace {
        return None;
    }
    Some(Finding {
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
    })
}

/// A ref to a kind this policy does not judge: its in-place edits go unchecked, said once.
/// MachinePools name configs; MachineDeployments and MachineSets name templates. A ref without
/// group or kind is the contract check's (rule 5).
pub fn check_kind_listed(
    settings: &Settings,
    request: &Request,
    target: &GroupKind,
) -> Option<Finding> {
    if target.group.is_empty() || target.kind.is_empty() {
        return None;
    }
    let covered = if is_machine_pool(&request.group_kind.group, &request.group_kind.kind) {
        settings.is_bootstrap_config(&target.group, &target.kind)
    } else {
        settings.is_bootstrap_template(&target.group, &target.kind)
    };
    (!covered).then(|| {
        Finding::warning(format!(
            "configRef kind {} is not in bootstrapConfigKinds: its in-place edits are not checked",
            target.qualified()
        ))
    })
}

/// With lookups, on a rotation: the new target exists, no other pool controls it, it differs
/// from the old target, and it honours the contract once ready.
pub fn check_target(
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
    findings.extend(check_controlled_by_another(
        request,
        target,
        &named,
        &new_config,
    ));
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
                findings.extend(check_same_content(
                    settings,
                    target,
                    (&old_id, &old_config),
                    (new_id, &new_config),
                ));
            }
        }
    }
    findings.extend(check_target_status(settings, &new_config, &short, &named));
    findings
}

/// The new target (`named`, as messages name it) controlled by another MachinePool than the
/// request's: refused, the pool could not adopt it.
fn check_controlled_by_another(
    request: &Request,
    target: &GroupKind,
    named: &str,
    new_config: &Object,
) -> Option<Finding> {
    let pool_uid = request.object.and_then(|o| o.uid.as_deref()).unwrap_or("");
    let others: Vec<String> = machine_pool_controllers(Some(new_config))
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
    if others.is_empty() {
        return None;
    }
    Some(Finding {
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
    })
}

/// The new target's spec the same as the old target's (each a ref and the config it names):
/// a warning, the rotation changes nothing.
fn check_same_content(
    settings: &Settings,
    target: &GroupKind,
    (old_id, old_config): (&RefIdentity, &Object),
    (new_id, new_config): (&RefIdentity, &Object),
) -> Option<Finding> {
    let rules = settings.field_rules(&target.kind);
    // The canonical specs themselves, not their fingerprints: exact.
    (canonical_form("spec", old_config.spec.as_ref(), &rules)
        == canonical_form("spec", new_config.spec.as_ref(), &rules))
    .then(|| {
        Finding::warning(format!(
            "{} has the same content as {}: a rotation for nothing",
            new_id.name, old_id.name
        ))
    })
}

/// The new target's status against the bootstrap contract (`short` and `named`: the target as
/// the warning and the violations name it).
fn check_target_status(
    settings: &Settings,
    new_config: &Object,
    short: &str,
    named: &str,
) -> Option<Finding> {
    let mut flag = check_config_status(settings, new_config.status.as_ref())?;
    flag.warning = format!(
        "configRef target {short} is ready without status.dataSecretName (bootstrap contract)"
    );
    for v in &mut flag.violations {
        v.detail = format!("{} (of {named})", v.detail);
    }
    Some(flag)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capi::kinds::BOOTSTRAP_GROUP;
    use crate::lookups::{list_answer, ListRequest};
    use crate::reader::json::read_document;
    use crate::reader::request::RequestDoc;
    use rstest::rstest;
    use serde_json::{json, Value};

    /// `check` on the request of an UPDATE of a `kind` (CAPI's group) named `pool-a` in namespace
    /// `fleet`, its object `object`.
    fn with_request<T>(kind: &str, object: Value, check: impl FnOnce(&Request) -> T) -> T {
        let json = serde_json::to_vec(&json!({
            "kind": {"group": "cluster.x-k8s.io", "version": "v1beta2", "kind": kind},
            "operation": "UPDATE", "namespace": "fleet", "name": "pool-a",
            "object": object, "oldObject": {},
        }))
        .unwrap();
        let doc = read_document(&json, RequestDoc::read).unwrap();
        let (group_kind, version) = doc.kind_of().unwrap();
        let request = Request::parse(&doc, group_kind, &version).unwrap();
        check(&request)
    }

    fn id(namespace: &str) -> RefIdentity {
        RefIdentity {
            group: BOOTSTRAP_GROUP.into(),
            kind: "KubeadmConfig".into(),
            name: "kc-2".into(),
            namespace: namespace.into(),
        }
    }

    #[rstest]
    #[case::no_namespace("MachinePool", "", None)]
    #[case::its_own("MachinePool", "fleet", None)]
    #[case::another(
        "MachinePool",
        "other",
        Some("Invalid value: \"other\": must be the MachinePool's namespace \"fleet\"")
    )]
    #[case::a_deployment_too(
        "MachineDeployment",
        "other",
        Some("Invalid value: \"other\": must be the MachineDeployment's namespace \"fleet\"")
    )]
    fn the_ref_stays_in_the_namespace(
        #[case] kind: &str,
        #[case] namespace: &str,
        #[case] detail: Option<&str>,
    ) {
        let finding = with_request(kind, json!({}), |r| check_namespace(r, &id(namespace)));
        assert_eq!(
            finding.as_ref().map(|f| (f.action, f.violations.clone())),
            detail.map(|d| (
                Action::Reject,
                vec![Violation::new(
                    "spec.template.spec.bootstrap.configRef.namespace",
                    d
                )]
            ))
        );
        if let Some(finding) = finding {
            assert_eq!(
                finding.explanation,
                format!("CAPI looks bootstrap configs up only in the {kind}'s namespace. Create the config in namespace \"fleet\" and omit configRef.namespace")
            );
        }
    }

    #[rstest]
    #[case::pool_to_a_config("MachinePool", BOOTSTRAP_GROUP, "KubeadmConfig", None)]
    #[case::pool_to_another_provider("MachinePool", BOOTSTRAP_GROUP, "RKE2Config", None)]
    #[case::pool_to_a_template(
        "MachinePool",
        BOOTSTRAP_GROUP,
        "KubeadmConfigTemplate",
        Some("KubeadmConfigTemplate.bootstrap.cluster.x-k8s.io")
    )]
    #[case::pool_to_an_unlisted_kind(
        "MachinePool",
        "bootstrap.example.com",
        "ExampleConfig",
        Some("ExampleConfig.bootstrap.example.com")
    )]
    #[case::deployment_to_a_template(
        "MachineDeployment",
        BOOTSTRAP_GROUP,
        "KubeadmConfigTemplate",
        None
    )]
    #[case::machine_set_to_a_config(
        "MachineSet",
        BOOTSTRAP_GROUP,
        "KubeadmConfig",
        Some("KubeadmConfig.bootstrap.cluster.x-k8s.io")
    )]
    #[case::no_group("MachinePool", "", "KubeadmConfig", None)]
    #[case::no_kind("MachinePool", BOOTSTRAP_GROUP, "", None)]
    fn a_kind_outside_the_settings_is_said_once(
        #[case] referrer: &str,
        #[case] group: &str,
        #[case] kind: &str,
        #[case] named: Option<&str>,
    ) {
        let target = GroupKind::new(group, kind);
        let finding = with_request(referrer, json!({}), |r| {
            check_kind_listed(&Settings::default(), r, &target)
        });
        assert_eq!(
            finding.map(|f| (f.action, f.warning)),
            named.map(|n| (
                Action::Warn,
                format!("configRef kind {n} is not in bootstrapConfigKinds: its in-place edits are not checked")
            ))
        );
    }

    /// The configs of namespace `fleet` by name, as the host answers `metadata.name=<name>`;
    /// `None`: the lookup fails.
    struct Configs(Option<Vec<Value>>);

    impl Lookups for Configs {
        fn list(&self, request: &ListRequest) -> Result<Vec<u8>, String> {
            let configs = self.0.as_ref().ok_or("forbidden")?;
            let name = request.field_selector.as_deref().unwrap_or("");
            let items: Vec<Value> = configs
                .iter()
                .filter(|c| {
                    Some(name)
                        == c["metadata"]["name"]
                            .as_str()
                            .map(|n| format!("metadata.name={n}"))
                            .as_deref()
                })
                .cloned()
                .collect();
            Ok(list_answer(&items))
        }
    }

    fn config(name: &str, owner: Option<&str>, spec: Value, status: Value) -> Value {
        let owners: Vec<Value> = owner
            .into_iter()
            .map(|o| json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool", "name": o, "uid": format!("uid-{o}"), "controller": true}))
            .collect();
        json!({"metadata": {"name": name, "ownerReferences": owners}, "spec": spec, "status": status})
    }

    #[rstest]
    #[case::a_fresh_target(Some(vec![config("kc-1", Some("pool-a"), json!({"files": [1]}), json!({})), config("kc-2", None, json!({"files": [2]}), json!({}))]), &[])]
    #[case::not_there_yet(Some(vec![]), &["configRef target KubeadmConfig kc-2 does not exist yet: the MachinePool waits for it"])]
    #[case::lookup_failed(None, &["KubeadmConfig lookup failed, judged by ownerReferences only: forbidden"])]
    #[case::its_own_already(Some(vec![config("kc-2", Some("pool-a"), json!({"files": [2]}), json!({}))]), &[])]
    #[case::another_pools(Some(vec![config("kc-2", Some("pool-b"), json!({"files": [2]}), json!({}))]), &["spec.template.spec.bootstrap.configRef.name: Forbidden: KubeadmConfig fleet/kc-2 is controlled by MachinePool fleet/pool-b"])]
    #[case::same_content(Some(vec![config("kc-1", Some("pool-a"), json!({"files": [1]}), json!({})), config("kc-2", None, json!({"files": [1]}), json!({}))]), &["kc-2 has the same content as kc-1: a rotation for nothing"])]
    #[case::ready_without_secret(Some(vec![config("kc-2", None, json!({}), json!({"ready": true}))]), &["configRef target KubeadmConfig kc-2 is ready without status.dataSecretName (bootstrap contract)"])]
    fn the_target_of_a_rotation(#[case] configs: Option<Vec<Value>>, #[case] expected: &[&str]) {
        let pool = json!({"metadata": {"name": "pool-a", "uid": "uid-pool-a"}});
        let old_ref = json!({"apiGroup": BOOTSTRAP_GROUP, "kind": "KubeadmConfig", "name": "kc-1"});
        let old_ref = Node::from_value(&old_ref);
        let target = GroupKind::new(BOOTSTRAP_GROUP, "KubeadmConfig");
        let findings = with_request("MachinePool", pool, |r| {
            check_target(
                &Settings::default(),
                r,
                &Configs(configs),
                &target,
                &id(""),
                Some(&old_ref),
            )
        });
        let said: Vec<String> = findings
            .iter()
            .map(|f| match (f.action, f.violations.first()) {
                (Action::Reject, Some(v)) => format!("{}: {}", v.field, v.detail),
                _ => f.warning.clone(),
            })
            .collect();
        assert_eq!(said, expected);
    }
}
