//! The host-capability check `kwctl annotate` makes since Kubewarden 1.35 (kwctl
//! `src/wasm_scanner.rs` and `src/annotate.rs`, over the capability tree of policy-evaluator's
//! `host_capabilities.rs`): which host capabilities a module calls, guessed from the strings in
//! its data segments, and the two warnings when that differs from metadata's
//! `hostCapabilities`.
//!
//! A waPC guest names the capability it calls with two strings, the namespace (`kubernetes`)
//! and the operation (`list_resources_by_namespace`), which end up in the module's data. kwctl
//! reports a capability as used when both appear in the data segments (each segment followed
//! by a 0xFF byte, so no match spans two of them). An operation that begins another one
//! (`v1/oci_manifest`, `v1/oci_manifest_config`) must also appear on its own, not only as the
//! start of the longer name. It is a heuristic: a module that merely contains the words is
//! reported too, and the comparison with metadata is string for string (a declared
//! `kubernetes/*` matches nothing that was detected).

use std::collections::BTreeSet;

use anyhow::{anyhow, Result};

/// Every host capability Kubewarden 1.35 defines, `(namespace, operation)`: the leaves of
/// policy-evaluator's capability tree, sorted as `HostCapabilities::enumerate_operations`
/// returns them.
pub const KNOWN_CAPABILITIES: [(&str, &str); 11] = [
    ("crypto", "v1/is_certificate_trusted"),
    ("kubernetes", "can_i"),
    ("kubernetes", "get_resource"),
    ("kubernetes", "list_resources_all"),
    ("kubernetes", "list_resources_by_namespace"),
    ("net", "v1/dns_lookup_host"),
    ("oci", "v1/manifest_digest"),
    ("oci", "v1/oci_manifest"),
    ("oci", "v1/oci_manifest_config"),
    ("oci", "v1/verify"),
    ("oci", "v2/verify"),
];

/// kwctl's warning for capabilities the module calls that metadata does not declare.
pub const USED_BUT_UNDECLARED: &str =
    "host capabilities used by the policy but not declared in metadata";
/// kwctl's warning for declared capabilities the module does not call.
pub const DECLARED_BUT_UNUSED: &str =
    "host capabilities declared in metadata but not detected in the policy";

/// The bytes of every data segment, active and passive, in module order, each followed by
/// 0xFF: what kwctl searches.
pub fn data_segments(module: &[u8]) -> Result<Vec<u8>> {
    let mut data = Vec::new();
    for payload in wasmparser::Parser::new(0).parse_all(module) {
        if let wasmparser::Payload::DataSection(reader) = payload? {
            for segment in reader {
                data.extend_from_slice(segment?.data);
                data.push(0xFF);
            }
        }
    }
    Ok(data)
}

/// The capabilities the module appears to call, as `namespace/operation`.
pub fn detect(module: &[u8]) -> Result<BTreeSet<String>> {
    let data = data_segments(module).map_err(|e| anyhow!("Error scanning wasm module: {e}"))?;
    Ok(KNOWN_CAPABILITIES
        .iter()
        .filter(|(namespace, operation)| is_called(&data, namespace, operation))
        .map(|(namespace, operation)| format!("{namespace}/{operation}"))
        .collect())
}

fn is_called(data: &[u8], namespace: &str, operation: &str) -> bool {
    if find(data, namespace.as_bytes(), 0).is_none() {
        return false;
    }
    let mut longer = KNOWN_CAPABILITIES
        .iter()
        .map(|(_, other)| *other)
        .filter(|other| *other != operation && other.starts_with(operation))
        .peekable();
    if longer.peek().is_none() {
        return find(data, operation.as_bytes(), 0).is_some();
    }
    longer.all(|other| appears_alone(data, operation.as_bytes(), other.as_bytes()))
}

/// Whether `short` occurs somewhere that is not the start of `long` (which begins with it).
fn appears_alone(data: &[u8], short: &[u8], long: &[u8]) -> bool {
    let mut from = 0;
    while let Some(at) = find(data, short, from) {
        if !data[at..].starts_with(long) {
            return true;
        }
        from = at + 1;
    }
    false
}

/// The first position at or after `from` where `needle` occurs.
fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    let mut windows = haystack.get(from..)?.windows(needle.len());
    windows
        .position(|window| window == needle)
        .map(|at| at + from)
}

/// kwctl's warnings, in its order and words: the capabilities detected but not declared,
/// then the declared ones not detected, each set written as Rust's `Debug` writes it (kwctl
/// logs it as the tracing field `capabilities`).
pub fn mismatch_warnings(
    detected: &BTreeSet<String>,
    declared: Option<&BTreeSet<String>>,
) -> Vec<String> {
    let none = BTreeSet::new();
    let declared = declared.unwrap_or(&none);
    let differences = [
        (USED_BUT_UNDECLARED, detected.difference(declared)),
        (DECLARED_BUT_UNUSED, declared.difference(detected)),
    ];
    let differences = differences.map(|(warning, set)| (warning, set.collect::<BTreeSet<_>>()));
    let differences = differences.into_iter().filter(|(_, set)| !set.is_empty());
    differences
        .map(|(warning, set)| format!("{warning} capabilities={set:?}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A module whose data segments hold `segments`, each one segment of NUL-separated strings.
    fn module(segments: &[&[&str]]) -> Vec<u8> {
        let data: String = segments
            .iter()
            .enumerate()
            .map(|(i, strings)| {
                let bytes: String = strings
                    .iter()
                    .flat_map(|s| s.bytes().chain([0]))
                    .map(|b| format!("\\{b:02x}"))
                    .collect();
                format!("(data (i32.const {}) \"{bytes}\")", i * 1024)
            })
            .collect();
        wat::parse_str(format!("(module (memory 1) {data})")).unwrap()
    }

    fn detected(segments: &[&[&str]]) -> Vec<String> {
        detect(&module(segments)).unwrap().into_iter().collect()
    }

    #[test]
    fn a_capability_is_its_namespace_and_its_operation() {
        assert_eq!(
            detected(&[&["kubewarden", "kubernetes", "list_resources_by_namespace"]]),
            ["kubernetes/list_resources_by_namespace"]
        );
        // Either string alone is not enough.
        assert!(detected(&[&["kubewarden", "list_resources_by_namespace"]]).is_empty());
        assert!(detected(&[&["kubewarden", "kubernetes"]]).is_empty());
        assert!(detected(&[&["hello", "world"]]).is_empty());
        // Both may sit in different segments, and inside other text.
        assert_eq!(
            detected(&[&["net"], &["lookup: v1/dns_lookup_hostname failed"]]),
            ["net/v1/dns_lookup_host"]
        );
    }

    #[test]
    fn no_match_spans_two_segments() {
        let split = module(&[&["kubernetes", "can"], &["_i"]]);
        let data = data_segments(&split).unwrap();
        assert_eq!(data.iter().filter(|b| **b == 0xFF).count(), 2);
        assert!(detect(&split).unwrap().is_empty());
        assert_eq!(detected(&[&["kubernetes", "can_i"]]), ["kubernetes/can_i"]);
    }

    #[test]
    fn an_operation_that_begins_another_must_also_appear_alone() {
        assert_eq!(
            detected(&[&["oci", "v1/oci_manifest_config"]]),
            ["oci/v1/oci_manifest_config"]
        );
        assert_eq!(
            detected(&[&["oci", "v1/oci_manifest_config", "v1/oci_manifest"]]),
            ["oci/v1/oci_manifest", "oci/v1/oci_manifest_config"]
        );
    }

    #[test]
    fn every_known_capability_is_found() {
        let strings: Vec<&str> = KNOWN_CAPABILITIES
            .iter()
            .flat_map(|(namespace, operation)| [*namespace, *operation])
            .collect();
        assert_eq!(detected(&[&strings]).len(), KNOWN_CAPABILITIES.len());
        let mut sorted = KNOWN_CAPABILITIES;
        sorted.sort();
        assert_eq!(sorted, KNOWN_CAPABILITIES);
    }

    #[test]
    fn warnings_name_each_side_of_the_difference() {
        let set =
            |items: &[&str]| -> BTreeSet<String> { items.iter().map(|s| s.to_string()).collect() };
        let detected = set(&["kubernetes/get_resource", "kubernetes/list_resources_all"]);
        assert_eq!(
            mismatch_warnings(&detected, Some(&detected)),
            Vec::<String>::new()
        );
        assert_eq!(
            mismatch_warnings(&detected, None),
            [
                r#"host capabilities used by the policy but not declared in metadata capabilities={"kubernetes/get_resource", "kubernetes/list_resources_all"}"#
            ]
        );
        // Patterns are not expanded: kwctl compares the strings.
        assert_eq!(
            mismatch_warnings(
                &set(&["kubernetes/get_resource"]),
                Some(&set(&["kubernetes/*"]))
            ),
            [
                r#"host capabilities used by the policy but not declared in metadata capabilities={"kubernetes/get_resource"}"#,
                r#"host capabilities declared in metadata but not detected in the policy capabilities={"kubernetes/*"}"#,
            ]
        );
        assert_eq!(
            mismatch_warnings(&set(&[]), Some(&set(&[]))),
            Vec::<String>::new()
        );
    }
}
