//! What CAPI and its providers are, as the rules need to know it: the kinds ([`kinds`]), the
//! bootstrap `configRef` ([`config_ref`]), who owns a bootstrap object ([`owners`]), what CAPI's
//! own machinery writes into one ([`provider_writes`]), what conversion to the stored version does
//! to a field ([`conversion`]) and field paths in CAPI's notation
//! ([`paths`]). Facts, no verdicts.

pub mod config_ref;
pub mod conversion;
pub mod kinds;
pub mod owners;
pub mod paths;
pub mod provider_writes;
