//! Property tests over the native engine: no input panics, verdicts are deterministic, and the
//! diff and fingerprint keep their promises on arbitrary specs.

use capi_bootstrap_rollout_policy::capi::paths::Segment;
use capi_bootstrap_rollout_policy::diff::changed_fields;
use capi_bootstrap_rollout_policy::engine::{self, validate_payload};
use capi_bootstrap_rollout_policy::fingerprint::spec_fingerprint;
use capi_bootstrap_rollout_policy::settings::Settings;
use capi_bootstrap_rollout_policy::verdict::Verdict;
use proptest::prelude::*;
use serde_json::{json, Map, Value};

/// The engine on a request held as a value: its JSON text, as the host sends it.
fn evaluate(settings: &Settings, request: &Value) -> Verdict {
    engine::evaluate(settings, &serde_json::to_vec(request).unwrap())
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        "[a-z0-9.:/=-]{0,12}".prop_map(Value::String),
    ]
}

/// Arbitrary JSON, keys drawn from a small set so that old and new objects overlap.
fn json_value() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(
                prop::sample::select(vec![
                    "files",
                    "content",
                    "path",
                    "joinConfiguration",
                    "discovery",
                    "bootstrapToken",
                    "token",
                    "caCertHashes",
                    "format",
                    "spec",
                    "x",
                    "nodeRegistration",
                ])
                .prop_map(str::to_string),
                inner,
                0..5
            )
            .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn kind() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(
            json!({"group": "bootstrap.cluster.x-k8s.io", "version": "v1beta2", "kind": "KubeadmConfig"})
        ),
        Just(
            json!({"group": "bootstrap.cluster.x-k8s.io", "version": "v1beta1", "kind": "RKE2Config"})
        ),
        Just(json!({"group": "cluster.x-k8s.io", "version": "v1beta1", "kind": "MachinePool"})),
        Just(json!({"group": "cluster.x-k8s.io", "version": "v1beta2", "kind": "MachinePool"})),
        json_value(),
    ]
}

fn operation() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!("CREATE")),
        Just(json!("UPDATE")),
        Just(json!("DELETE")),
        scalar(),
    ]
}

fn owned(spec: Value) -> Value {
    json!({
        "apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfig",
        "metadata": {"name": "c-0123abcd", "namespace": "default", "ownerReferences": [
            {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool", "name": "mp", "uid": "u", "controller": true}]},
        "spec": spec,
    })
}

/// Follows a reported path; `None` when it does not exist.
fn resolve<'a>(value: &'a Value, segments: &[Segment]) -> Option<&'a Value> {
    segments.iter().try_fold(value, |v, s| match s {
        Segment::Key(k) => v.get(k),
        Segment::Index(i) => v.get(*i),
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_requests_never_panic_and_are_deterministic(
        kind in kind(), op in operation(), object in json_value(), old in json_value(),
        user in json_value(), sub in scalar(),
    ) {
        let request = json!({"uid": "u", "kind": kind, "operation": op, "object": object,
                             "oldObject": old, "userInfo": user, "subResource": sub});
        let settings = Settings::default();
        let first = evaluate(&settings, &request);
        prop_assert_eq!(first, evaluate(&settings, &request));
    }

    #[test]
    fn arbitrary_payload_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = validate_payload(&bytes);
    }

    #[test]
    fn mutated_realistic_specs_get_deterministic_verdicts(old in json_value(), new in json_value()) {
        let request = json!({"uid": "u", "operation": "UPDATE", "userInfo": {"username": "alice"},
            "kind": {"group": "bootstrap.cluster.x-k8s.io", "version": "v1beta2", "kind": "KubeadmConfig"},
            "object": owned(new), "oldObject": owned(old)});
        let settings = Settings::default();
        let verdict = evaluate(&settings, &request);
        prop_assert_eq!(&verdict, &evaluate(&settings, &request));
        if let Some(message) = &verdict.message {
            prop_assert!(message.starts_with("KubeadmConfig.bootstrap.cluster.x-k8s.io \"c-0123abcd\" is invalid: ["));
        }
    }

    #[test]
    fn an_object_compared_with_itself_has_no_change(spec in json_value()) {
        let rules = Settings::default().field_rules("KubeadmConfig");
        prop_assert!(changed_fields("spec", Some(&spec), Some(&spec), &rules).is_empty());
    }

    #[test]
    fn every_reported_path_exists_in_old_or_new(old in json_value(), new in json_value()) {
        let rules = Settings::default().field_rules("KubeadmConfig");
        let (old_obj, new_obj) = (json!({"spec": old}), json!({"spec": new}));
        for change in changed_fields("spec", old_obj.get("spec"), new_obj.get("spec"), &rules) {
            let s = change.path.segments();
            prop_assert!(resolve(&old_obj, s).is_some() || resolve(&new_obj, s).is_some(),
                "{} exists in neither", change.path);
        }
    }

    #[test]
    fn the_diff_and_the_fingerprint_agree(old in json_value(), new in json_value()) {
        // For a kind without fill-once fields (whose first fill is not a change but does change
        // the content), "no reported change either way" and "same fingerprint" are the same
        // statement. Either way: a pruned zero value ({"x": false} -> {}) is no change from old
        // to new, but its return is one.
        let rules = Settings::default().field_rules("EKSConfig");
        let unchanged = changed_fields("spec", Some(&old), Some(&new), &rules).is_empty()
            && changed_fields("spec", Some(&new), Some(&old), &rules).is_empty();
        let same = spec_fingerprint(Some(&old), &rules) == spec_fingerprint(Some(&new), &rules);
        prop_assert_eq!(unchanged, same, "old {} new {}", old, new);
    }

    #[test]
    fn fingerprint_ignores_key_order_and_the_token(
        spec in json_value(), token_a in "[a-z0-9]{6}\\.[a-z0-9]{16}", token_b in "[a-z0-9]{6}\\.[a-z0-9]{16}",
    ) {
        let rules = Settings::default().field_rules("KubeadmConfig");
        let mut a = json!({"files": [{"path": "/a", "content": "x"}], "extra": spec,
            "joinConfiguration": {"discovery": {"bootstrapToken": {"token": token_a}}}});
        let mut b = a.clone();
        b["joinConfiguration"]["discovery"]["bootstrapToken"]["token"] = json!(token_b);
        prop_assert_eq!(spec_fingerprint(Some(&a), &rules), spec_fingerprint(Some(&b), &rules));
        // Key order: the same document written with its keys reversed.
        let reversed: Value = serde_json::from_str(&reverse_keys(&a)).unwrap();
        prop_assert_eq!(spec_fingerprint(Some(&a), &rules), spec_fingerprint(Some(&reversed), &rules));
        a["files"][0]["content"] = json!("y");
        prop_assert_ne!(spec_fingerprint(Some(&a), &rules), spec_fingerprint(Some(&b), &rules));
    }
}

/// Serialises with every object's keys in reverse order (serde_json sorts them on parse unless
/// preserve_order is on; the fingerprint must not depend on either).
fn reverse_keys(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.reverse();
            let items: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", Value::String(k.clone()), reverse_keys(&map[k])))
                .collect();
            format!("{{{}}}", items.join(","))
        }
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(reverse_keys).collect::<Vec<_>>().join(",")
        ),
        other => other.to_string(),
    }
}
