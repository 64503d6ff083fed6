//! What CAPI's conversion does to a bootstrap config on its way to storage and back, per served
//! API version: the facts behind rule 2's treatment of GitOps repositories still written in an
//! older version (docs/stored-versions.md; the list itself is
//! cluster-test/testdata/storage-facts.txt, generated from the providers' Go types, and the
//! tests below hold this table to it).
//!
//! - **Zero is absent**: a non-pointer scalar with `omitempty` in a version's Go type. Zero and
//!   absent decode to the same Go value, which is all a provider renders bootstrap data from,
//!   and a round trip through the Go type (a defaulter, a conversion) drops the zero. Adding or
//!   removing the zero of such a field, in the version the request was written in, changes
//!   nothing.
//! - **Dropped**: a field an older served version has and the storage version has no place for
//!   (CAPI's generated conversions: "does not exist in peer-type"), and that the manual
//!   conversion neither maps to another field nor keeps. Written through the older version it
//!   is lost on the way to storage, so changing it changes nothing stored, nor any node.
//!
//! Which version stores the object is not in an admission request, but an object read through
//! a version that is not the hub carries the hub's data in CAPI's annotation `cluster.x-k8s.io/conversion-data`
//! ([`crate::reader::object::CONVERSION_DATA`]): CAPI's
//! down-conversion writes it on every read (sigs.k8s.io/cluster-api v1.12.10
//! util/conversion/conversion.go `MarshalData`, v1.14.2 `MarshalDataUnsafeNoCopy`; RKE2's and
//! k3s' conversions do the same), as the hub's JSON with its `apiVersion`, and the request's
//! `oldObject` is the stored object converted to the request's version. CAPI never stores it
//! (`UnmarshalData` removes it on the way up). So a version's dropped fields are left out exactly
//! when the `oldObject` carries it naming another version of the same group
//! ([`converted_from_another_version`]): on CAPI v1.11 and later (v1beta2 stored) a v1beta1
//! request; never on CAPI v1.10 (v1beta1 stored, nothing converted), where those fields are
//! stored and their change is an edit as any other. (On v1.10 a client could store the
//! annotation itself, and then change a dropped field unrefused: docs/stored-versions.md.)

use crate::capi::kinds::TEMPLATE_SUFFIX;
use crate::reader::json::read_document;
use crate::reader::object::Object;

/// One served version of a bootstrap kind: paths below the kind's spec ([`spec_root`] in front
/// of each gives the path from the object's top), in the settings' pattern syntax (`[*]` any
/// list element, `.*` any key of a map). A config kind and its template share their lists.
#[derive(Debug)]
pub struct ServedVersion {
    pub kind: &'static str,
    /// The version alone (`v1beta1`); every kind here is in `bootstrap.cluster.x-k8s.io`.
    pub version: &'static str,
    pub zero_is_absent: &'static [&'static str],
    /// Lost when the storage version is a newer one.
    pub dropped: &'static [&'static str],
}

impl ServedVersion {
    /// Where its paths start: [`spec_root`] of its kind.
    pub fn spec_root(&self) -> &'static str {
        spec_root(self.kind)
    }
}

/// Where a bootstrap kind's spec starts: `spec.` of a config, `spec.template.spec.` of a
/// template.
pub fn spec_root(kind: &str) -> &'static str {
    if kind.ends_with(TEMPLATE_SUFFIX) {
        "spec.template.spec."
    } else {
        "spec."
    }
}

mod table;
/// Every served version of every release the cluster test pins, generated from
/// cluster-test/testdata/storage-facts.txt (the union over releases: a path is listed when one
/// of them has the fact); `UPDATE_CONVERSION_TABLE=1 cargo test -p capi-bootstrap-rollout-policy
/// conversion` writes it again.
pub use table::SERVED_VERSIONS;

/// The facts of a kind at a served version, if any are known.
pub fn served_version(kind: &str, version: &str) -> Option<&'static ServedVersion> {
    SERVED_VERSIONS
        .iter()
        .find(|v| v.kind == kind && v.version == version)
}

/// `object` (a request's `oldObject`) was converted to `version` of `group` from another version
/// of that group, the one stored: its `cluster.x-k8s.io/conversion-data` names that version.
pub fn converted_from_another_version(object: &Object, group: &str, version: &str) -> bool {
    let Some(data) = object.conversion_data else {
        return false;
    };
    let data = data.to_str();
    let mut api_version = None;
    let read = read_document(data.as_bytes(), |r| {
        r.read_object_or_skip(|r, key| {
            if key.is("apiVersion") {
                api_version = r.read_scalar()?.str().map(|v| v.into_owned());
                Ok(())
            } else {
                r.skip()
            }
        })
    });
    let hub = match (read, api_version) {
        (Ok(_), Some(hub)) => hub,
        _ => return false,
    };
    hub.split_once('/')
        .is_some_and(|(g, v)| g == group && !v.is_empty() && v != version)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use std::collections::BTreeMap;
    use std::fmt::Write;
    use std::path::Path;

    const GROUP: &str = "bootstrap.cluster.x-k8s.io";

    /// A kind's paths of one class, sorted and deduplicated.
    type Paths = std::collections::BTreeSet<String>;
    /// (kind, version) -> (zero-is-absent, dropped).
    type Facts = BTreeMap<(String, String), (Paths, Paths)>;

    /// The table's source as storage-facts.txt says it must be.
    fn table_from_facts() -> String {
        let versions = read_facts();
        // Each path list written as a constant, with its name; a list two versions (a config's
        // and its template's) share is written once.
        let mut lists: Vec<(Vec<String>, String)> = Vec::new();
        let entries = table_entries(&versions, &mut lists);
        table_source(&entries, &lists)
    }

    /// The facts of cluster-test/testdata/storage-facts.txt, each line checked.
    fn read_facts() -> Facts {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let facts = std::fs::read_to_string(root.join("cluster-test/testdata/storage-facts.txt"))
            .expect("cluster-test/testdata/storage-facts.txt");
        let mut versions = Facts::new();
        for (n, line) in facts.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let columns: Vec<&str> = line.split_whitespace().collect();
            let [_release, kind, api_version, class, path] = columns[..] else {
                panic!("storage-facts.txt:{}: want 5 columns: {line}", n + 1);
            };
            let (group, version) = api_version.split_once('/').expect("group/version");
            assert_eq!(group, GROUP, "storage-facts.txt:{}: {line}", n + 1);
            assert!(
                crate::capi::paths::PathPattern::parse(path).is_ok(),
                "storage-facts.txt:{}: not a path pattern: {path}",
                n + 1
            );
            let entry = versions
                .entry((kind.to_string(), version.to_string()))
                .or_default();
            match class {
                "zero-is-absent" => entry.0.insert(path.to_string()),
                "dropped" => entry.1.insert(path.to_string()),
                other => panic!("storage-facts.txt:{}: unknown class {other}", n + 1),
            };
        }
        versions
    }

    /// The paths below the kind's spec.
    fn relative(kind: &str, paths: &Paths) -> Vec<String> {
        let root = spec_root(kind);
        paths
            .iter()
            .map(|p| {
                p.strip_prefix(root)
                    .unwrap_or_else(|| panic!("storage-facts.txt: {kind} {p}: not below {root}"))
                    .to_string()
            })
            .collect()
    }

    /// The name of a version's list of a class: `KUBEADM_CONFIG_V1BETA1_DROPPED`.
    fn constant(kind: &str, version: &str, class: &str) -> String {
        let mut name = String::new();
        let mut previous = ' ';
        for c in kind.chars() {
            if c.is_ascii_uppercase()
                && (previous.is_ascii_lowercase() || previous.is_ascii_digit())
            {
                name.push('_');
            }
            name.push(c.to_ascii_uppercase());
            previous = c;
        }
        format!("{name}_{}_{class}", version.to_ascii_uppercase())
    }

    /// The `SERVED_VERSIONS` entries, one a version; each non-empty path list is added to
    /// `lists` (once) and named by its constant.
    fn table_entries(versions: &Facts, lists: &mut Vec<(Vec<String>, String)>) -> String {
        let mut name_of = |paths: Vec<String>, name: String| -> String {
            if paths.is_empty() {
                return "&[]".to_string();
            }
            if let Some((_, known)) = lists.iter().find(|(p, _)| *p == paths) {
                return known.clone();
            }
            lists.push((paths, name.clone()));
            name
        };
        let mut entries = String::new();
        for ((kind, version), (zero, dropped)) in versions {
            let zero = name_of(
                relative(kind, zero),
                constant(kind, version, "ZERO_IS_ABSENT"),
            );
            let dropped = name_of(relative(kind, dropped), constant(kind, version, "DROPPED"));
            writeln!(
                entries,
                "    ServedVersion {{\n        kind: {kind:?},\n        version: {version:?},\n        zero_is_absent: {zero},\n        dropped: {dropped},\n    }},"
            )
            .unwrap();
        }
        entries
    }

    /// table.rs: its header, the entries, and the path lists' constants.
    fn table_source(entries: &str, lists: &[(Vec<String>, String)]) -> String {
        let mut out = String::from(
            "//! Generated from cluster-test/testdata/storage-facts.txt by the test\n\
             //! `conversion::tests::the_table_is_the_storage_facts`; do not edit by hand.\n\n\
             use super::ServedVersion;\n\n\
             pub const SERVED_VERSIONS: &[ServedVersion] = &[\n",
        );
        out.push_str(entries);
        out.push_str("];\n");
        for (paths, name) in lists {
            // As rustfmt writes it: on one line when the list is short.
            let items: Vec<String> = paths.iter().map(|p| format!("{p:?}")).collect();
            let line = format!("const {name}: &[&str] = &[{}];", items.join(", "));
            if items.join(", ").len() + 2 <= 60 && line.len() <= 100 {
                writeln!(out, "\n{line}").unwrap();
                continue;
            }
            writeln!(out, "\nconst {name}: &[&str] = &[").unwrap();
            for item in &items {
                writeln!(out, "    {item},").unwrap();
            }
            out.push_str("];\n");
        }
        out
    }

    #[test]
    fn the_table_is_the_storage_facts() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/capi/conversion/table.rs");
        let want = table_from_facts();
        if std::env::var_os("UPDATE_CONVERSION_TABLE").is_some() {
            std::fs::write(&path, &want).unwrap();
            return;
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            have == want,
            "src/capi/conversion/table.rs differs from cluster-test/testdata/storage-facts.txt: \
             run UPDATE_CONVERSION_TABLE=1 cargo test -p capi-bootstrap-rollout-policy conversion"
        );
    }

    #[test]
    fn the_facts_the_rules_rely_on() {
        let full = |v: &ServedVersion, paths: &[&str]| -> Vec<String> {
            paths
                .iter()
                .map(|p| format!("{}{p}", v.spec_root()))
                .collect()
        };
        let kubeadm = served_version("KubeadmConfig", "v1beta1").unwrap();
        assert!(full(kubeadm, kubeadm.dropped).contains(&"spec.useExperimentalRetryJoin".into()));
        assert!(full(kubeadm, kubeadm.zero_is_absent).contains(&"spec.files[*].append".into()));
        let template = served_version("KubeadmConfigTemplate", "v1beta1").unwrap();
        assert!(full(template, template.dropped)
            .contains(&"spec.template.spec.useExperimentalRetryJoin".into()));
        assert!(served_version("KubeadmConfig", "v1beta2")
            .unwrap()
            .dropped
            .is_empty());
        assert!(served_version("EKSConfig", "v1beta2").is_none());
    }

    fn object(annotation: Option<&str>) -> Vec<u8> {
        let annotations = match annotation {
            Some(a) => serde_json::json!({crate::reader::object::CONVERSION_DATA: a}),
            None => serde_json::json!({}),
        };
        serde_json::to_vec(&serde_json::json!({"metadata": {"annotations": annotations}})).unwrap()
    }

    #[rstest]
    #[case::capi_v112_read_through_v1beta1(Some(r#"{"apiVersion":"bootstrap.cluster.x-k8s.io/v1beta2","kind":"KubeadmConfig","spec":{}}"#), "v1beta1", true)]
    #[case::capi_v114_kind_first(Some(r#"{"kind":"KubeadmConfig","apiVersion":"bootstrap.cluster.x-k8s.io/v1beta2","spec":{"files":[]}}"#), "v1beta1", true)]
    #[case::rke2_v1alpha1_read(
        Some(r#"{"apiVersion":"bootstrap.cluster.x-k8s.io/v1beta1","kind":"RKE2Config"}"#),
        "v1alpha1",
        true
    )]
    #[case::capi_v110_nothing_converted(None, "v1beta1", false)]
    #[case::the_same_version(
        Some(r#"{"apiVersion":"bootstrap.cluster.x-k8s.io/v1beta1"}"#),
        "v1beta1",
        false
    )]
    #[case::another_group(Some(r#"{"apiVersion":"cluster.x-k8s.io/v1beta2"}"#), "v1beta1", false)]
    #[case::no_api_version(Some(r#"{"spec":{}}"#), "v1beta1", false)]
    #[case::not_json(Some("{not json"), "v1beta1", false)]
    #[case::no_version(
        Some(r#"{"apiVersion":"bootstrap.cluster.x-k8s.io/"}"#),
        "v1beta1",
        false
    )]
    fn what_was_converted(
        #[case] annotation: Option<&str>,
        #[case] version: &str,
        #[case] expected: bool,
    ) {
        let json = object(annotation);
        let object = Object::from_json(&json).unwrap();
        assert_eq!(
            converted_from_another_version(&object, GROUP, version),
            expected
        );
    }
}
