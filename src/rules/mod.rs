//! The rule families, numbered as docs/rules.md and the README number them: each file holds what
//! its rule finds and how it words it. When a rule is asked is the judged kind's decision
//! ([`crate::webhooks`]).
//!
//! | rule | file |
//! |---|---|
//! | 1 rotation | [`rotation`] |
//! | 2 in-place edits | [`in_place_edit`] |
//! | 3 CAPI's own machinery | [`controller_writes`] |
//! | 4 ownership laundering | [`ownership`] |
//! | 5 contract fields | [`contract`] |
//! | 6 exemptions | [`exemptions`] |
//! | 7 DELETE, re-CREATE, clusterctl move | [`delete_and_move`] |
//! | 8 bootstrap templates | [`template_edit`] |

pub mod contract;
pub mod controller_writes;
pub mod delete_and_move;
pub mod exemptions;
pub mod in_place_edit;
pub mod ownership;
pub mod rotation;
pub mod template_edit;
