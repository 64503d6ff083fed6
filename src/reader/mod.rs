//! The request reader: the payload's JSON read once, straight from its bytes, into borrowed
//! views as far as the rules read them.

pub mod json;
pub mod object;
pub mod request;
