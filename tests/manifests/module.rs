//! The annotated module: its metadata section is metadata.yml, its usage README.md.

use std::collections::BTreeSet;
use std::path::PathBuf;

use rstest::rstest;
use serde_json::{json, Value};

use crate::files::{read, root, yaml, METADATA_SECTION, USAGE_ANNOTATION};

fn leb128_u32(bytes: &[u8], pos: &mut usize) -> Result<u32, String> {
    let mut value = 0u32;
    for i in 0..5 {
        let byte = *bytes.get(*pos).ok_or("truncated LEB128 number")?;
        *pos += 1;
        if i == 4 && byte > 0x0f {
            return Err("LEB128 number does not fit in 32 bits".into());
        }
        value |= u32::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err("LEB128 number longer than 5 bytes".into())
}

/// The custom sections of a wasm module, `(name, payload)` in order. The binary format's
/// framing (magic, version, then `id, size, payload` per section) is all this needs, so the
/// test carries no wasm parser dependency.
fn custom_sections(module: &[u8]) -> Result<Vec<(String, &[u8])>, String> {
    let body = module
        .strip_prefix(b"\0asm\x01\0\0\0")
        .ok_or("no wasm magic number and version 1 header")?;
    let mut sections = Vec::new();
    let mut pos = 0;
    while pos < body.len() {
        let id = body[pos];
        pos += 1;
        let size = leb128_u32(body, &mut pos)? as usize;
        let end = pos
            .checked_add(size)
            .filter(|&end| end <= body.len())
            .ok_or_else(|| format!("section {id} runs past the end of the module"))?;
        if id == 0 {
            let payload = &body[..end];
            let mut at = pos;
            let name_len = leb128_u32(payload, &mut at)? as usize;
            let name_end = at
                .checked_add(name_len)
                .filter(|&e| e <= end)
                .ok_or("custom section name runs past its section")?;
            let name = std::str::from_utf8(&payload[at..name_end])
                .map_err(|e| format!("custom section name is not UTF-8: {e}"))?;
            sections.push((name.to_string(), &payload[name_end..]));
        }
        pos = end;
    }
    Ok(sections)
}

fn section(id: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![id];
    let mut size = payload.len();
    loop {
        let byte = (size & 0x7f) as u8;
        size >>= 7;
        out.push(if size == 0 { byte } else { byte | 0x80 });
        if size == 0 {
            break;
        }
    }
    out.extend_from_slice(payload);
    out
}

#[test]
fn custom_section_reader_reads_what_it_should() {
    let mut custom = vec![22u8];
    custom.extend_from_slice(METADATA_SECTION.as_bytes());
    custom.extend_from_slice(&[b'x'; 200]); // 200 bytes: a two-byte section size
    let mut module = b"\0asm\x01\0\0\0".to_vec();
    module.extend(section(1, &[1, 0x60, 0, 0])); // a type section: skipped
    module.extend(section(0, &custom));
    module.extend(section(0, b"\x04name"));
    let sections = custom_sections(&module).expect("valid module");
    assert_eq!(sections.len(), 2);
    assert_eq!(sections[0].0, METADATA_SECTION);
    assert_eq!(sections[0].1, &[b'x'; 200][..]);
    assert_eq!(sections[1], ("name".to_string(), &b""[..]));

    assert!(
        custom_sections(b"\0asm\x02\0\0\0").is_err(),
        "wrong version"
    );
    assert!(
        custom_sections(&module[..module.len() - 1]).is_err(),
        "truncated"
    );
}

#[rstest]
#[case::one_byte(&[0x05], Ok(5))]
#[case::two_bytes(&[0xc8, 0x01], Ok(200))]
#[case::max(&[0xff, 0xff, 0xff, 0xff, 0x0f], Ok(u32::MAX))]
#[case::too_big(&[0xff, 0xff, 0xff, 0xff, 0x1f], Err(()))]
#[case::truncated(&[0x80], Err(()))]
fn leb128_decoding(#[case] bytes: &[u8], #[case] expected: Result<u32, ()>) {
    let mut pos = 0;
    assert_eq!(leb128_u32(bytes, &mut pos).map_err(|_| ()), expected);
}

fn annotated_module_path() -> PathBuf {
    std::env::var_os("ANNOTATED_POLICY")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("annotated-policy.wasm"))
}

/// Keys whose values differ between two JSON maps, one level deep into `annotations`.
fn differing_keys(actual: &Value, expected: &Value) -> Vec<String> {
    let empty = serde_json::Map::new();
    let keys = |v: &Value| -> BTreeSet<String> {
        v.as_object().unwrap_or(&empty).keys().cloned().collect()
    };
    let mut out = Vec::new();
    for key in keys(actual).union(&keys(expected)) {
        if actual.get(key) == expected.get(key) {
            continue;
        }
        if key == "annotations" {
            for inner in differing_keys(&actual[key], &expected[key]) {
                out.push(format!("annotations.{inner}"));
            }
        } else {
            out.push(key.clone());
        }
    }
    out
}

#[test]
fn annotated_module_embeds_metadata_yml_and_readme() {
    let path = annotated_module_path();
    let module = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read the annotated module {}: {e}\n\
             Run `make annotated-policy.wasm` first (`make test` builds it before the tests), \
             or set ANNOTATED_POLICY to an annotated module.",
            path.display()
        )
    });
    let sections = custom_sections(&module)
        .unwrap_or_else(|e| panic!("{} is not a wasm module: {e}", path.display()));
    let found: Vec<&[u8]> = sections
        .iter()
        .filter(|(name, _)| name == METADATA_SECTION)
        .map(|(_, payload)| *payload)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "{} must carry exactly one {METADATA_SECTION} section (is it annotated?)",
        path.display()
    );
    let mut actual: Value = serde_json::from_slice(found[0])
        .unwrap_or_else(|e| panic!("{METADATA_SECTION} is not JSON: {e}"));

    let mut expected = yaml("metadata.yml");
    expected["protocolVersion"] = json!("v1");
    expected["annotations"][USAGE_ANNOTATION] = json!(read("README.md"));

    // What annotate adds beyond that: io.kubewarden.kwctl, which kwctl sets to its version and
    // policy-host to its name and version, and the policy type both default to.
    let stamp = actual["annotations"]
        .as_object_mut()
        .and_then(|annotations| annotations.remove("io.kubewarden.kwctl"))
        .unwrap_or_else(|| {
            panic!(
                "{}: no io.kubewarden.kwctl annotation: it was not annotated by kwctl or by \
                 this policy-host; rebuild it with `make annotated-policy.wasm`",
                path.display()
            )
        });
    let stamp = stamp.as_str().expect("io.kubewarden.kwctl is a string");
    let version = stamp.strip_prefix("policy-host ").unwrap_or(stamp);
    let release_part = version.split(['-', '+']).next().unwrap_or_default();
    assert!(
        release_part.split('.').count() == 3
            && release_part
                .split('.')
                .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())),
        "io.kubewarden.kwctl {stamp:?}: neither a kwctl version nor `policy-host <version>`"
    );
    if expected.get("policyType").is_none() {
        if let Some(policy_type) = actual.as_object_mut().and_then(|o| o.remove("policyType")) {
            assert_eq!(
                policy_type,
                json!("kubernetes"),
                "{METADATA_SECTION}: policyType"
            );
        }
    }

    let differences = differing_keys(&actual, &expected);
    assert!(
        differences.is_empty(),
        "{} embeds metadata that differs from metadata.yml + protocolVersion v1 + README.md \
         as {USAGE_ANNOTATION} in: {}\nIf metadata.yml or README.md changed, rebuild it with \
         `make annotated-policy.wasm`.",
        path.display(),
        differences.join(", ")
    );
    assert_eq!(actual, expected);
}
