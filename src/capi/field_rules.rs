//! The fields of a kind the comparison does not take as they are: what CAPI's controllers write
//! (machine-only, fill-once) and what the request's version cannot tell from absence. The facts
//! come from [`crate::capi::providers`] and [`crate::capi::conversion`]; [`crate::diff`] applies them.

use crate::capi::paths::{FieldPath, PathPattern, Step};

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

/// Patterns still matching the current path, as indices into the rule lists.
#[derive(Clone, Default)]
pub(crate) struct Active {
    pub(crate) ignored: Vec<usize>,
    pub(crate) fill_once: Vec<usize>,
}

impl Active {
    pub(crate) fn start(rules: &FieldRules, root: Step) -> Self {
        let all = |patterns: &[PathPattern]| -> Vec<usize> { (0..patterns.len()).collect() };
        Active {
            ignored: narrow(&rules.ignored, &all(&rules.ignored), 0, root),
            fill_once: narrow(&rules.fill_once, &all(&rules.fill_once), 0, root),
        }
    }

    /// The patterns still matching one step further down (a list is allocated only when one
    /// does: most of a spec is below no pattern).
    pub(crate) fn step(&self, rules: &FieldRules, depth: usize, step: Step) -> Self {
        if self.ignored.is_empty() && self.fill_once.is_empty() {
            return Active::default();
        }
        Active {
            ignored: narrow(&rules.ignored, &self.ignored, depth, step),
            fill_once: narrow(&rules.fill_once, &self.fill_once, depth, step),
        }
    }
}

fn narrow(patterns: &[PathPattern], active: &[usize], depth: usize, step: Step) -> Vec<usize> {
    active
        .iter()
        .copied()
        .filter(|&i| patterns[i].matches_at(depth, step))
        .collect()
}

/// Whether one of `active` (indices into `patterns`) ends at a path of `len` segments.
pub(crate) fn complete(patterns: &[PathPattern], active: &[usize], len: usize) -> bool {
    active.iter().any(|&i| patterns[i].len() == len)
}
