//! What CAPI and its providers are, as the rules need to know it: the kinds ([`kinds`]), one
//! record per bootstrap provider ([`providers`]), the bootstrap `configRef` ([`config_ref`]),
//! who owns a bootstrap object ([`owners`]), what the providers' defaulters rewrite
//! ([`defaulters`]), the fields not compared as they are ([`field_rules`]), what conversion to
//! the stored version does to a field ([`conversion`]), field paths in CAPI's notation
//! ([`paths`]) and what each infrastructure MachinePool kind does with new bootstrap data
//! ([`infrastructure`]). Facts, no verdicts.

pub mod config_ref;
pub mod conversion;
pub mod defaulters;
pub mod field_rules;
pub mod infrastructure;
pub mod kinds;
pub mod owners;
pub mod paths;
pub mod providers;
