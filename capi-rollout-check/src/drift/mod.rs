//! `capi-rollout-check drift`: the MachinePools, MachineDeployments and MachineSets whose
//! instances run older bootstrap data than their config or template says, found from what the
//! management cluster records (docs/drift.md). Read-only, but for `--apply`'s OpenReports.

pub mod analysis;
pub mod kube;
pub mod records;
pub mod render;
pub mod reports;
pub mod time;

#[cfg(test)]
mod tests;

/// Exit codes.
pub const EXIT_STALE: u8 = 1;
pub const EXIT_ERROR: u8 = 2;
