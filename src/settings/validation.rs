//! What a setting must be: well-formed API names, and no two settings contradicting each
//! other.

use crate::settings::Settings;

impl Settings {
    /// What no two settings may say together: a custom kind without the version lookups
    /// need, a path both machine-only and fill-once.
    pub(super) fn contradictions(&self) -> Vec<String> {
        let mut errors = Vec::new();
        if self.context_aware {
            for (i, gk) in self.bootstrap_config_kinds.iter().enumerate() {
                if self.lookup_api_version(gk).is_none() {
                    errors.push(format!(
                        "bootstrapConfigKinds[{i}].version: contextAware needs the version to look {} up in",
                        gk.qualified()
                    ));
                }
            }
        }
        let kinds: Vec<&str> = self
            .ignored_paths
            .keys()
            .chain(self.fill_once_paths.keys())
            .map(String::as_str)
            .collect();
        for kind in kinds {
            let rules = self.field_rules(kind);
            for pattern in &rules.fill_once {
                if rules.ignored.iter().any(|p| p.as_str() == pattern.as_str()) {
                    errors.push(format!(
                        "fillOncePaths/ignoredPaths: {kind} path {:?} is in both lists \
                         (built-in defaults included); a field is either machine-only or fill-once",
                        pattern.as_str()
                    ));
                }
            }
        }
        errors.sort();
        errors.dedup();
        errors
    }
}

pub(super) fn valid_kind(kind: &str) -> bool {
    kind.starts_with(|c: char| c.is_ascii_uppercase())
        && kind.bytes().all(|b| b.is_ascii_alphanumeric())
}

pub(super) fn valid_version(version: &str) -> bool {
    version.starts_with('v')
        && version.len() > 1
        && version
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

pub(super) fn valid_group(group: &str) -> bool {
    !group.is_empty()
        && group.split('.').all(|label| {
            !label.is_empty()
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        })
}
