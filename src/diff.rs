//! Which fields of a spec changed, judged the way CAPI's controllers see them.
//!
//! - Ignored ("machine-only") fields never count.
//! - Fill-once fields count unless the old value was empty (absent, null, "", false, [], {}).
//! - Absent, null, `[]` and `{}` are the same thing: Go's `omitempty` drops all of them, and
//!   CAPI itself creates empty `joinConfiguration` / `discovery.bootstrapToken` objects.
//! - A zero-valued leaf (`false`, `0`, `""`) present in the old object and absent in the new
//!   one is not a change: the providers' defaulters prune zero-valued `omitempty` fields on
//!   every write (CAPI v1.10's KubeadmConfig defaulter, RKE2 since v0.21), whoever sends the
//!   request, and the Go value a provider renders from is the same either way. Any other
//!   change of such a field (added, or changed to another value) still counts.
//!
//! The walk visits keys in sorted order, so the reported paths are deterministic.

use serde_json::{Map, Value};

use crate::paths::{FieldPath, PathPattern, Segment};

/// The non-compared fields of one bootstrap config kind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldRules {
    pub ignored: Vec<PathPattern>,
    pub fill_once: Vec<PathPattern>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    Added,
    Removed,
    Changed,
}

impl ChangeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Added => "added",
            ChangeKind::Removed => "removed",
            ChangeKind::Changed => "changed",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub path: FieldPath,
    pub kind: ChangeKind,
}

/// Absent in the `omitempty` sense.
pub fn is_absent(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => true,
        Some(Value::Array(items)) => items.is_empty(),
        Some(Value::Object(map)) => map.values().all(|v| is_absent(Some(v))),
        Some(_) => false,
    }
}

/// `a == b` for JSON values, with strings compared eight bytes at a time. A config's bulk is
/// file contents, and the guest's `memcmp` (wasi-libc's) compares one byte per iteration:
/// comparing the unchanged files was a tenth of a token rotation's instructions.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::String(a), Value::String(b)) => same_bytes(a.as_bytes(), b.as_bytes()),
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same(a, b))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .zip(b)
                    .all(|((ka, va), (kb, vb))| ka == kb && same(va, vb))
        }
        _ => a == b,
    }
}

fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (a_words, a_rest) = a.split_at(a.len() - a.len() % 8);
    let (b_words, b_rest) = b.split_at(a_words.len());
    let word = |chunk: &[u8]| u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
    a_words
        .chunks_exact(8)
        .zip(b_words.chunks_exact(8))
        .all(|(x, y)| word(x) == word(y))
        && a_rest == b_rest
}

fn same_option(a: Option<&Value>, b: Option<&Value>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => same(a, b),
        (None, None) => true,
        _ => false,
    }
}

/// The zero value of a scalar: what a defaulter's `omitempty` pruning removes.
fn is_zero_scalar(value: &Value) -> bool {
    match value {
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Number(n) => n.as_f64() == Some(0.0),
        _ => false,
    }
}

/// Empty in the fill-once sense: absent, or the zero value of a scalar.
fn is_empty(value: Option<&Value>) -> bool {
    match value {
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Bool(b)) => !b,
        other => is_absent(other),
    }
}

/// Patterns still matching the current path, as indices into the rule lists.
#[derive(Clone, Default)]
struct Active {
    ignored: Vec<usize>,
    fill_once: Vec<usize>,
}

impl Active {
    fn start(rules: &FieldRules, root: &Segment) -> Self {
        Active {
            ignored: narrow(&rules.ignored, (0..rules.ignored.len()).collect(), 0, root),
            fill_once: narrow(
                &rules.fill_once,
                (0..rules.fill_once.len()).collect(),
                0,
                root,
            ),
        }
    }

    fn step(&self, rules: &FieldRules, depth: usize, segment: &Segment) -> Self {
        Active {
            ignored: narrow(&rules.ignored, self.ignored.clone(), depth, segment),
            fill_once: narrow(&rules.fill_once, self.fill_once.clone(), depth, segment),
        }
    }
}

fn narrow(
    patterns: &[PathPattern],
    mut active: Vec<usize>,
    depth: usize,
    segment: &Segment,
) -> Vec<usize> {
    active.retain(|&i| patterns[i].matches_at(depth, segment));
    active
}

fn complete(patterns: &[PathPattern], active: &[usize], len: usize) -> bool {
    active.iter().any(|&i| patterns[i].len() == len)
}

/// Changed fields between two values found at `root` (normally the two `spec`s).
pub fn changed_fields(
    root: &str,
    old: Option<&Value>,
    new: Option<&Value>,
    rules: &FieldRules,
) -> Vec<Change> {
    changed_fields_at(&[root], old, new, rules)
}

/// Changed fields between two values found at a nested `root` (`spec.template.spec` of a
/// bootstrap template); paths are reported from the object's top.
pub fn changed_fields_at(
    root: &[&str],
    old: Option<&Value>,
    new: Option<&Value>,
    rules: &FieldRules,
) -> Vec<Change> {
    let Some((first, rest)) = root.split_first() else {
        return Vec::new();
    };
    let mut path = FieldPath::root(first);
    let mut active = Active::start(rules, &Segment::Key(first.to_string()));
    for key in rest {
        let segment = Segment::Key(key.to_string());
        active = active.step(rules, path.segments().len(), &segment);
        path.push(segment);
    }
    let mut out = Vec::new();
    // Two objects are compared key by key in the walk itself; comparing them whole first
    // would read every unchanged subtree twice.
    let both_objects = matches!((old, new), (Some(Value::Object(_)), Some(Value::Object(_))));
    if both_objects || !same_option(old, new) {
        walk(old, new, &mut path, &active, rules, &mut out);
    }
    out
}

fn walk(
    old: Option<&Value>,
    new: Option<&Value>,
    path: &mut FieldPath,
    active: &Active,
    rules: &FieldRules,
    out: &mut Vec<Change>,
) {
    // The caller has compared `old` and `new` and found them different (or both are objects,
    // compared key by key below): each subtree is compared once, by its parent, before any
    // path segment is built for it.
    let depth = path.segments().len();
    if complete(&rules.ignored, &active.ignored, depth) {
        return;
    }
    if complete(&rules.fill_once, &active.fill_once, depth)
        && is_empty(old)
        && !matches!(new, Some(Value::Object(_)))
    {
        return;
    }
    let old = old.filter(|v| !v.is_null());
    let new = new.filter(|v| !v.is_null());
    match (old, new) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            walk_objects(a, b, path, active, rules, out)
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) if !a.is_empty() && !b.is_empty() => {
            for index in 0..a.len().max(b.len()) {
                if same_option(a.get(index), b.get(index)) {
                    continue;
                }
                let segment = Segment::Index(index);
                let next = active.step(rules, depth, &segment);
                path.push(segment);
                if index < a.len() && index < b.len() {
                    walk(a.get(index), b.get(index), path, &next, rules, out);
                } else if !complete(&rules.ignored, &next.ignored, depth + 1) {
                    // A list grew or shrank: the element is added or removed, whatever it holds
                    // (even null or {}), since the positions after it mean something.
                    out.push(Change {
                        path: path.clone(),
                        kind: if index < a.len() {
                            ChangeKind::Removed
                        } else {
                            ChangeKind::Added
                        },
                    });
                }
                path.pop();
            }
        }
        (Some(Value::Object(map)), None) | (None, Some(Value::Object(map))) => {
            // An object that is not there at all on one side: look inside, since it may hold
            // nothing but non-compared fields (the bootstrapToken CAPI creates with its token);
            // otherwise report it once, here (below the spec itself).
            let added = old.is_none();
            let before = out.len();
            let empty = Map::new();
            if added {
                walk_objects(&empty, map, path, active, rules, out);
            } else {
                walk_objects(map, &empty, path, active, rules, out);
            }
            if out.len() > before && depth > 1 {
                out.truncate(before);
                out.push(Change {
                    path: path.clone(),
                    kind: if added {
                        ChangeKind::Added
                    } else {
                        ChangeKind::Removed
                    },
                });
            }
        }
        (Some(old), None) if is_zero_scalar(old) => {}
        (old, new) => {
            let kind = match (is_absent(old), is_absent(new)) {
                (true, true) => return,
                (true, false) => ChangeKind::Added,
                (false, true) => ChangeKind::Removed,
                (false, false) => ChangeKind::Changed,
            };
            out.push(Change {
                path: path.clone(),
                kind,
            });
        }
    }
}

fn walk_objects(
    a: &Map<String, Value>,
    b: &Map<String, Value>,
    path: &mut FieldPath,
    active: &Active,
    rules: &FieldRules,
    out: &mut Vec<Change>,
) {
    let depth = path.segments().len();
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    for key in keys {
        let (old, new) = (a.get(key), b.get(key));
        if same_option(old, new) {
            continue;
        }
        let segment = Segment::Key(key.clone());
        let next = active.step(rules, depth, &segment);
        path.push(segment);
        walk(old, new, path, &next, rules, out);
        path.pop();
    }
}

/// The canonical form of `value` found at `root`: every ignored and fill-once field removed,
/// absent values dropped, object keys sorted, encoded so that two values have the same form
/// exactly when they compare equal in the diff's terms. The input of the spec fingerprint.
///
/// The encoding is self-delimiting rather than JSON: a string is `s<byte length>:<bytes>`, so
/// file contents are copied, not escaped (escaping was a quarter of the guest's time on a
/// 2 MiB config); a number is `n<JSON number>;`, booleans `t` / `f`, a list element that holds
/// nothing `z`, objects `{key value ...}` (keys as strings) and lists `[value ...]`.
pub fn canonical_form(root: &str, value: Option<&Value>, rules: &FieldRules) -> Vec<u8> {
    let mut out = Vec::new();
    write_canonical_form(root, value, rules, &mut out);
    out
}

/// Where a canonical form goes: a buffer, or straight into a hash (the fingerprint of a 2 MiB
/// spec then needs no 2 MiB buffer in the guest).
pub trait CanonicalSink {
    fn put(&mut self, bytes: &[u8]);
}

impl CanonicalSink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// [`canonical_form`], written into `out` piece by piece.
pub fn write_canonical_form(
    root: &str,
    value: Option<&Value>,
    rules: &FieldRules,
    out: &mut impl CanonicalSink,
) {
    let mut path = FieldPath::root(root);
    let active = Active::start(rules, &Segment::Key(root.to_string()));
    if holds_compared(value, &mut path, &active, rules) {
        write_canonical(value, &mut path, &active, rules, out);
    } else {
        out.put(b"z");
    }
}

fn skipped(depth: usize, active: &Active, rules: &FieldRules) -> bool {
    complete(&rules.ignored, &active.ignored, depth)
        || complete(&rules.fill_once, &active.fill_once, depth)
}

/// Whether `value` holds anything the canonical form writes: a compared, non-absent value.
/// Asked before writing, so that nothing written ever has to be taken back.
fn holds_compared(
    value: Option<&Value>,
    path: &mut FieldPath,
    active: &Active,
    rules: &FieldRules,
) -> bool {
    let depth = path.segments().len();
    if skipped(depth, active, rules) {
        return false;
    }
    match value {
        None | Some(Value::Null) => false,
        Some(Value::Object(map)) => map.iter().any(|(key, item)| {
            let segment = Segment::Key(key.clone());
            let next = active.step(rules, depth, &segment);
            path.push(segment);
            let holds = holds_compared(Some(item), path, &next, rules);
            path.pop();
            holds
        }),
        Some(Value::Array(items)) => !items.is_empty(),
        Some(_) => true,
    }
}

fn write_string(text: &str, out: &mut impl CanonicalSink) {
    out.put(b"s");
    out.put(text.len().to_string().as_bytes());
    out.put(b":");
    out.put(text.as_bytes());
}

/// Writes `value`, which [`holds_compared`].
fn write_canonical(
    value: Option<&Value>,
    path: &mut FieldPath,
    active: &Active,
    rules: &FieldRules,
    out: &mut impl CanonicalSink,
) {
    let depth = path.segments().len();
    match value {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            // Sorted here: serde_json's map keeps insertion order when any crate in a build
            // turns on its preserve_order feature.
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.put(b"{");
            for (key, item) in keys.into_iter().filter_map(|k| Some((k, map.get(k)?))) {
                let segment = Segment::Key(key.clone());
                let next = active.step(rules, depth, &segment);
                path.push(segment);
                if holds_compared(Some(item), path, &next, rules) {
                    write_string(key, out);
                    write_canonical(Some(item), path, &next, rules, out);
                }
                path.pop();
            }
            out.put(b"}");
        }
        Some(Value::Array(items)) => {
            out.put(b"[");
            for (index, item) in items.iter().enumerate() {
                let segment = Segment::Index(index);
                let next = active.step(rules, depth, &segment);
                path.push(segment);
                if holds_compared(Some(item), path, &next, rules) {
                    write_canonical(Some(item), path, &next, rules, out);
                } else {
                    out.put(b"z");
                }
                path.pop();
            }
            out.put(b"]");
        }
        Some(Value::String(text)) => write_string(text, out),
        Some(Value::Number(number)) => {
            out.put(b"n");
            out.put(number.to_string().as_bytes());
            out.put(b";");
        }
        Some(Value::Bool(flag)) => out.put(if *flag { b"t" } else { b"f" }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::json;

    #[rstest]
    #[case::empty("", "")]
    #[case::short_equal("abc", "abc")]
    #[case::short_differ("abc", "abd")]
    #[case::one_word_equal("01234567", "01234567")]
    #[case::differ_in_first_word("x1234567-89", "01234567-89")]
    #[case::differ_in_tail("0123456789", "0123456780")]
    #[case::differ_in_second_word("0123456701234567", "0123456701234568")]
    #[case::prefix("01234567", "012345678")]
    #[case::multibyte("grüße aus köln", "grüße aus köln")]
    fn same_agrees_with_eq_on_strings(#[case] a: &str, #[case] b: &str) {
        assert_eq!(same(&json!(a), &json!(b)), a == b);
        assert_eq!(same_bytes(a.as_bytes(), b.as_bytes()), a == b);
    }

    #[rstest]
    #[case::numbers(json!(1), json!(1.0))]
    #[case::types(json!("1"), json!(1))]
    #[case::nested_equal(json!({"a": [{"b": "0123456789abcdef"}]}), json!({"a": [{"b": "0123456789abcdef"}]}))]
    #[case::nested_differ(json!({"a": [{"b": "0123456789abcdef"}]}), json!({"a": [{"b": "0123456789abcdeg"}]}))]
    #[case::key_differs(json!({"a": 1}), json!({"b": 1}))]
    #[case::longer_list(json!([1]), json!([1, 2]))]
    #[case::null_and_absent_key(json!({"a": null}), json!({}))]
    fn same_agrees_with_eq(#[case] a: Value, #[case] b: Value) {
        assert_eq!(same(&a, &b), a == b);
    }

    #[rstest]
    #[case::object(json!({"b": [1, "x"], "a": true}), b"{s1:ats1:b[n1;s1:x]}".as_slice())]
    #[case::absent_dropped(json!({"a": null, "b": {}, "c": [], "d": false}), b"{s1:df}".as_slice())]
    #[case::null_list_element(json!([null, {}, "a"]), b"[zzs1:a]".as_slice())]
    #[case::nothing(json!({"a": null}), b"z".as_slice())]
    #[case::multibyte_length_in_bytes(json!("ß"), b"s2:\xc3\x9f".as_slice())]
    fn canonical_encoding(#[case] value: Value, #[case] expected: &[u8]) {
        assert_eq!(
            canonical_form("spec", Some(&value), &FieldRules::default()),
            expected
        );
    }

    #[rstest]
    // Strings that would collide if they were not length-prefixed.
    #[case::string_holding_an_encoding(json!(["a", "b"]), json!(["as1:b"]))]
    #[case::key_holding_an_encoding(json!({"a": "b"}), json!({"as1:b": true}))]
    #[case::number_and_string(json!(1), json!("1"))]
    #[case::nesting(json!([["a"]]), json!([["a"], []]))]
    fn canonical_forms_differ(#[case] a: Value, #[case] b: Value) {
        let rules = FieldRules::default();
        assert_ne!(
            canonical_form("spec", Some(&a), &rules),
            canonical_form("spec", Some(&b), &rules)
        );
    }
}
