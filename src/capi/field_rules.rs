//! The fields of a kind the comparison does not take as they are: what CAPI's controllers write
//! (machine-only, fill-once) and what the request's version cannot tell from absence. The facts
//! come from [`crate::capi::providers`] and [`crate::capi::conversion`]; [`crate::diff`] applies them.

use crate::capi::paths::{FieldPath, PathPattern};

/// The non-compared fields of one bootstrap config kind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldRules {
    pub ignored: Vec<PathPattern>,
    pub fill_once: Vec<PathPattern>,
    /// Patterns (the settings' syntax, below `zero_is_absent_root`) of the fields whose zero
    /// value the request's version cannot tell from absence. Parsed only when a zero is added,
    /// which is rare: most requests pay nothing for a list that can be a hundred paths long.
    pub zero_is_absent: &'static [&'static str],
    /// What the paths of `zero_is_absent` are below (`spec.`, `spec.template.spec.`).
    pub zero_is_absent_root: &'static str,
}

impl FieldRules {
    pub(crate) fn zero_is_absent_at(&self, path: &FieldPath) -> bool {
        let mut pattern = String::new();
        self.zero_is_absent.iter().any(|p| {
            pattern.clear();
            pattern.push_str(self.zero_is_absent_root);
            pattern.push_str(p);
            PathPattern::parse(&pattern).is_ok_and(|p| p.matches(path))
        })
    }
}
