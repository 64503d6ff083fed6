//! What a person owns of a config: the object `--edit` shows and the new config is created
//! from (without what the API server, kubectl, clusterctl, the topology controller and CAPI's
//! controllers write), and the fields CAPI's controllers wrote that an edited manifest leaves
//! out, put back before the policy judges the edit.

use capi_bootstrap_rollout_policy::capi::paths::{FieldPath, PathPattern, Segment};
use capi_bootstrap_rollout_policy::settings::Settings;
use serde_json::{Map, Value};

use super::plan::key_of;

/// Metadata a person does not own, left out of the new object: what the API server, kubectl,
/// CAPI's conversion, clusterctl and the topology controller write. The labels and
/// annotations under these prefixes are theirs.
const NOT_COPIED_PREFIXES: [&str; 3] = [
    "topology.cluster.x-k8s.io/",
    "clusterctl.cluster.x-k8s.io/",
    "kubectl.kubernetes.io/",
];
const NOT_COPIED_ANNOTATIONS: [&str; 1] = ["cluster.x-k8s.io/conversion-data"];

/// `map` without the keys a person does not own.
pub(super) fn owned_entries(map: Option<&Value>, annotations: bool) -> Map<String, Value> {
    let mut out = Map::new();
    for (key, value) in map.and_then(Value::as_object).into_iter().flatten() {
        let theirs = NOT_COPIED_PREFIXES.iter().any(|p| key.starts_with(p))
            || (annotations && NOT_COPIED_ANNOTATIONS.contains(&key.as_str()));
        if !theirs {
            out.insert(key.clone(), value.clone());
        }
    }
    out
}

/// Removes the fields `patterns` match (what CAPI's controllers write into a config while a
/// machine uses it, e.g. CABPK's bootstrap token), below `path`.
fn strip(value: &mut Value, path: &mut FieldPath, patterns: &[PathPattern]) {
    match value {
        Value::Object(map) => {
            map.retain(|key, _| {
                let child = path.child(key);
                !patterns.iter().any(|p| p.matches(&child))
            });
            for (key, child) in map.iter_mut() {
                path.push(Segment::Key(key.clone()));
                strip(child, path, patterns);
                path.pop();
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter_mut().enumerate() {
                path.push(Segment::Index(index));
                strip(item, path, patterns);
                path.pop();
            }
        }
        _ => {}
    }
}

/// Whether a path below `path` may match `pattern`.
fn may_match_below(pattern: &PathPattern, path: &FieldPath) -> bool {
    let segments = path.segments();
    pattern.len() > segments.len()
        && segments
            .iter()
            .enumerate()
            .all(|(depth, s)| pattern.matches_at(depth, s.as_step()))
}

/// Copies into `edited` the fields `patterns` match that `current` has and `edited` leaves
/// out: the fields CAPI's controllers write, which a person's manifest does not carry.
pub(super) fn fill_from(
    edited: &mut Value,
    current: &Value,
    path: &mut FieldPath,
    patterns: &[PathPattern],
) {
    match (edited, current) {
        (Value::Object(mine), Value::Object(theirs)) => {
            for (key, value) in theirs {
                let child = path.child(key);
                if patterns.iter().any(|p| p.matches(&child)) {
                    if mine.get(key).is_none_or(Value::is_null) {
                        mine.insert(key.clone(), value.clone());
                    }
                    continue;
                }
                if !patterns.iter().any(|p| may_match_below(p, &child)) {
                    continue;
                }
                if !mine.contains_key(key) && value.is_object() {
                    mine.insert(key.clone(), Value::Object(Map::new()));
                }
                if let Some(mine) = mine.get_mut(key) {
                    path.push(Segment::Key(key.clone()));
                    fill_from(mine, value, path, patterns);
                    path.pop();
                }
            }
        }
        (Value::Array(mine), Value::Array(theirs)) => {
            for (index, (mine, value)) in mine.iter_mut().zip(theirs).enumerate() {
                path.push(Segment::Index(index));
                fill_from(mine, value, path, patterns);
                path.pop();
            }
        }
        _ => {}
    }
}

/// The object a person owns of `config`, as `kubectl edit` would show it for this purpose and
/// as the new config is created: apiVersion, kind, name, namespace, the person's labels and
/// annotations, and the spec without what CAPI's controllers write into it.
pub fn person_owned(settings: &Settings, config: &Value) -> Value {
    let key = key_of(config);
    let mut metadata = Map::new();
    metadata.insert("name".into(), Value::String(key.name.clone()));
    metadata.insert("namespace".into(), Value::String(key.namespace.clone()));
    let labels = owned_entries(config.pointer("/metadata/labels"), false);
    if !labels.is_empty() {
        metadata.insert("labels".into(), Value::Object(labels));
    }
    let annotations = owned_entries(config.pointer("/metadata/annotations"), true);
    if !annotations.is_empty() {
        metadata.insert("annotations".into(), Value::Object(annotations));
    }
    let mut spec = config
        .get("spec")
        .cloned()
        .unwrap_or(Value::Object(Map::new()));
    if settings.is_bootstrap_config(&key.group, &key.kind) {
        let rules = settings.field_rules(&key.kind);
        strip(&mut spec, &mut FieldPath::root("spec"), &rules.ignored);
    }
    let mut object = Map::new();
    object.insert(
        "apiVersion".into(),
        config.get("apiVersion").cloned().unwrap_or(Value::Null),
    );
    object.insert("kind".into(), Value::String(key.kind.clone()));
    object.insert("metadata".into(), Value::Object(metadata));
    object.insert("spec".into(), spec);
    Value::Object(object)
}
