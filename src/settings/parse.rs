//! Settings read from JSON: every key and item checked, every problem reported at once, each
//! naming its key.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde_json::Value;

use crate::capi::kinds::{is_machine_pool, GroupKind, BOOTSTRAP_GROUP};
use crate::capi::paths::PathPattern;
use crate::reader::json::{read_document, serde_message};
use crate::reader::node::{Node, Str};
use crate::settings::validation::{valid_group, valid_kind, valid_version};
use crate::settings::{Action, Settings};

const KEYS: [&str; 12] = [
    "inPlaceEdits",
    "templateEdits",
    "contractViolations",
    "deleteOwnedConfigs",
    "exemptUsers",
    "exemptGroups",
    "controllerUsers",
    "bootstrapConfigKinds",
    "ignoredPaths",
    "fillOncePaths",
    "contextAware",
    "capiVersion",
];

impl Settings {
    /// [`Settings::from_node`] on settings a tool holds as a `serde_json` value (seen as a
    /// node, its strings borrowed).
    pub fn from_value(value: &Value) -> Result<Settings, String> {
        Settings::from_node(&Node::from_value(value))
    }

    /// Parses and validates settings; the error lists every problem, each naming its key.
    pub(crate) fn from_node(value: &Node) -> Result<Settings, String> {
        let mut errors = Vec::new();
        let mut settings = Settings::default();
        let entries = match value {
            Node::Null => return Ok(settings),
            Node::Object(entries) => entries,
            other => {
                return Err(format!(
                    "settings must be an object, got {}",
                    node_type_name(other)
                ))
            }
        };
        for (key, _) in entries {
            let key = key.to_str();
            if !KEYS.contains(&&*key) {
                errors.push(format!(
                    "{key}: unknown setting (known: {})",
                    KEYS.join(", ")
                ));
            }
        }
        read_actions(value, &mut settings, &mut errors);
        read_identities_and_kinds(value, &mut settings, &mut errors);
        read_lookups(value, &mut settings, &mut errors);
        // After bootstrapConfigKinds: the paths' kinds are checked against it.
        for (key, slot) in [
            ("ignoredPaths", &mut settings.ignored_paths),
            ("fillOncePaths", &mut settings.fill_once_paths),
        ] {
            if let Some(v) = value.get(key) {
                match paths_by_kind(v, key, &settings.bootstrap_config_kinds) {
                    Ok(paths) => *slot = paths,
                    Err(e) => errors.extend(e),
                }
            }
        }
        if errors.is_empty() {
            errors.extend(settings.contradictions());
        }
        if errors.is_empty() {
            Ok(settings)
        } else {
            Err(errors.join("; "))
        }
    }
}

/// The four actions: inPlaceEdits, templateEdits, contractViolations, deleteOwnedConfigs.
fn read_actions(value: &Node, settings: &mut Settings, errors: &mut Vec<String>) {
    if let Some(v) = value.get("inPlaceEdits") {
        match action(v, "inPlaceEdits", &["reject", "warn", "allow"]) {
            Ok(a) => settings.in_place_edits = a,
            Err(e) => errors.push(e),
        }
    }
    if let Some(v) = value.get("templateEdits") {
        match action(v, "templateEdits", &["reject", "warn", "allow"]) {
            Ok(a) => settings.template_edits = a,
            Err(e) => errors.push(e),
        }
    }
    if let Some(v) = value.get("contractViolations") {
        match action(v, "contractViolations", &["reject", "warn", "ignore"]) {
            Ok(a) => settings.contract_violations = a,
            Err(e) => errors.push(e),
        }
    }
    if let Some(v) = value.get("deleteOwnedConfigs") {
        match action(v, "deleteOwnedConfigs", &["reject", "warn", "allow"]) {
            Ok(a) => settings.delete_owned_configs = a,
            Err(e) => errors.push(e),
        }
    }
}

/// The identity lists (exemptUsers, exemptGroups, controllerUsers) and bootstrapConfigKinds.
fn read_identities_and_kinds(value: &Node, settings: &mut Settings, errors: &mut Vec<String>) {
    for (key, slot) in [
        ("exemptUsers", &mut settings.exempt_users),
        ("exemptGroups", &mut settings.exempt_groups),
        ("controllerUsers", &mut settings.controller_users),
    ] {
        if let Some(v) = value.get(key) {
            match string_list(v, key) {
                Ok(list) => *slot = list,
                Err(e) => errors.extend(e),
            }
        }
    }
    if let Some(v) = value.get("bootstrapConfigKinds") {
        match kinds(v) {
            Ok((list, versions)) => {
                settings.bootstrap_config_kinds = list;
                settings.kind_versions = versions;
            }
            Err(e) => errors.extend(e),
        }
    }
}

/// contextAware and capiVersion.
fn read_lookups(value: &Node, settings: &mut Settings, errors: &mut Vec<String>) {
    match value.get("contextAware") {
        None => {}
        Some(Node::Bool(b)) => settings.context_aware = *b,
        Some(other) => errors.push(format!(
            "contextAware: must be true or false, got {}",
            node_type_name(other)
        )),
    }
    match value
        .get("capiVersion")
        .map(|v| v.as_str().map(Str::to_str))
    {
        None => {}
        Some(Some(v)) if v == "v1beta1" || v == "v1beta2" => {
            settings.capi_version = Cow::Owned(v.into_owned())
        }
        Some(_) => errors.push("capiVersion: must be \"v1beta1\" or \"v1beta2\"".to_string()),
    }
}

/// How settings and manifest errors name a JSON value's type (the tools' manifests are
/// `serde_json` values).
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// [`type_name`] of a node.
fn node_type_name(value: &Node) -> &'static str {
    match value {
        Node::Null => "null",
        Node::Bool(_) => "a boolean",
        Node::Number(_) => "a number",
        Node::String(_) => "a string",
        Node::Array(_) => "a list",
        Node::Object(_) => "an object",
    }
}

fn action(value: &Node, key: &str, names: &[&str; 3]) -> Result<Action, String> {
    match value.as_str() {
        Some(s) if s.is(names[0]) => Ok(Action::Reject),
        Some(s) if s.is(names[1]) => Ok(Action::Warn),
        Some(s) if s.is(names[2]) => Ok(Action::Allow),
        Some(s) => Err(format!(
            "{key}: unknown value {:?} (expected one of {})",
            s.to_str(),
            names.join(", ")
        )),
        None => Err(format!(
            "{key}: must be one of {}, got {}",
            names.join(", "),
            node_type_name(value)
        )),
    }
}

/// Parses a list item by item, collecting every item's error (prefixed `key[i]: `).
fn each<T>(
    value: &Node,
    key: &str,
    what: &str,
    mut item: impl FnMut(&Node) -> Result<T, String>,
) -> Result<Vec<T>, Vec<String>> {
    let Node::Array(items) = value else {
        return Err(vec![format!(
            "{key}: must be a list of {what}, got {}",
            node_type_name(value)
        )]);
    };
    let mut errors = Vec::new();
    let mut list = Vec::new();
    for (i, v) in items.iter().enumerate() {
        match item(v) {
            Ok(parsed) => list.push(parsed),
            Err(e) => errors.push(format!("{key}[{i}]: {e}")),
        }
    }
    if errors.is_empty() {
        Ok(list)
    } else {
        Err(errors)
    }
}

fn string_list(value: &Node, key: &str) -> Result<Vec<Cow<'static, str>>, Vec<String>> {
    each(value, key, "strings", |item| {
        match item.as_str().map(Str::to_str) {
            Some(s) if !s.trim().is_empty() && s.trim() == s => Ok(Cow::Owned(s.into_owned())),
            Some(s) => Err(format!(
                "{s:?} is empty or has surrounding spaces (identities match exactly)"
            )),
            None => Err(format!("must be a string, got {}", node_type_name(item))),
        }
    })
}

type KindList = (Vec<GroupKind>, BTreeMap<GroupKind, String>);

fn kinds(value: &Node) -> Result<KindList, Vec<String>> {
    const KEY: &str = "bootstrapConfigKinds";
    let Node::Array(items) = value else {
        return Err(vec![format!(
            "{KEY}: must be a list of {{apiGroup, kind}}, got {}",
            node_type_name(value)
        )]);
    };
    if items.is_empty() {
        return Err(vec![format!(
            "{KEY}: an empty list would switch the in-place edit check off; \
             set inPlaceEdits: allow to do that explicitly"
        )]);
    }
    let mut errors = Vec::new();
    let mut list: Vec<GroupKind> = Vec::new();
    let mut versions = BTreeMap::new();
    for (i, item) in items.iter().enumerate() {
        let Node::Object(fields) = item else {
            errors.push(format!(
                "{KEY}[{i}]: must be an object {{apiGroup, kind}}, got {}",
                node_type_name(item)
            ));
            continue;
        };
        for (key, _) in fields {
            if !(key.is("apiGroup") || key.is("kind") || key.is("version")) {
                let key = key.to_str();
                errors.push(format!(
                    "{KEY}[{i}].{key}: unknown field (expected apiGroup, kind and optionally version)"
                ));
            }
        }
        let text = |key: &str| item.get(key).and_then(Node::as_str).map(Str::to_str);
        let (group, kind) = (text("apiGroup"), text("kind"));
        let (group, kind) = (
            group.as_deref().unwrap_or(""),
            kind.as_deref().unwrap_or(""),
        );
        if !valid_group(group) {
            errors.push(format!(
                "{KEY}[{i}].apiGroup: {group:?} is not an API group such as {BOOTSTRAP_GROUP:?}"
            ));
        }
        if !valid_kind(kind) {
            errors.push(format!(
                "{KEY}[{i}].kind: {kind:?} is not a Kind such as \"KubeadmConfig\""
            ));
        }
        if is_machine_pool(group, kind) {
            errors.push(format!(
                "{KEY}[{i}]: MachinePool is the consumer of bootstrap configs, not one"
            ));
        }
        let gk = GroupKind::new(group, kind);
        if list.contains(&gk) {
            errors.push(format!("{KEY}[{i}]: {} is listed twice", gk.qualified()));
        }
        match item.get("version") {
            None => {}
            Some(Node::String(v)) if valid_version(&v.to_str()) => {
                versions.insert(gk.clone(), v.to_str().into_owned());
            }
            Some(other) => errors.push(format!(
                "{KEY}[{i}].version: {} is not an API version such as \"v1beta2\"",
                other.to_json()
            )),
        }
        list.push(gk);
    }
    if errors.is_empty() {
        Ok((list, versions))
    } else {
        Err(errors)
    }
}

fn paths_by_kind(
    value: &Node,
    key: &str,
    kinds: &[GroupKind],
) -> Result<BTreeMap<String, Vec<PathPattern>>, Vec<String>> {
    let Node::Object(entries) = value else {
        return Err(vec![format!(
            "{key}: must be a map of kind to a list of paths, got {}",
            node_type_name(value)
        )]);
    };
    let mut errors = Vec::new();
    let mut out = BTreeMap::new();
    for (kind, paths) in entries {
        let kind = kind.to_str();
        if !kinds.iter().any(|gk| gk.kind == kind) {
            errors.push(format!(
                "{key}.{kind}: {kind} is not one of bootstrapConfigKinds ({})",
                kinds
                    .iter()
                    .map(|gk| &*gk.kind)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            continue;
        }
        match parse_paths(paths, &format!("{key}.{kind}")) {
            Ok(list) => {
                out.insert(kind.into_owned(), list);
            }
            Err(e) => errors.extend(e),
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

fn parse_paths(value: &Node, key: &str) -> Result<Vec<PathPattern>, Vec<String>> {
    each(value, key, "paths", |item| match item.as_str() {
        Some(path) => PathPattern::parse(&path.to_str()),
        None => Err(format!("must be a string, got {}", node_type_name(item))),
    })
}

/// The settings of a `validate_settings` payload, or the message that refuses them (a payload
/// that is no JSON gets serde_json's message).
pub fn settings_from_payload(payload: &[u8]) -> Result<Settings, String> {
    let settings = read_document(payload, |r| r.read_node())
        .map_err(|_| format!("settings are not valid JSON: {}", serde_message(payload)))?;
    Settings::from_node(&settings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capi::providers::DEFAULT_CONTROLLER_USERS;
    use rstest::rstest;
    use serde_json::json;

    #[test]
    fn empty_and_null_settings_are_the_defaults() {
        assert_eq!(
            Settings::from_value(&json!({})).unwrap(),
            Settings::default()
        );
        assert_eq!(
            Settings::from_value(&Value::Null).unwrap(),
            Settings::default()
        );
        let defaults = Settings::default();
        assert_eq!(defaults.in_place_edits, Action::Reject);
        assert_eq!(defaults.contract_violations, Action::Warn);
        // Cleaning rotated-out configs up is never refused by default.
        assert_eq!(defaults.delete_owned_configs, Action::Warn);
        assert_eq!(defaults.controller_users, DEFAULT_CONTROLLER_USERS);
        assert_eq!(
            defaults.bootstrap_config_kinds.len(),
            crate::capi::providers::PROVIDERS.len()
        );
    }

    #[test]
    fn every_key_is_read() {
        let settings = Settings::from_value(&json!({
            "inPlaceEdits": "warn", "contractViolations": "ignore", "deleteOwnedConfigs": "reject",
            "exemptUsers": ["alice"], "exemptGroups": ["admins"],
            "controllerUsers": ["system:serviceaccount:capi:manager"],
            "bootstrapConfigKinds": [{"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig"}],
            "ignoredPaths": {"KubeadmConfig": ["spec.files[*].content"]},
            "fillOncePaths": {"KubeadmConfig": ["spec.ntp.servers"]}
        }))
        .unwrap();
        assert_eq!(settings.in_place_edits, Action::Warn);
        assert_eq!(settings.contract_violations, Action::Allow);
        assert_eq!(settings.delete_owned_configs, Action::Reject);
        assert_eq!(settings.exempt_users, ["alice"]);
        assert_eq!(settings.exempt_groups, ["admins"]);
        assert_eq!(
            settings.controller_users,
            ["system:serviceaccount:capi:manager"]
        );
        assert_eq!(
            settings.bootstrap_config_kinds,
            [GroupKind::new(BOOTSTRAP_GROUP, "KubeadmConfig")]
        );
        assert_eq!(settings.field_rules("KubeadmConfig").ignored.len(), 2);
        assert_eq!(settings.field_rules("KubeadmConfig").fill_once.len(), 10);
    }

    #[rstest]
    #[case::typo_key(json!({"inPlaceEdit": "reject"}), "inPlaceEdit: unknown setting (known: inPlaceEdits, templateEdits, contractViolations")]
    #[case::bad_enum(json!({"inPlaceEdits": "rejct"}), "inPlaceEdits: unknown value \"rejct\" (expected one of reject, warn, allow)")]
    #[case::enum_case(json!({"inPlaceEdits": "Reject"}), "inPlaceEdits: unknown value \"Reject\"")]
    #[case::enum_of_the_other_key(json!({"contractViolations": "allow"}), "contractViolations: unknown value \"allow\" (expected one of reject, warn, ignore)")]
    #[case::delete_owned_configs(json!({"deleteOwnedConfigs": "refuse"}), "deleteOwnedConfigs: unknown value \"refuse\" (expected one of reject, warn, allow)")]
    #[case::delete_owned_configs_not_a_string(json!({"deleteOwnedConfigs": true}), "deleteOwnedConfigs: must be one of reject, warn, allow, got a boolean")]
    #[case::enum_not_a_string(json!({"inPlaceEdits": false}), "inPlaceEdits: must be one of reject, warn, allow, got a boolean")]
    #[case::users_not_a_list(json!({"exemptUsers": "alice"}), "exemptUsers: must be a list of strings, got a string")]
    #[case::user_empty(json!({"exemptUsers": [""]}), "exemptUsers[0]: \"\" is empty or has surrounding spaces")]
    #[case::user_padded(json!({"controllerUsers": ["system:serviceaccount:capi-system:capi-manager "]}), "controllerUsers[0]:")]
    #[case::group_number(json!({"exemptGroups": [7]}), "exemptGroups[0]: must be a string, got a number")]
    #[case::kinds_empty(json!({"bootstrapConfigKinds": []}), "bootstrapConfigKinds: an empty list would switch the in-place edit check off")]
    #[case::kinds_typo(json!({"bootstrapConfigKinds": [{"group": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig"}]}), "bootstrapConfigKinds[0].group: unknown field (expected apiGroup, kind and optionally version)")]
    #[case::kinds_lowercase(json!({"bootstrapConfigKinds": [{"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "kubeadmconfig"}]}), "bootstrapConfigKinds[0].kind: \"kubeadmconfig\" is not a Kind")]
    #[case::kinds_bad_group(json!({"bootstrapConfigKinds": [{"apiGroup": "Bootstrap.Cluster", "kind": "KubeadmConfig"}]}), "bootstrapConfigKinds[0].apiGroup: \"Bootstrap.Cluster\" is not an API group")]
    #[case::kinds_machine_pool(json!({"bootstrapConfigKinds": [{"apiGroup": "cluster.x-k8s.io", "kind": "MachinePool"}]}), "bootstrapConfigKinds[0]: MachinePool is the consumer of bootstrap configs")]
    #[case::kinds_twice(json!({"bootstrapConfigKinds": [{"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig"}, {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig"}]}), "bootstrapConfigKinds[1]: KubeadmConfig.bootstrap.cluster.x-k8s.io is listed twice")]
    #[case::paths_unknown_kind(json!({"ignoredPaths": {"KubeadmConfigs": ["spec.files"]}}), "ignoredPaths.KubeadmConfigs: KubeadmConfigs is not one of bootstrapConfigKinds")]
    #[case::paths_kind_not_configured(json!({"bootstrapConfigKinds": [{"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "EKSConfig"}], "fillOncePaths": {"KubeadmConfig": ["spec.files"]}}), "fillOncePaths.KubeadmConfig: KubeadmConfig is not one of bootstrapConfigKinds (EKSConfig)")]
    #[case::paths_not_a_map(json!({"ignoredPaths": ["spec.files"]}), "ignoredPaths: must be a map of kind to a list of paths, got a list")]
    #[case::path_malformed(json!({"ignoredPaths": {"KubeadmConfig": ["spec.files[*.content"]}}), "ignoredPaths.KubeadmConfig[0]: \"spec.files[*.content\": unclosed '['")]
    #[case::path_outside_spec(json!({"fillOncePaths": {"KubeadmConfig": ["status.ready"]}}), "fillOncePaths.KubeadmConfig[0]: \"status.ready\": paths start at \"spec.\"")]
    #[case::path_whole_spec(json!({"ignoredPaths": {"KubeadmConfig": ["spec.*"]}}), "ignoredPaths.KubeadmConfig[0]: \"spec.*\": matches the whole spec")]
    #[case::token_made_fill_once(json!({"fillOncePaths": {"KubeadmConfig": ["spec.joinConfiguration.discovery.bootstrapToken.token"]}}), "fillOncePaths/ignoredPaths: KubeadmConfig path \"spec.joinConfiguration.discovery.bootstrapToken.token\" is in both lists")]
    #[case::same_path_in_both(json!({"fillOncePaths": {"EKSConfig": ["spec.ntp"]}, "ignoredPaths": {"EKSConfig": ["spec.ntp"]}}), "EKSConfig path \"spec.ntp\" is in both lists")]
    #[case::not_an_object(json!(["reject"]), "settings must be an object, got a list")]
    #[case::context_aware_not_bool(json!({"contextAware": "true"}), "contextAware: must be true or false, got a string")]
    #[case::capi_version(json!({"capiVersion": "v1"}), "capiVersion: must be \"v1beta1\" or \"v1beta2\"")]
    #[case::kind_version_bad(json!({"bootstrapConfigKinds": [{"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "version": "beta"}]}), "bootstrapConfigKinds[0].version: \"beta\" is not an API version")]
    #[case::custom_kind_needs_version(json!({"contextAware": true, "bootstrapConfigKinds": [{"apiGroup": "bootstrap.example.com", "kind": "ExampleConfig"}]}), "bootstrapConfigKinds[0].version: contextAware needs the version to look ExampleConfig.bootstrap.example.com up in")]
    fn invalid_settings_name_their_key(#[case] settings: Value, #[case] fragment: &str) {
        let error = Settings::from_value(&settings).unwrap_err();
        assert!(error.contains(fragment), "{error}");
    }

    #[test]
    fn all_problems_are_reported_at_once() {
        let error = Settings::from_value(
            &json!({"inPlaceEdits": "x", "contractViolations": "y", "exemptUser": []}),
        )
        .unwrap_err();
        assert_eq!(error.matches("; ").count(), 2, "{error}");
    }
}
