//! Go's semantics, where the policy must compare as a provider's Go code reads a value:
//! `time.ParseDuration` ([`duration`]), `strconv`'s number parsing ([`number`]) and what
//! gopkg.in/yaml.v3 decodes a text into ([`yaml`]). Each is tested against the Go library's
//! documented behaviour and the cases the cluster test found; nothing else lives here.

pub(crate) mod duration;
pub(crate) mod number;
pub(crate) mod yaml;
