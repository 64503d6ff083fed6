//! A Kubernetes type's group and kind, as a request names it.

use std::borrow::Cow;

/// A group and kind, the identity of a type independent of its version.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupKind {
    pub group: Cow<'static, str>,
    pub kind: Cow<'static, str>,
}

impl GroupKind {
    pub fn new(group: &str, kind: &str) -> Self {
        GroupKind {
            group: Cow::Owned(group.to_string()),
            kind: Cow::Owned(kind.to_string()),
        }
    }

    /// A group and kind the policy knows by name (the default `bootstrapConfigKinds`):
    /// nothing copied, since every evaluation starts from the default settings.
    pub const fn builtin(group: &'static str, kind: &'static str) -> Self {
        GroupKind {
            group: Cow::Borrowed(group),
            kind: Cow::Borrowed(kind),
        }
    }

    /// `KubeadmConfig.bootstrap.cluster.x-k8s.io`, as the API server names types in errors.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.kind.to_string()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }
}
