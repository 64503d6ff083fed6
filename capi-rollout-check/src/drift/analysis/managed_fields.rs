//! `managedFields`: who wrote which fields of an object, and when.

use serde_json::Value;

use crate::drift::time;

/// One `managedFields` entry.
#[derive(Clone, Debug)]
pub(super) struct Entry {
    pub(super) manager: String,
    pub(super) operation: String,
    pub(super) time: Option<i64>,
    pub(super) fields: Value,
}

pub(super) fn entries(object: &Value) -> Vec<Entry> {
    object
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|e| {
            e.get("subresource")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty()
        })
        .map(|e| Entry {
            manager: e
                .get("manager")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            operation: e
                .get("operation")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            time: e.get("time").and_then(Value::as_str).and_then(time::parse),
            fields: e.get("fieldsV1").cloned().unwrap_or(Value::Null),
        })
        .collect()
}

/// The leaf paths of a fieldsV1 set under `top` (`f:spec`), as `spec.files[path=/x].content`.
pub fn leaf_paths(fields: &Value, top: &str) -> Vec<String> {
    fn walk(node: &Value, path: String, out: &mut Vec<String>) {
        let Some(map) = node.as_object() else {
            out.push(path);
            return;
        };
        let children: Vec<_> = map.iter().filter(|(k, _)| k.as_str() != ".").collect();
        if children.is_empty() {
            out.push(path);
            return;
        }
        for (k, v) in children {
            let step = if let Some(f) = k.strip_prefix("f:") {
                format!(".{f}")
            } else if let Some(keyed) = k.strip_prefix("k:") {
                let item: Value = serde_json::from_str(keyed).unwrap_or(Value::Null);
                let inner = item
                    .as_object()
                    .map(|o| {
                        o.iter()
                            .map(|(k, v)| {
                                format!(
                                    "{k}={}",
                                    v.as_str().map_or_else(|| v.to_string(), str::to_string)
                                )
                            })
                            .collect::<Vec<_>>()
                            .join(",")
                    })
                    .unwrap_or_else(|| keyed.to_string());
                format!("[{inner}]")
            } else if let Some(v) = k.strip_prefix("v:") {
                format!("[={v}]")
            } else if let Some(i) = k.strip_prefix("i:") {
                format!("[{i}]")
            } else {
                format!(".{k}")
            };
            walk(v, format!("{path}{step}"), out);
        }
    }
    let mut out = Vec::new();
    if let Some(node) = fields.get(format!("f:{top}")) {
        walk(node, top.to_string(), &mut out);
    }
    out
}

pub(super) fn owns_spec(e: &Entry) -> bool {
    e.fields.get("f:spec").is_some()
}

pub(super) fn owns_data(e: &Entry) -> bool {
    e.fields.get("f:data").is_some() || e.fields.get("f:stringData").is_some()
}
