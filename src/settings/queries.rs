//! What the rules ask of the settings at admission time.

use crate::capi::field_rules::FieldRules;
use crate::capi::kinds::{GroupKind, TEMPLATE_SUFFIX};
use crate::capi::providers::{default_field_rules, provider_of_group_kind};
use crate::settings::Settings;

impl Settings {
    /// Whether `{group, kind}` is a bootstrap config this policy judges.
    pub fn is_bootstrap_config(&self, group: &str, kind: &str) -> bool {
        self.bootstrap_config_kinds
            .iter()
            .any(|gk| gk.group == group && gk.kind == kind)
    }

    /// Whether `{group, kind}` is the template of a bootstrap config kind this policy judges
    /// (`KubeadmConfigTemplate` for `KubeadmConfig`).
    pub fn is_bootstrap_template(&self, group: &str, kind: &str) -> bool {
        kind.strip_suffix(TEMPLATE_SUFFIX)
            .is_some_and(|config| self.is_bootstrap_config(group, config))
    }

    /// Built-in non-compared fields of `kind`, extended by the settings.
    pub fn field_rules(&self, kind: &str) -> FieldRules {
        let mut rules = default_field_rules(kind);
        if let Some(extra) = self.ignored_paths.get(kind) {
            rules.ignored.extend(extra.iter().cloned());
        }
        if let Some(extra) = self.fill_once_paths.get(kind) {
            rules.fill_once.extend(extra.iter().cloned());
        }
        rules
    }

    /// The apiVersion lookups use for a config kind, if known.
    pub fn lookup_api_version(&self, group_kind: &GroupKind) -> Option<String> {
        let version = self.kind_versions.get(group_kind).cloned().or_else(|| {
            // The provider's record: its version, or CAPI's own (KubeadmConfig).
            let provider = provider_of_group_kind(group_kind)?;
            Some(
                provider
                    .lookup_version
                    .unwrap_or(self.capi_version.as_ref())
                    .to_string(),
            )
        })?;
        Some(format!("{}/{version}", group_kind.group))
    }
}
