//! The policy's settings: parsed by hand from JSON so every error names its key, and checked
//! for contradictions when the policy is applied, never at admission time.

use std::collections::BTreeMap;

use kubewarden_policy_sdk::settings::SettingsValidationResponse;
use serde_json::{Map, Value};

use crate::diff::FieldRules;
use crate::in_place_edit::default_field_rules;
use crate::kinds::{is_machine_pool, GroupKind, BOOTSTRAP_GROUP, DEFAULT_BOOTSTRAP_CONFIG_KINDS};
use crate::paths::PathPattern;

/// The identity of CAPI's core manager (topology controller included), default install names.
pub const DEFAULT_CONTROLLER_USER: &str = "system:serviceaccount:capi-system:capi-manager";

/// What to do with a finding of one rule family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Reject,
    Warn,
    /// Spelled `allow` for inPlaceEdits and `ignore` for contractViolations.
    Ignore,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    pub in_place_edits: Action,
    pub contract_violations: Action,
    pub exempt_users: Vec<String>,
    pub exempt_groups: Vec<String>,
    pub controller_users: Vec<String>,
    pub bootstrap_config_kinds: Vec<GroupKind>,
    /// Extra paths per kind, merged with the built-in defaults by [`Settings::field_rules`].
    pub ignored_paths: BTreeMap<String, Vec<PathPattern>>,
    pub fill_once_paths: BTreeMap<String, Vec<PathPattern>>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            in_place_edits: Action::Reject,
            contract_violations: Action::Warn,
            exempt_users: Vec::new(),
            exempt_groups: Vec::new(),
            controller_users: vec![DEFAULT_CONTROLLER_USER.to_string()],
            bootstrap_config_kinds: DEFAULT_BOOTSTRAP_CONFIG_KINDS
                .iter()
                .map(|kind| GroupKind::new(BOOTSTRAP_GROUP, kind))
                .collect(),
            ignored_paths: BTreeMap::new(),
            fill_once_paths: BTreeMap::new(),
        }
    }
}

const KEYS: [&str; 8] = [
    "inPlaceEdits",
    "contractViolations",
    "exemptUsers",
    "exemptGroups",
    "controllerUsers",
    "bootstrapConfigKinds",
    "ignoredPaths",
    "fillOncePaths",
];

impl Settings {
    /// Parses and validates settings; the error lists every problem, each naming its key.
    pub fn from_value(value: &Value) -> Result<Settings, String> {
        let mut errors = Vec::new();
        let mut settings = Settings::default();
        let map = match value {
            Value::Null => return Ok(settings),
            Value::Object(map) => map,
            other => {
                return Err(format!(
                    "settings must be an object, got {}",
                    type_name(other)
                ))
            }
        };
        for key in map.keys() {
            if !KEYS.contains(&key.as_str()) {
                errors.push(format!(
                    "{key}: unknown setting (known: {})",
                    KEYS.join(", ")
                ));
            }
        }
        if let Some(v) = map.get("inPlaceEdits") {
            match action(v, "inPlaceEdits", &["reject", "warn", "allow"]) {
                Ok(a) => settings.in_place_edits = a,
                Err(e) => errors.push(e),
            }
        }
        if let Some(v) = map.get("contractViolations") {
            match action(v, "contractViolations", &["reject", "warn", "ignore"]) {
                Ok(a) => settings.contract_violations = a,
                Err(e) => errors.push(e),
            }
        }
        for (key, slot) in [
            ("exemptUsers", &mut settings.exempt_users),
            ("exemptGroups", &mut settings.exempt_groups),
            ("controllerUsers", &mut settings.controller_users),
        ] {
            if let Some(v) = map.get(key) {
                match string_list(v, key) {
                    Ok(list) => *slot = list,
                    Err(e) => errors.extend(e),
                }
            }
        }
        if let Some(v) = map.get("bootstrapConfigKinds") {
            match kinds(v) {
                Ok(list) => settings.bootstrap_config_kinds = list,
                Err(e) => errors.extend(e),
            }
        }
        for (key, slot) in [
            ("ignoredPaths", &mut settings.ignored_paths),
            ("fillOncePaths", &mut settings.fill_once_paths),
        ] {
            if let Some(v) = map.get(key) {
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

    /// Whether `{group, kind}` is a bootstrap config this policy judges.
    pub fn is_bootstrap_config(&self, group: &str, kind: &str) -> bool {
        self.bootstrap_config_kinds
            .iter()
            .any(|gk| gk.group == group && gk.kind == kind)
    }

    /// Built-in non-compared fields of `kind`, extended by the settings.
    pub fn field_rules(&self, kind: &str) -> FieldRules {
        let mut rules = default_field_rules(kind);
        if let Some(extra) = self.ignored_paths.get(kind) {
            rules.ignored.extend(extra.iter().cloned());
        }
        if let Some(extra) = self.fill_once_paths.get(kind) {
            rules.fill_once.extend(extra.iter().cloned());
        }
        rules
    }

    fn contradictions(&self) -> Vec<String> {
        let mut errors = Vec::new();
        let kinds: Vec<&str> = self
            .ignored_paths
            .keys()
            .chain(self.fill_once_paths.keys())
            .map(String::as_str)
            .collect();
        for kind in kinds {
            let rules = self.field_rules(kind);
            for pattern in &rules.fill_once {
                if rules.ignored.iter().any(|p| p.as_str() == pattern.as_str()) {
                    errors.push(format!(
                        "fillOncePaths/ignoredPaths: {kind} path {pattern:?} is in both lists \
                         (built-in defaults included); a field is either machine-only or fill-once"
                    ));
                }
            }
        }
        errors.sort();
        errors.dedup();
        errors
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn action(value: &Value, key: &str, names: &[&str; 3]) -> Result<Action, String> {
    match value.as_str() {
        Some(s) if s == names[0] => Ok(Action::Reject),
        Some(s) if s == names[1] => Ok(Action::Warn),
        Some(s) if s == names[2] => Ok(Action::Ignore),
        Some(s) => Err(format!(
            "{key}: unknown value {s:?} (expected one of {})",
            names.join(", ")
        )),
        None => Err(format!(
            "{key}: must be one of {}, got {}",
            names.join(", "),
            type_name(value)
        )),
    }
}

fn string_list(value: &Value, key: &str) -> Result<Vec<String>, Vec<String>> {
    let Value::Array(items) = value else {
        return Err(vec![format!(
            "{key}: must be a list of strings, got {}",
            type_name(value)
        )]);
    };
    let mut errors = Vec::new();
    let mut list = Vec::new();
    for (i, item) in items.iter().enumerate() {
        match item.as_str() {
            Some(s) if !s.trim().is_empty() && s.trim() == s => list.push(s.to_string()),
            Some(s) => errors.push(format!(
                "{key}[{i}]: {s:?} is empty or has surrounding spaces (identities match exactly)"
            )),
            None => errors.push(format!(
                "{key}[{i}]: must be a string, got {}",
                type_name(item)
            )),
        }
    }
    if errors.is_empty() {
        Ok(list)
    } else {
        Err(errors)
    }
}

fn valid_kind(kind: &str) -> bool {
    kind.starts_with(|c: char| c.is_ascii_uppercase())
        && kind.bytes().all(|b| b.is_ascii_alphanumeric())
}

fn valid_group(group: &str) -> bool {
    !group.is_empty()
        && group.split('.').all(|label| {
            !label.is_empty()
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        })
}

fn kinds(value: &Value) -> Result<Vec<GroupKind>, Vec<String>> {
    const KEY: &str = "bootstrapConfigKinds";
    let Value::Array(items) = value else {
        return Err(vec![format!(
            "{KEY}: must be a list of {{apiGroup, kind}}, got {}",
            type_name(value)
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
    for (i, item) in items.iter().enumerate() {
        let Value::Object(entry) = item else {
            errors.push(format!(
                "{KEY}[{i}]: must be an object {{apiGroup, kind}}, got {}",
                type_name(item)
            ));
            continue;
        };
        for key in entry.keys() {
            if key != "apiGroup" && key != "kind" {
                errors.push(format!(
                    "{KEY}[{i}].{key}: unknown field (expected apiGroup and kind)"
                ));
            }
        }
        let group = entry.get("apiGroup").and_then(Value::as_str).unwrap_or("");
        let kind = entry.get("kind").and_then(Value::as_str).unwrap_or("");
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
        list.push(gk);
    }
    if errors.is_empty() {
        Ok(list)
    } else {
        Err(errors)
    }
}

fn paths_by_kind(
    value: &Value,
    key: &str,
    kinds: &[GroupKind],
) -> Result<BTreeMap<String, Vec<PathPattern>>, Vec<String>> {
    let Value::Object(map) = value else {
        return Err(vec![format!(
            "{key}: must be a map of kind to a list of paths, got {}",
            type_name(value)
        )]);
    };
    let mut errors = Vec::new();
    let mut out = BTreeMap::new();
    for (kind, paths) in map {
        if !kinds.iter().any(|gk| &gk.kind == kind) {
            errors.push(format!(
                "{key}.{kind}: {kind} is not one of bootstrapConfigKinds ({})",
                kinds
                    .iter()
                    .map(|gk| gk.kind.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            continue;
        }
        match parse_paths(paths, &format!("{key}.{kind}")) {
            Ok(list) => {
                out.insert(kind.clone(), list);
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

fn parse_paths(value: &Value, key: &str) -> Result<Vec<PathPattern>, Vec<String>> {
    let Value::Array(items) = value else {
        return Err(vec![format!(
            "{key}: must be a list of paths, got {}",
            type_name(value)
        )]);
    };
    let mut errors = Vec::new();
    let mut list = Vec::new();
    for (i, item) in items.iter().enumerate() {
        match item.as_str().map(PathPattern::parse) {
            Some(Ok(p)) => list.push(p),
            Some(Err(e)) => errors.push(format!("{key}[{i}]: {e}")),
            None => errors.push(format!(
                "{key}[{i}]: must be a string, got {}",
                type_name(item)
            )),
        }
    }
    if errors.is_empty() {
        Ok(list)
    } else {
        Err(errors)
    }
}

/// The `validate_settings` entry point: never an error, always a verdict naming the problem.
pub fn validate_settings_payload(payload: &[u8]) -> SettingsValidationResponse {
    let result = serde_json::from_slice::<Value>(payload)
        .map_err(|e| format!("settings are not valid JSON: {e}"))
        .and_then(|v| Settings::from_value(&v));
    match result {
        Ok(_) => SettingsValidationResponse {
            valid: true,
            message: None,
        },
        Err(message) => SettingsValidationResponse {
            valid: false,
            message: Some(message),
        },
    }
}

/// Parses the settings object of a `validate` payload (already validated by the host).
pub fn settings_of(payload: &Map<String, Value>) -> Result<Settings, String> {
    Settings::from_value(payload.get("settings").unwrap_or(&Value::Null))
}
