//! The fields of a kind the comparison does not take as they are: what CAPI's controllers write
//! (machine-only, fill-once) and what the request's version cannot tell from absence. The facts
//! come from [`crate::capi::providers`] and [`crate::capi::conversion`]; [`crate::diff`] applies them.

use crate::capi::paths::{FieldPath, PathPattern};

/// The non-compared fields of one bootstrap config kind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldRules {
    pub ignored: Vec<PathPattern>,
    pub fill_once: Vec<PathPattern>,
    /// Patterns (the settings' syntax) of the fields whose zero value the request's version
    /// cannot tell from absence. Parsed only when a zero is added, which is rare: most requests
    /// pay nothing for a list that can be a hundred paths long.
    pub zero_is_absent: &'static [&'static str],
}

impl FieldRules {
    pub(crate) fn zero_is_absent_at(&self, path: &FieldPath) -> bool {
        self.zero_is_absent
            .iter()
            .any(|p| PathPattern::parse(p).is_ok_and(|p| p.matches(path)))
    }
}
