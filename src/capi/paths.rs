//! Field paths in CAPI's notation (`spec.files[2].content`) and the path patterns used by the
//! settings (`spec.files[*].content`, `spec.*.nodeRegistration.imagePullPolicy`).

use std::borrow::Cow;
use std::fmt;

/// One step into a JSON document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Segment {
    Key(String),
    Index(usize),
}

impl Segment {
    pub fn as_step(&self) -> Step<'_> {
        match self {
            Segment::Key(key) => Step::Key(key),
            Segment::Index(index) => Step::Index(*index),
        }
    }
}

/// A [`Segment`] borrowed: what a pattern is matched against while walking a document, with no
/// key copied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// A concrete path, rendered the way Kubernetes field errors render it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldPath(Vec<Segment>);

impl FieldPath {
    pub fn root(key: &str) -> Self {
        FieldPath(vec![Segment::Key(key.to_string())])
    }

    pub fn push(&mut self, segment: Segment) {
        self.0.push(segment);
    }

    pub fn pop(&mut self) {
        self.0.pop();
    }

    pub fn segments(&self) -> &[Segment] {
        &self.0
    }

    pub fn child(&self, key: &str) -> Self {
        let mut path = self.clone();
        path.push(Segment::Key(key.to_string()));
        path
    }
}

/// Keys that are not plain identifiers (map keys such as `node-labels` are fine, keys with dots
/// or slashes are not) are rendered in brackets, as `metadata.labels[example.com/x]`.
fn plain_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, segment) in self.0.iter().enumerate() {
            match segment {
                Segment::Key(key) if plain_key(key) => {
                    if i > 0 {
                        f.write_str(".")?;
                    }
                    f.write_str(key)?;
                }
                Segment::Key(key) => write!(f, "[{key}]")?,
                Segment::Index(index) => write!(f, "[{index}]")?,
            }
        }
        Ok(())
    }
}

/// One step of a pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PatternSegment {
    Key(Cow<'static, str>),
    /// `*`: any key of an object.
    AnyKey,
    /// `[*]`: any element of a list.
    AnyIndex,
    Index(usize),
}

impl PatternSegment {
    fn matches(&self, step: Step) -> bool {
        match (self, step) {
            (PatternSegment::Key(p), Step::Key(k)) => p == k,
            (PatternSegment::AnyKey, Step::Key(_)) => true,
            (PatternSegment::AnyIndex, Step::Index(_)) => true,
            (PatternSegment::Index(p), Step::Index(i)) => *p == i,
            _ => false,
        }
    }

    fn is_wildcard(&self) -> bool {
        matches!(self, PatternSegment::AnyKey | PatternSegment::AnyIndex)
    }
}

/// A dotted path pattern rooted at `spec`, e.g. `spec.files[*].content`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathPattern {
    source: Cow<'static, str>,
    segments: Cow<'static, [PatternSegment]>,
}

/// A built-in pattern of dotted keys, made at compile time:
/// `builtin_path! { spec.joinConfiguration.discovery.bootstrapToken.token }` (in braces, which
/// rustfmt leaves alone; it would split the keys like a method chain). Every evaluation builds
/// its kind's built-in rules, and splitting their text at run time would cost 2 % of a rejected
/// edit's instructions.
macro_rules! builtin_path {
    ($first:ident $(. $rest:ident)*) => {
        $crate::capi::paths::PathPattern::from_static(
            concat!(stringify!($first) $(, ".", stringify!($rest))*),
            &[
                $crate::capi::paths::PatternSegment::Key(std::borrow::Cow::Borrowed(stringify!($first))),
                $($crate::capi::paths::PatternSegment::Key(std::borrow::Cow::Borrowed(stringify!($rest))),)*
            ],
        )
    };
}
pub(crate) use builtin_path;

impl PathPattern {
    /// Parses a pattern. The grammar is deliberately small: `key(.key|[n]|[*]|.*)*`, keys made of
    /// letters, digits, `_` and `-`; the first key must be `spec`.
    pub fn parse(source: &str) -> Result<Self, String> {
        let mut segments = Vec::new();
        let bytes = source.as_bytes();
        let mut i = 0;
        let mut expect_key = true;
        while i < bytes.len() {
            match bytes[i] {
                b'.' if !expect_key && i + 1 < bytes.len() => {
                    expect_key = true;
                    i += 1;
                }
                b'[' if !expect_key => {
                    let end = source[i..]
                        .find(']')
                        .map(|e| i + e)
                        .ok_or_else(|| format!("{source:?}: unclosed '['"))?;
                    let inner = &source[i + 1..end];
                    let segment = if inner == "*" {
                        PatternSegment::AnyIndex
                    } else {
                        let index = inner.parse::<usize>().map_err(|_| {
                            format!("{source:?}: [{inner}] must be a list index or [*]")
                        })?;
                        PatternSegment::Index(index)
                    };
                    segments.push(segment);
                    i = end + 1;
                }
                _ if expect_key => {
                    let end = source[i..]
                        .find(['.', '['])
                        .map(|e| i + e)
                        .unwrap_or(source.len());
                    let key = &source[i..end];
                    let segment = if key == "*" {
                        PatternSegment::AnyKey
                    } else if plain_key(key) {
                        PatternSegment::Key(Cow::Owned(key.to_string()))
                    } else {
                        return Err(format!(
                            "{source:?}: {key:?} is not a field name (letters, digits, '_', '-') or '*'"
                        ));
                    };
                    segments.push(segment);
                    expect_key = false;
                    i = end;
                }
                _ => {
                    return Err(format!(
                        "{source:?}: unexpected {:?} at offset {i}",
                        bytes[i] as char
                    ))
                }
            }
        }
        if expect_key {
            return Err(format!("{source:?}: empty path or trailing '.'"));
        }
        if segments.first() != Some(&PatternSegment::Key(Cow::Borrowed("spec"))) {
            return Err(format!("{source:?}: paths start at \"spec.\""));
        }
        if segments[1..].iter().all(PatternSegment::is_wildcard) {
            return Err(format!(
                "{source:?}: matches the whole spec; set inPlaceEdits: allow to switch the check off"
            ));
        }
        Ok(PathPattern {
            source: Cow::Owned(source.to_string()),
            segments: Cow::Owned(segments),
        })
    }

    /// A pattern written in the source ([`builtin_path!`]): its text and its segments.
    pub const fn from_static(source: &'static str, segments: &'static [PatternSegment]) -> Self {
        PathPattern {
            source: Cow::Borrowed(source),
            segments: Cow::Borrowed(segments),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.source
    }

    pub fn len(&self) -> usize {
        self.segments.len()
    }

    pub fn is_empty(&self) -> bool {
        self.segments.is_empty()
    }

    /// Whether step `depth` of a concrete path matches this pattern's step `depth`.
    pub fn matches_at(&self, depth: usize, step: Step) -> bool {
        self.segments.get(depth).is_some_and(|p| p.matches(step))
    }

    pub fn matches(&self, path: &FieldPath) -> bool {
        path.segments().len() == self.segments.len()
            && self
                .segments
                .iter()
                .zip(path.segments())
                .all(|(p, s)| p.matches(s.as_step()))
    }
}

impl fmt::Display for PathPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn path(segments: &[Segment]) -> FieldPath {
        FieldPath(segments.to_vec())
    }

    #[rstest]
    #[case::nested(&[Segment::Key("spec".into()), Segment::Key("files".into()), Segment::Index(2), Segment::Key("content".into())], "spec.files[2].content")]
    #[case::dashed_map_key(&[Segment::Key("spec".into()), Segment::Key("kubeletExtraArgs".into()), Segment::Key("node-labels".into())], "spec.kubeletExtraArgs.node-labels")]
    #[case::dotted_map_key(&[Segment::Key("metadata".into()), Segment::Key("labels".into()), Segment::Key("example.com/x".into())], "metadata.labels[example.com/x]")]
    fn renders_like_kubernetes_field_errors(#[case] segments: &[Segment], #[case] expected: &str) {
        assert_eq!(path(segments).to_string(), expected);
    }

    #[rstest]
    #[case::exact(
        "spec.joinConfiguration.discovery.bootstrapToken.token",
        "spec.joinConfiguration.discovery.bootstrapToken.token",
        true
    )]
    #[case::any_index("spec.files[*].content", "spec.files[7].content", true)]
    #[case::fixed_index("spec.files[1].content", "spec.files[7].content", false)]
    #[case::any_key(
        "spec.*.nodeRegistration.imagePullPolicy",
        "spec.initConfiguration.nodeRegistration.imagePullPolicy",
        true
    )]
    #[case::shorter_path("spec.files[*].content", "spec.files[7]", false)]
    #[case::longer_path("spec.files", "spec.files[7]", false)]
    fn pattern_matching(#[case] pattern: &str, #[case] concrete: &str, #[case] expected: bool) {
        let pattern = PathPattern::parse(pattern).unwrap();
        let concrete = PathPattern::parse(concrete).unwrap();
        let concrete = path(
            &concrete
                .segments
                .iter()
                .map(|s| match s {
                    PatternSegment::Key(k) => Segment::Key(k.to_string()),
                    PatternSegment::Index(i) => Segment::Index(*i),
                    _ => unreachable!(),
                })
                .collect::<Vec<_>>(),
        );
        assert_eq!(pattern.matches(&concrete), expected);
    }

    #[rstest]
    #[case::empty("", "empty path")]
    #[case::trailing_dot("spec.files.", "unexpected '.'")]
    #[case::double_dot("spec..files", "is not a field name")]
    #[case::not_spec("metadata.labels", "paths start at \"spec.\"")]
    #[case::whole_spec("spec", "matches the whole spec")]
    #[case::whole_spec_wildcard("spec.*", "matches the whole spec")]
    #[case::unclosed("spec.files[*", "unclosed '['")]
    #[case::bad_index("spec.files[x]", "must be a list index or [*]")]
    #[case::bad_char("spec.fi$les", "is not a field name")]
    #[case::leading_bracket("[0].spec", "is not a field name")]
    fn malformed_patterns_are_refused(#[case] source: &str, #[case] fragment: &str) {
        let error = PathPattern::parse(source).unwrap_err();
        assert!(error.contains(fragment), "{error}");
    }
}
