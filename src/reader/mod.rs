//! The request reader: the payload's JSON read once, straight from its bytes, into borrowed
//! views as far as the rules read them. [`json`] is the pull reader and its [`json::Node`];
//! [`request`] the AdmissionRequest; [`object`] the Kubernetes objects it carries (and the
//! lookups' answers hold); [`group_kind`] a type's identity.

pub mod group_kind;
pub mod json;
pub mod object;
pub mod request;
