//! The kinds judged.

pub mod bootstrap_template;
