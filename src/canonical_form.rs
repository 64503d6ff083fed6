//! The canonical form of a spec: what the spec fingerprint hashes ([`crate::fingerprint`]) and
//! what the rotation rule compares to warn of a rotation to the same content
//! ([`crate::rules::rotation`]). Two values have the same form exactly when they compare equal
//! in [`crate::diff`]'s terms.

use crate::capi::field_rules::{complete, Active, FieldRules};
use crate::capi::paths::Step;
use crate::reader::node::{Node, Str, Unescaped};

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
    use serde_json::{json, Value};

    fn node(value: &Value) -> Node<'_> {
        Node::from_value(value)
    }

    /// A value as the reader reads it from JSON text, its strings escaped where JSON escapes.
    fn read(text: &[u8]) -> Node<'_> {
        crate::reader::json::read_document(text, |r| r.read_node()).unwrap()
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
        assert!(
            crate::diff::changes_at(&["spec"], Some(&read(text)), Some(&node(&value)), &rules)
                .is_empty()
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
            canonical_form("spec", Some(&node(&a)), &rules),
            canonical_form("spec", Some(&node(&b)), &rules)
        );
    }
}
