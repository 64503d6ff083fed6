//! The request reader: the payload's JSON read once, straight from its bytes, into borrowed
//! views as far as the rules read them. [`json`] is the pull parser; [`node`] the values it
//! reads into ([`node::Node`] and its strings); [`bytes`] its scans eight bytes at a time;
//! [`request`] the AdmissionRequest; [`object`] the Kubernetes objects it carries (and the
//! lookups' answers hold); [`group_kind`] a type's identity.

pub mod bytes;
pub mod group_kind;
pub mod json;
pub mod node;
pub mod object;
pub mod request;
