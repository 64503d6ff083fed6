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
//!   change of such a field (added, or changed to another value) still counts, except where the
//!   request's version holds the field as a non-pointer `omitempty` scalar
//!   ([`FieldRules::zero_is_absent`], from [`crate::capi::conversion`]): there a zero added is
//!   no change either, since that version cannot tell it from absence.
//!
//! The walk visits keys in sorted order, so the reported paths are deterministic.

use serde_json::Value;

use crate::capi::field_rules::{complete, Active, FieldRules};
use crate::capi::paths::{FieldPath, PathPattern, Segment, Step};
use crate::reader::node::{Node, Str};

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
pub(crate) fn is_absent(value: Option<&Node>) -> bool {
    match value {
        None | Some(Node::Null) => true,
        Some(Node::Array(items)) => items.is_empty(),
        Some(Node::Object(entries)) => entries.iter().all(|(_, v)| is_absent(Some(v))),
        Some(_) => false,
    }
}

/// `a == b`, strings compared eight bytes at a time ([`crate::reader::bytes::same_bytes`]).
fn same(a: &Node, b: &Node) -> bool {
    a == b
}

fn same_option(a: Option<&Node>, b: Option<&Node>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => same(a, b),
        (None, None) => true,
        _ => false,
    }
}

/// The zero value of a scalar: what a defaulter's `omitempty` pruning removes.
fn is_zero_scalar(value: &Node) -> bool {
    match value {
        Node::Bool(b) => !b,
        Node::String(s) => s.is_empty(),
        Node::Number(n) => n.as_f64() == Some(0.0),
        _ => false,
    }
}

/// Empty in the fill-once sense: absent, or the zero value of a scalar.
fn is_empty(value: Option<&Node>) -> bool {
    match value {
        Some(Node::String(s)) => s.is_empty(),
        Some(Node::Bool(b)) => !b,
        other => is_absent(other),
    }
}

/// Changed fields between two values found at `root` (normally the two `spec`s), given as
/// `serde_json` values (tools, tests): [`changes_at`] on them.
pub fn changed_fields(
    root: &str,
    old: Option<&Value>,
    new: Option<&Value>,
    rules: &FieldRules,
) -> Vec<Change> {
    changed_fields_at(&[root], old, new, rules)
}

/// [`changed_fields`] at a nested `root`.
pub fn changed_fields_at(
    root: &[&str],
    old: Option<&Value>,
    new: Option<&Value>,
    rules: &FieldRules,
) -> Vec<Change> {
    let (old, new) = (old.map(Node::from_value), new.map(Node::from_value));
    changes_at(root, old.as_ref(), new.as_ref(), rules)
}

/// Changed fields between two values found at a nested `root` (`spec` of a config,
/// `spec.template.spec` of a bootstrap template); paths are reported from the object's top.
pub(crate) fn changes_at(
    root: &[&str],
    old: Option<&Node>,
    new: Option<&Node>,
    rules: &FieldRules,
) -> Vec<Change> {
    let Some((first, rest)) = root.split_first() else {
        return Vec::new();
    };
    let mut path = FieldPath::root(first);
    let mut active = Active::start(rules, Step::Key(first));
    for key in rest {
        let segment = Segment::Key(key.to_string());
        active = active.step(rules, path.segments().len(), segment.as_step());
        path.push(segment);
    }
    let mut out = Vec::new();
    // Two objects are compared key by key in the walk itself; comparing them whole first
    // would read every unchanged subtree twice.
    let both_objects = matches!((old, new), (Some(Node::Object(_)), Some(Node::Object(_))));
    if both_objects || !same_option(old, new) {
        walk(old, new, &mut path, &active, rules, &mut out);
    }
    out
}

fn walk(
    old: Option<&Node>,
    new: Option<&Node>,
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
        && !matches!(new, Some(Node::Object(_)))
    {
        return;
    }
    let old = old.filter(|v| !v.is_null());
    let new = new.filter(|v| !v.is_null());
    match (old, new) {
        (Some(Node::Object(a)), Some(Node::Object(b))) => {
            walk_objects(a, b, path, active, rules, out)
        }
        (Some(Node::Array(a)), Some(Node::Array(b))) if !a.is_empty() && !b.is_empty() => {
            for index in 0..a.len().max(b.len()) {
                if same_option(a.get(index), b.get(index)) {
                    continue;
                }
                let segment = Segment::Index(index);
                let next = active.step(rules, depth, segment.as_step());
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
        (Some(Node::Object(map)), None) | (None, Some(Node::Object(map))) => {
            // An object that is not there at all on one side: look inside, since it may hold
            // nothing but non-compared fields (the bootstrapToken CAPI creates with its token);
            // otherwise report it once, here (below the spec itself).
            let added = old.is_none();
            let before = out.len();
            if added {
                walk_objects(&[], map, path, active, rules, out);
            } else {
                walk_objects(map, &[], path, active, rules, out);
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
        (None, Some(new)) if is_zero_scalar(new) && rules.zero_is_absent_at(path) => {}
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

/// The values a pattern matches in `value` found at `root` (the pattern's first key), with their
/// paths, in document order.
pub(crate) fn values_matching<'v, 'a>(
    pattern: &PathPattern,
    root: &str,
    value: Option<&'v Node<'a>>,
) -> Vec<(FieldPath, &'v Node<'a>)> {
    fn descend<'v, 'a>(
        pattern: &PathPattern,
        node: &'v Node<'a>,
        path: &mut FieldPath,
        out: &mut Vec<(FieldPath, &'v Node<'a>)>,
    ) {
        let depth = path.segments().len();
        if depth == pattern.len() {
            out.push((path.clone(), node));
            return;
        }
        match node {
            Node::Object(entries) => {
                for (key, child) in entries {
                    let key = key.to_str();
                    if pattern.matches_at(depth, Step::Key(&key)) {
                        path.push(Segment::Key(key.into_owned()));
                        descend(pattern, child, path, out);
                        path.pop();
                    }
                }
            }
            Node::Array(items) => {
                for (index, child) in items.iter().enumerate() {
                    if pattern.matches_at(depth, Step::Index(index)) {
                        path.push(Segment::Index(index));
                        descend(pattern, child, path, out);
                        path.pop();
                    }
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    if let Some(value) = value.filter(|_| pattern.matches_at(0, Step::Key(root))) {
        descend(pattern, value, &mut FieldPath::root(root), &mut out);
    }
    out
}

/// Unset in the sense of a field whose zero is its absence: absent, null, empty, or a scalar's
/// zero value.
pub(crate) fn is_unset(value: Option<&Node>) -> bool {
    is_absent(value) || value.is_some_and(is_zero_scalar)
}

/// Both objects' keys in sorted order (a node's entries are sorted), each with its two values.
fn walk_objects(
    a: &[(Str, Node)],
    b: &[(Str, Node)],
    path: &mut FieldPath,
    active: &Active,
    rules: &FieldRules,
    out: &mut Vec<Change>,
) {
    use std::cmp::Ordering;
    let depth = path.segments().len();
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let order = match (a.get(i), b.get(j)) {
            (Some((ka, _)), Some((kb, _))) => ka.cmp(kb),
            (Some(_), None) => Ordering::Less,
            _ => Ordering::Greater,
        };
        let (key, old, new) = match order {
            Ordering::Less => {
                i += 1;
                (&a[i - 1].0, Some(&a[i - 1].1), None)
            }
            Ordering::Greater => {
                j += 1;
                (&b[j - 1].0, None, Some(&b[j - 1].1))
            }
            Ordering::Equal => {
                (i, j) = (i + 1, j + 1);
                (&a[i - 1].0, Some(&a[i - 1].1), Some(&b[j - 1].1))
            }
        };
        if same_option(old, new) {
            continue;
        }
        let segment = Segment::Key(key.to_str().into_owned());
        let next = active.step(rules, depth, segment.as_step());
        path.push(segment);
        walk(old, new, path, &next, rules, out);
        path.pop();
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
        use crate::reader::bytes::same_bytes;
        let (va, vb) = (json!(a), json!(b));
        assert_eq!(same(&node(&va), &node(&vb)), a == b);
        assert_eq!(same_bytes(a.as_bytes(), b.as_bytes()), a == b);
    }

    fn node(value: &Value) -> Node<'_> {
        Node::from_value(value)
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
        assert_eq!(same(&node(&a), &node(&b)), a == b);
    }
}
