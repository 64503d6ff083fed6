//! How the cost grows: the size sweep (object size) and the fleet rows (MachinePools in the
//! namespace), and the lines fitted through them.

use crate::measure::CaseResult;
use crate::stats::{linear_fit, LinearFit};

/// Object sizes of the sweep.
pub fn sweep_sizes(quick: bool) -> Vec<usize> {
    let kib: &[usize] = if quick {
        &[1, 16, 256]
    } else {
        &[1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 3072]
    };
    kib.iter().map(|k| k * 1024).collect()
}

/// MachinePools in the namespace, for the fleet rows (issue 16): a config UPDATE that needs
/// the pool list. The 1-pool row is the baseline the others' extra memory is counted from.
pub fn fleet_sizes(quick: bool) -> Vec<usize> {
    if quick {
        vec![1, 10, 1_000]
    } else {
        vec![1, 10, 100, 1_000, 10_000]
    }
}

/// The targets of issue 16 for a namespace of 1,000 MachinePools.
pub const TARGET_FLEET_POOLS: usize = 1_000;
pub const TARGET_FLEET_NS: f64 = 2_000_000.0;
pub const TARGET_FLEET_EXTRA_BYTES: u64 = 4 * 1024 * 1024;

/// One fleet row: the pools listed, the size of the host's answer, the measurements.
#[derive(Clone, Debug)]
pub struct FleetRow {
    pub pools: usize,
    pub list_bytes: usize,
    pub case: CaseResult,
}

/// Linearity of the sweep: a least-squares line over every point, and the log-log exponent
/// over the large objects (1.0 = linear).
#[derive(Clone, Debug)]
pub struct Linearity {
    pub fit: LinearFit,
    /// Fitted exponent k in (cost - cost of the smallest) ~ (size - smallest)^k over the
    /// objects of 64 KiB and more.
    pub exponent: f64,
    /// Marginal cost per KiB (above the smallest object) at 64 KiB and at the largest.
    pub per_kib_64: f64,
    pub per_kib_largest: f64,
}

pub fn linearity(points: &[(usize, f64)]) -> Option<Linearity> {
    let xy: Vec<(f64, f64)> = points
        .iter()
        .map(|&(bytes, ns)| (bytes as f64 / 1024.0, ns))
        .collect();
    let fit = linear_fit(&xy)?;
    let (x0, y0) = *xy.first()?;
    // The cost added above the smallest object against the size added: the fixed cost
    // (instantiation, envelope) would otherwise bend the exponent below 1.
    let large: Vec<(f64, f64)> = xy
        .iter()
        .filter(|p| p.0 >= 64.0 && p.1 > y0)
        .map(|p| ((p.0 - x0).ln(), (p.1 - y0).ln()))
        .collect();
    let exponent = linear_fit(&large).map_or(f64::NAN, |f| f.slope);
    let marginal = |x: f64, y: f64| (y - y0) / (x - x0);
    let at_64 = xy.iter().find(|p| p.0 >= 64.0).copied()?;
    let largest = *xy.last()?;
    Some(Linearity {
        fit,
        exponent,
        per_kib_64: marginal(at_64.0, at_64.1),
        per_kib_largest: marginal(largest.0, largest.1),
    })
}

/// The fleet rows against the number of pools: least-squares lines of the guest call's time
/// and of the peak memory, the exponent of the time added above the 1-pool row over the rows
/// of 100 pools and more (1.0 = linear), and the time added per pool at the largest row over
/// that at 1,000 pools (1.0 = linear; the 100-pool row adds little more than noise).
#[derive(Clone, Debug)]
pub struct FleetFit {
    pub call: LinearFit,
    pub exponent: f64,
    pub per_pool_ratio: f64,
    pub memory: LinearFit,
}

pub fn fleet_fit(rows: &[FleetRow]) -> Option<FleetFit> {
    let call: Vec<(f64, f64)> = rows
        .iter()
        .map(|r| (r.pools as f64, r.case.wasm.call.p50()))
        .collect();
    let memory: Vec<(f64, f64)> = rows
        .iter()
        .map(|r| (r.pools as f64, r.case.memory.after_call_bytes as f64))
        .collect();
    let (x0, y0) = *call.first()?;
    let large: Vec<(f64, f64)> = call
        .iter()
        .filter(|p| p.0 >= 100.0 && p.1 > y0)
        .map(|p| ((p.0 - x0).ln(), (p.1 - y0).ln()))
        .collect();
    let per_pool = |p: &(f64, f64)| (p.1 - y0) / (p.0 - x0);
    let per_pool_ratio = match (
        call.iter().find(|p| p.0 >= TARGET_FLEET_POOLS as f64),
        call.last(),
    ) {
        (Some(at), Some(last)) if last.0 > at.0 => per_pool(last) / per_pool(at),
        _ => f64::NAN,
    };
    Some(FleetFit {
        call: linear_fit(&call)?,
        exponent: linear_fit(&large).map_or(f64::NAN, |f| f.slope),
        per_pool_ratio,
        memory: linear_fit(&memory)?,
    })
}

/// Peak guest memory of a fleet row above the smallest row's.
pub fn extra_memory(rows: &[FleetRow], row: &FleetRow) -> u64 {
    let base = rows.first().map_or(0, |r| r.case.memory.after_call_bytes);
    row.case.memory.after_call_bytes.saturating_sub(base)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linearity_of_a_line_is_one() {
        let points: Vec<(usize, f64)> = [1usize, 64, 256, 1024, 3072]
            .iter()
            .map(|&k| (k * 1024, 20_000.0 + 300.0 * k as f64))
            .collect();
        let lin = linearity(&points).unwrap();
        assert!((lin.fit.slope - 300.0).abs() < 1e-6);
        assert!((lin.per_kib_largest / lin.per_kib_64 - 1.0).abs() < 1e-9);
        assert!((lin.exponent - 1.0).abs() < 1e-9);
    }
}
