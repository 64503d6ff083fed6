//! The host capabilities a policy may use, as policy-server grants them from policies.yml's
//! `hostCapabilities` (policy-evaluator `host_capabilities.rs`, Kubewarden 1.35): `*`, a prefix
//! ending in `/*` (`kubernetes/*`, `oci/v1/*`) or an exact `{namespace}/{operation}`, each
//! checked against the capabilities that exist. An empty list denies every capability but
//! `tracing`. `policy-host run` grants everything, as kwctl does.

use std::collections::BTreeSet;

use crate::wasm_scanner::KNOWN_CAPABILITIES;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum HostCapabilities {
    #[default]
    DenyAll,
    AllowAll,
    Patterns {
        /// `oci/` for `oci/*`.
        prefixes: BTreeSet<String>,
        exact: BTreeSet<String>,
    },
}

impl HostCapabilities {
    /// Parses policies.yml's patterns; the errors are policy-evaluator's
    /// `HostCapabilitiesPatternError` texts.
    pub fn new<I, S>(patterns: I) -> Result<HostCapabilities, String>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut prefixes = BTreeSet::new();
        let mut exact = BTreeSet::new();
        for pattern in patterns {
            let pattern = pattern.as_ref();
            let trimmed = pattern.trim();
            if trimmed.is_empty() {
                return Err("invalid pattern: pattern must not be empty".to_string());
            }
            if trimmed == "*" {
                return Ok(HostCapabilities::AllowAll);
            }
            if trimmed.contains('*') && !trimmed.ends_with("/*") {
                return Err(format!(
                    "invalid pattern {pattern:?}: wildcard '*' must be the entire last path segment (e.g. 'oci/*'), not a partial match"
                ));
            }
            validate_against_tree(trimmed)?;
            match trimmed.strip_suffix('*') {
                Some(prefix) => prefixes.insert(prefix.to_string()),
                None => exact.insert(trimmed.to_string()),
            };
        }
        if prefixes.is_empty() && exact.is_empty() {
            return Ok(HostCapabilities::DenyAll);
        }
        Ok(HostCapabilities::Patterns { prefixes, exact })
    }

    pub fn is_allowed(&self, capability_path: &str) -> bool {
        match self {
            HostCapabilities::AllowAll => true,
            HostCapabilities::DenyAll => false,
            HostCapabilities::Patterns { prefixes, exact } => {
                exact.contains(capability_path)
                    || prefixes.iter().any(|p| capability_path.starts_with(p))
            }
        }
    }
}

/// The children of a node of the capability tree (every `namespace/operation` a policy can
/// call): the next segments after `prefix` (empty for the root), and whether each is a leaf.
fn children(prefix: &[&str]) -> Vec<(&'static str, bool)> {
    let mut found: Vec<(&'static str, bool)> = Vec::new();
    for (namespace, operation) in KNOWN_CAPABILITIES {
        let segments: Vec<&'static str> = [namespace]
            .into_iter()
            .chain(operation.split('/'))
            .collect();
        if segments.len() > prefix.len() && segments[..prefix.len()] == *prefix {
            let segment = segments[prefix.len()];
            let leaf = segments.len() == prefix.len() + 1;
            if !found.iter().any(|(s, _)| *s == segment) {
                found.push((segment, leaf));
            }
        }
    }
    found
}

/// policy-evaluator's `validate_against_tree`: every segment before a final `*` must be an
/// inner node; an exact path must end on a leaf.
fn validate_against_tree(pattern: &str) -> Result<(), String> {
    let parts: Vec<&str> = pattern.split('/').collect();
    for (i, &part) in parts.iter().enumerate() {
        if part == "*" {
            return Ok(());
        }
        let options = children(&parts[..i]);
        match options.iter().find(|(segment, _)| *segment == part) {
            None => {
                let mut valid: Vec<&str> = options.iter().map(|(s, _)| *s).collect();
                valid.sort_unstable();
                return Err(unknown_segment(pattern, part, &valid.join(", ")));
            }
            Some((_, true)) => {
                if i != parts.len() - 1 {
                    return Err(unknown_segment(pattern, parts[i + 1], ""));
                }
                return Ok(());
            }
            Some((_, false)) => {
                if i == parts.len() - 1 {
                    return Err(format!(
                        "invalid pattern {pattern:?}: not a complete capability path; use {:?} to allow all capabilities under it",
                        format!("{pattern}/*")
                    ));
                }
            }
        }
    }
    Ok(())
}

fn unknown_segment(pattern: &str, segment: &str, valid_options: &str) -> String {
    format!(
        "invalid pattern {pattern:?}: unknown segment {segment:?}, valid options at this level are: {valid_options}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_grant_what_they_name() {
        let none = HostCapabilities::new(Vec::<String>::new()).unwrap();
        assert_eq!(none, HostCapabilities::DenyAll);
        assert!(!none.is_allowed("kubernetes/list_resources_by_namespace"));

        let all = HostCapabilities::new(["kubernetes/get_resource", "*"]).unwrap();
        assert!(all.is_allowed("oci/v1/verify"));

        let kube = HostCapabilities::new(["kubernetes/*", "oci/v1/verify"]).unwrap();
        assert!(kube.is_allowed("kubernetes/list_resources_by_namespace"));
        assert!(kube.is_allowed("oci/v1/verify"));
        assert!(!kube.is_allowed("oci/v2/verify"));
        assert!(!kube.is_allowed("net/v1/dns_lookup_host"));

        let exact = HostCapabilities::new([" kubernetes/list_resources_all "]).unwrap();
        assert!(exact.is_allowed("kubernetes/list_resources_all"));
        assert!(!exact.is_allowed("kubernetes/get_resource"));
    }

    #[test]
    fn bad_patterns_are_named() {
        assert_eq!(
            HostCapabilities::new([""]).unwrap_err(),
            "invalid pattern: pattern must not be empty"
        );
        assert_eq!(
            HostCapabilities::new(["oci*"]).unwrap_err(),
            "invalid pattern \"oci*\": wildcard '*' must be the entire last path segment (e.g. 'oci/*'), not a partial match"
        );
        assert_eq!(
            HostCapabilities::new(["k8s/*"]).unwrap_err(),
            "invalid pattern \"k8s/*\": unknown segment \"k8s\", valid options at this level are: crypto, kubernetes, net, oci"
        );
        assert_eq!(
            HostCapabilities::new(["oci/v1"]).unwrap_err(),
            "invalid pattern \"oci/v1\": not a complete capability path; use \"oci/v1/*\" to allow all capabilities under it"
        );
        assert_eq!(
            HostCapabilities::new(["kubernetes/can_i/x"]).unwrap_err(),
            "invalid pattern \"kubernetes/can_i/x\": unknown segment \"x\", valid options at this level are: "
        );
    }
}
