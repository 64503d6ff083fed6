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

use crate::capi::field_rules::FieldRules;
use crate::capi::paths::{FieldPath, PathPattern, Segment, Step};
use crate::reader::node::{Node, Str, Unescaped};

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

/// Patterns still matching the current path, as indices into the rule lists.
#[derive(Clone, Default)]
struct Active {
    ignored: Vec<usize>,
    fill_once: Vec<usize>,
}

impl Active {
    fn start(rules: &FieldRules, root: Step) -> Self {
        let all = |patterns: &[PathPattern]| -> Vec<usize> { (0..patterns.len()).collect() };
        Active {
            ignored: narrow(&rules.ignored, &all(&rules.ignored), 0, root),
            fill_once: narrow(&rules.fill_once, &all(&rules.fill_once), 0, root),
        }
    }

    /// The patterns still matching one step further down (a list is allocated only when one
    /// does: most of a spec is below no pattern).
    fn step(&self, rules: &FieldRules, depth: usize, step: Step) -> Self {
        if self.ignored.is_empty() && self.fill_once.is_empty() {
            return Active::default();
        }
        Active {
            ignored: narrow(&rules.ignored, &self.ignored, depth, step),
            fill_once: narrow(&rules.fill_once, &self.fill_once, depth, step),
        }
    }
}

fn narrow(patterns: &[PathPattern], active: &[usize], depth: usize, step: Step) -> Vec<usize> {
    active
        .iter()
        .copied()
        .filter(|&i| patterns[i].matches_at(depth, step))
        .collect()
}

fn complete(patterns: &[PathPattern], active: &[usize], len: usize) -> bool {
    active.iter().any(|&i| patterns[i].len() == len)
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

/// The canonical form of `value` found at `root`: every ignored and fill-once field removed,
/// absent values dropped, object keys sorted, encoded so that two values have the same form
/// exactly when they compare equal in the diff's terms. The input of the spec fingerprint.
///
/// The encoding is self-delimiting rather than JSON: a string is `s<byte length>:<bytes>`, so
/// file contents are copied, not escaped (escaping would take a quarter of the guest's time
/// on a 2 MiB config); a number is `n<JSON number>;`, booleans `t` / `f`, a list element that holds
/// nothing `z`, objects `{key value ...}` (keys as strings) and lists `[value ...]`.
pub(crate) fn canonical_form(root: &str, value: Option<&Node>, rules: &FieldRules) -> Vec<u8> {
    let mut out = Vec::new();
    write_canonical_form(root, value, rules, &mut out);
    out
}

/// Where a canonical form goes: a buffer, or straight into a hash (the fingerprint of a 2 MiB
/// spec then needs no 2 MiB buffer in the guest).
pub(crate) trait CanonicalSink {
    fn put(&mut self, bytes: &[u8]);

    fn put_byte(&mut self, byte: u8) {
        self.put(&[byte]);
    }

    /// A string's bytes, unescaped: runs of the input between escapes by default.
    fn put_text(&mut self, text: &Str) {
        struct Runs<'o, S: ?Sized>(&'o mut S);
        impl<S: CanonicalSink + ?Sized> Unescaped for Runs<'_, S> {
            fn run(&mut self, bytes: &[u8]) {
                self.0.put(bytes);
            }

            fn byte(&mut self, byte: u8) {
                self.0.put_byte(byte);
            }
        }
        text.unescape_into(&mut Runs(self));
    }
}

impl CanonicalSink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// [`canonical_form`], written into `out` piece by piece.
pub(crate) fn write_canonical_form(
    root: &str,
    value: Option<&Node>,
    rules: &FieldRules,
    out: &mut impl CanonicalSink,
) {
    let active = Active::start(rules, Step::Key(root));
    if holds_compared(value, 1, &active, rules) {
        write_canonical(value, 1, &active, rules, out);
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
/// `depth`: the length of the value's path (the root's is 1).
fn holds_compared(value: Option<&Node>, depth: usize, active: &Active, rules: &FieldRules) -> bool {
    if skipped(depth, active, rules) {
        return false;
    }
    match value {
        None | Some(Node::Null) => false,
        Some(Node::Object(entries)) => entries.iter().any(|(key, item)| {
            let next = active.step(rules, depth, Step::Key(&key.to_str()));
            holds_compared(Some(item), depth + 1, &next, rules)
        }),
        Some(Node::Array(items)) => !items.is_empty(),
        Some(_) => true,
    }
}

/// A string, unescaped piece by piece (a file content is not copied first).
fn write_string(text: &Str, out: &mut impl CanonicalSink) {
    out.put(b"s");
    put_decimal(text.len(), out);
    out.put(b":");
    out.put_text(text);
}

/// `n` in decimal, as `n.to_string()` writes it, without a string per call (every key and
/// string of a spec has its length written).
fn put_decimal(mut n: usize, out: &mut impl CanonicalSink) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.put(&digits[at..]);
}

/// Writes `value`, which [`holds_compared`].
fn write_canonical(
    value: Option<&Node>,
    depth: usize,
    active: &Active,
    rules: &FieldRules,
    out: &mut impl CanonicalSink,
) {
    match value {
        None | Some(Node::Null) => {}
        Some(Node::Object(entries)) => {
            // A node's keys are sorted.
            out.put(b"{");
            for (key, item) in entries {
                let next = active.step(rules, depth, Step::Key(&key.to_str()));
                if holds_compared(Some(item), depth + 1, &next, rules) {
                    write_string(key, out);
                    write_canonical(Some(item), depth + 1, &next, rules, out);
                }
            }
            out.put(b"}");
        }
        Some(Node::Array(items)) => {
            out.put(b"[");
            for (index, item) in items.iter().enumerate() {
                let next = active.step(rules, depth, Step::Index(index));
                if holds_compared(Some(item), depth + 1, &next, rules) {
                    write_canonical(Some(item), depth + 1, &next, rules, out);
                } else {
                    out.put(b"z");
                }
            }
            out.put(b"]");
        }
        Some(Node::String(text)) => write_string(text, out),
        Some(Node::Number(number)) => {
            out.put(b"n");
            out.put(number.to_string().as_bytes());
            out.put(b";");
        }
        Some(Node::Bool(flag)) => out.put(if *flag { b"t" } else { b"f" }),
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

    /// A value as the reader reads it from JSON text, its strings escaped where JSON escapes.
    fn read(text: &[u8]) -> Node<'_> {
        crate::reader::json::read_document(text, |r| r.read_node()).unwrap()
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

    #[rstest]
    #[case::object(json!({"b": [1, "x"], "a": true}), b"{s1:ats1:b[n1;s1:x]}".as_slice())]
    #[case::absent_dropped(json!({"a": null, "b": {}, "c": [], "d": false}), b"{s1:df}".as_slice())]
    #[case::null_list_element(json!([null, {}, "a"]), b"[zzs1:a]".as_slice())]
    #[case::nothing(json!({"a": null}), b"z".as_slice())]
    #[case::multibyte_length_in_bytes(json!("ß"), b"s2:\xc3\x9f".as_slice())]
    fn canonical_encoding(#[case] value: Value, #[case] expected: &[u8]) {
        assert_eq!(
            canonical_form("spec", Some(&node(&value)), &FieldRules::default()),
            expected
        );
        // Read from JSON text: the same form.
        let text = serde_json::to_vec(&value).unwrap();
        assert_eq!(
            canonical_form("spec", Some(&read(&text)), &FieldRules::default()),
            expected
        );
    }

    #[test]
    fn decimals_as_to_string_writes_them() {
        for n in [0, 7, 10, 99, 100, 12_345, usize::MAX] {
            let mut out = Vec::new();
            put_decimal(n, &mut out);
            assert_eq!(out, n.to_string().into_bytes());
        }
    }

    #[test]
    fn escaped_strings_are_hashed_unescaped() {
        let text = br#"{"content": "line \"one\"\n\tline \u00e9 \ud83d\ude00 \/", "b\u0061": "x"}"#;
        let value: Value = serde_json::from_slice(text).unwrap();
        let rules = FieldRules::default();
        assert_eq!(
            canonical_form("spec", Some(&read(text)), &rules),
            canonical_form("spec", Some(&node(&value)), &rules)
        );
        assert!(changes_at(&["spec"], Some(&read(text)), Some(&node(&value)), &rules).is_empty());
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
            canonical_form("spec", Some(&node(&a)), &rules),
            canonical_form("spec", Some(&node(&b)), &rules)
        );
    }
}
