//! The rule families.

pub mod contract;
pub mod controller_writes;
pub mod delete_and_move;
pub mod exemptions;
pub mod in_place_edit;
pub mod ownership;
pub mod rotation;
