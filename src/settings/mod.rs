//! The policy's settings: what they are and their defaults. [`parse`] reads them from JSON by
//! hand, so every error names its key; `validation` holds what a value must look like and what
//! no two settings may say together, checked when the policy is applied, never at admission
//! time; `queries` is what the rules ask of them at admission time. They are read from the
//! same borrowed `Node` as the rest of the payload (`reader::node`).

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::capi::kinds::GroupKind;
use crate::capi::paths::PathPattern;
use crate::capi::providers::{default_bootstrap_config_kinds, DEFAULT_CONTROLLER_USERS};

pub mod parse;
mod queries;
mod validation;

/// What to do with a finding of one rule family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Reject,
    Warn,
    /// Nothing is reported: spelled `allow` for inPlaceEdits and templateEdits, `ignore` for
    /// contractViolations.
    Allow,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    pub in_place_edits: Action,
    /// Spelled `reject`, `warn`, `allow`: in-place edits of bootstrap templates.
    pub template_edits: Action,
    pub contract_violations: Action,
    /// Spelled `warn`, `reject`, `allow`: a person's DELETE of a config (or template) whose
    /// stored object its MachinePool (Cluster, MachineDeployment, MachineSet) owns, when no
    /// lookup answers (rule 7).
    pub delete_owned_configs: Action,
    pub exempt_users: Vec<Cow<'static, str>>,
    pub exempt_groups: Vec<Cow<'static, str>>,
    pub controller_users: Vec<Cow<'static, str>>,
    pub bootstrap_config_kinds: Vec<GroupKind>,
    /// Extra paths per kind, merged with the built-in defaults by [`Settings::field_rules`].
    pub ignored_paths: BTreeMap<String, Vec<PathPattern>>,
    pub fill_once_paths: BTreeMap<String, Vec<PathPattern>>,
    /// Look MachinePools and configs up through Kubewarden's host capabilities.
    pub context_aware: bool,
    /// The CAPI API version lookups use for MachinePools and KubeadmConfigs.
    pub capi_version: Cow<'static, str>,
    /// `bootstrapConfigKinds[].version`: the version lookups use for a kind, when set.
    pub kind_versions: BTreeMap<GroupKind, String>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            in_place_edits: Action::Reject,
            template_edits: Action::Reject,
            contract_violations: Action::Warn,
            delete_owned_configs: Action::Warn,
            exempt_users: Vec::new(),
            exempt_groups: Vec::new(),
            controller_users: DEFAULT_CONTROLLER_USERS.map(Cow::Borrowed).to_vec(),
            bootstrap_config_kinds: default_bootstrap_config_kinds().collect(),
            ignored_paths: BTreeMap::new(),
            fill_once_paths: BTreeMap::new(),
            context_aware: false,
            capi_version: Cow::Borrowed("v1beta2"),
            kind_versions: BTreeMap::new(),
        }
    }
}
