//! The spec fingerprint and the rotation name suggested from it.
//!
//! The fingerprint is the 64-bit FNV-1a hash of the spec in canonical form (keys sorted, absent
//! values and the non-compared fields removed; [`crate::canonical_form`]), so two configs whose specs differ only in key
//! order, in the controller-written token or in CAPI's defaults share it. FNV is the hash
//! family Kubernetes itself uses for generated name suffixes (a Deployment's
//! pod-template-hash): a name suggestion needs no cryptographic hash, and SHA-256 in software
//! would be 38 % of the guest's instructions on every rejected edit (docs/performance.md). Nothing trusts the
//! fingerprint for equality: rotation.rs compares the canonical specs themselves.

use serde_json::Value;

use crate::canonical_form::{write_canonical_form, CanonicalSink};
use crate::capi::field_rules::FieldRules;
use crate::reader::node::{Node, Str};

/// The longest name a CRD object may have (a DNS subdomain).
const MAX_NAME: usize = 253;
const SUFFIX_HEX: usize = 8;

const FNV_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// 64-bit FNV-1a, fed piece by piece.
struct Fnv1a64(u64);

/// One byte into the hash, as FNV-1a takes every byte.
fn fnv1a_step(hash: u64, byte: u8) -> u64 {
    (hash ^ u64::from(byte)).wrapping_mul(FNV_PRIME)
}

impl CanonicalSink for Fnv1a64 {
    /// Byte by byte, as FNV-1a is, eight bytes read at a time.
    fn put(&mut self, bytes: &[u8]) {
        let mut hash = self.0;
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let word = u64::from_le_bytes(word.try_into().unwrap_or([0; 8]));
            for shift in [0, 8, 16, 24, 32, 40, 48, 56] {
                hash = fnv1a_step(hash, (word >> shift) as u8);
            }
        }
        for &byte in words.remainder() {
            hash = fnv1a_step(hash, byte);
        }
        self.0 = hash;
    }

    /// Byte by byte straight from the escaped text: a file content's escapes (one every few
    /// dozen bytes) then cost a branch each instead of a run each.
    fn put_text(&mut self, text: &Str) {
        let mut hash = self.0;
        text.for_each_byte(|byte| hash = fnv1a_step(hash, byte));
        self.0 = hash;
    }
}

#[cfg(test)]
fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash = Fnv1a64(FNV_OFFSET_BASIS);
    hash.put(bytes);
    hash.0
}

/// The fingerprint of a spec: 16 lower-case hex digits of FNV-1a 64 over its canonical form,
/// hashed as it is written.
pub(crate) fn fingerprint(spec: Option<&Node>, rules: &FieldRules) -> String {
    let mut hash = Fnv1a64(FNV_OFFSET_BASIS);
    write_canonical_form("spec", spec, rules, &mut hash);
    format!("{:016x}", hash.0)
}

/// [`fingerprint`] of a spec given as a `serde_json` value (tools, tests).
pub fn spec_fingerprint(spec: Option<&Value>, rules: &FieldRules) -> String {
    fingerprint(spec.map(Node::from_value).as_ref(), rules)
}

fn has_hash_suffix(name: &str) -> bool {
    let bytes = name.as_bytes();
    bytes.len() > SUFFIX_HEX
        && bytes[bytes.len() - SUFFIX_HEX - 1] == b'-'
        && bytes[bytes.len() - SUFFIX_HEX..]
            .iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
}

/// `worker-a-0123abcd` + fingerprint `5e6f7a8b...` -> `worker-a-5e6f7a8b`.
pub fn suggested_name(current: &str, fingerprint: &str) -> String {
    let base = if has_hash_suffix(current) {
        &current[..current.len() - SUFFIX_HEX - 1]
    } else {
        current
    };
    let suffix = &fingerprint[..SUFFIX_HEX.min(fingerprint.len())];
    let mut base = base.trim_end_matches('-');
    if base.len() + 1 + suffix.len() > MAX_NAME {
        base = base[..MAX_NAME - 1 - suffix.len()].trim_end_matches(['-', '.']);
    }
    if base.is_empty() {
        suffix.to_string()
    } else {
        format!("{base}-{suffix}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capi::providers::default_field_rules;
    use rstest::rstest;
    use serde_json::json;

    #[rstest]
    #[case::plain("worker-a", "worker-a-5e6f7a8b")]
    #[case::hash_suffix("worker-a-0123abcd", "worker-a-5e6f7a8b")]
    #[case::upper_hex_is_not_ours("worker-a-0123ABCD", "worker-a-0123ABCD-5e6f7a8b")]
    #[case::seven_hex("worker-a-0123abc", "worker-a-0123abc-5e6f7a8b")]
    #[case::counter_suffix("worker-a-3", "worker-a-3-5e6f7a8b")]
    #[case::only_hash("-0123abcd", "5e6f7a8b")]
    fn suggested_names(#[case] current: &str, #[case] expected: &str) {
        assert_eq!(suggested_name(current, "5e6f7a8b9c0d"), expected);
    }

    #[test]
    fn suggested_name_stays_a_valid_length() {
        let long = "a".repeat(253);
        let name = suggested_name(&long, "5e6f7a8b");
        assert_eq!(name.len(), 253);
        assert!(name.ends_with("-5e6f7a8b"));
    }

    #[test]
    fn fingerprint_ignores_key_order_token_and_defaults() {
        let rules = default_field_rules("KubeadmConfig");
        let a = json!({
            "files": [{"path": "/etc/x", "content": "x"}],
            "joinConfiguration": {"discovery": {"bootstrapToken": {"token": "abc.def", "apiServerEndpoint": "10.0.0.1:6443"}},
                                  "nodeRegistration": {"imagePullPolicy": "IfNotPresent", "name": "n"}},
            "format": "cloud-config"
        });
        let b = json!({
            "joinConfiguration": {"nodeRegistration": {"name": "n"}},
            "files": [{"content": "x", "path": "/etc/x"}]
        });
        assert_eq!(
            spec_fingerprint(Some(&a), &rules),
            spec_fingerprint(Some(&b), &rules)
        );
        let c = json!({"joinConfiguration": {"nodeRegistration": {"name": "m"}}, "files": [{"content": "x", "path": "/etc/x"}]});
        assert_ne!(
            spec_fingerprint(Some(&b), &rules),
            spec_fingerprint(Some(&c), &rules)
        );
    }

    #[rstest]
    // The reference vectors of the FNV specification (draft-eastlake-fnv).
    #[case::empty("", 0xcbf2_9ce4_8422_2325)]
    #[case::a("a", 0xaf63_dc4c_8601_ec8c)]
    #[case::foobar("foobar", 0x8594_4171_f739_67e8)]
    fn fnv1a64_reference_vectors(#[case] input: &str, #[case] expected: u64) {
        assert_eq!(fnv1a64(input.as_bytes()), expected);
    }

    #[test]
    fn fingerprint_is_fnv1a64_of_the_canonical_form() {
        // {"a": 1} in canonical form
        assert_eq!(
            spec_fingerprint(Some(&json!({"a": 1})), &FieldRules::default()),
            format!("{:016x}", fnv1a64(b"{s1:an1;}"))
        );
        assert_eq!(
            spec_fingerprint(Some(&json!({"a": 1})), &FieldRules::default()).len(),
            16
        );
    }

    /// The hash reads strings straight from the escaped JSON ([`Str::for_each_byte`]): the
    /// same fingerprint as hashing the canonical form written out, escapes anywhere in a word.
    #[rstest]
    #[case::file_lines(
        r#"{"files": [{"path": "/etc/x", "content": "a = \"v-0123456789abcdef\"\nb = \"v\"\n"}]}"#
    )]
    #[case::escaped_keys(r#"{"f\u0069les": [{"p\u0061th": "/\/x\t", "content": "\\\\\\"}]}"#)]
    #[case::unicode(r#"{"preKubeadmCommands": ["\u00e9\uD83D\uDE00 0123456789", "é😀", "\n"]}"#)]
    #[case::token_ignored(
        r#"{"joinConfiguration": {"discovery": {"bootstrapToken": {"token": "a\u0062c.def"}}}}"#
    )]
    fn fingerprint_of_read_json_hashes_its_canonical_form(#[case] spec: &str) {
        let rules = default_field_rules("KubeadmConfig");
        let node = crate::reader::json::read_document(spec.as_bytes(), |r| r.read_node()).unwrap();
        let value: serde_json::Value = serde_json::from_str(spec).unwrap();
        let canonical = crate::canonical_form::canonical_form("spec", Some(&node), &rules);
        assert_eq!(
            fingerprint(Some(&node), &rules),
            format!("{:016x}", fnv1a64(&canonical))
        );
        assert_eq!(
            fingerprint(Some(&node), &rules),
            spec_fingerprint(Some(&value), &rules)
        );
    }

    #[test]
    fn streamed_fingerprint_hashes_the_buffered_canonical_form() {
        let rules = default_field_rules("KubeadmConfig");
        let spec = json!({
            "files": [{"path": "/etc/x", "content": "x\ny"}, null, {}],
            "joinConfiguration": {"discovery": {"bootstrapToken": {"token": "abc.def"}}},
            "preKubeadmCommands": ["a", "b"],
            "verbosity": 3,
            "useExperimentalRetryJoin": false
        });
        assert_eq!(
            spec_fingerprint(Some(&spec), &rules),
            format!(
                "{:016x}",
                fnv1a64(&crate::canonical_form::canonical_form(
                    "spec",
                    Some(&Node::from_value(&spec)),
                    &rules
                ))
            )
        );
    }
}
