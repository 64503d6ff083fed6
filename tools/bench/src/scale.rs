//! How the cost grows: the size sweep (object size) and the fleet rows (MachinePools in the
//! namespace), and how far from linear the growth between two of their rows is.

use crate::measure::CaseResult;

/// Object sizes of the sweep.
pub fn sweep_sizes(quick: bool) -> Vec<usize> {
    let kib: &[usize] = if quick {
        &[1, 16, 256]
    } else {
        &[1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 3072]
    };
    kib.iter().map(|k| k * 1024).collect()
}

/// MachinePools in the namespace, for the fleet rows: a config UPDATE that needs
/// the pool list. The 1-pool row is the baseline the others' extra memory is counted from.
pub fn fleet_sizes(quick: bool) -> Vec<usize> {
    if quick {
        vec![1, 10, 1_000]
    } else {
        vec![1, 10, 100, 1_000, 10_000]
    }
}

/// The targets for a namespace of 1,000 MachinePools.
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

/// How the cost grows from a reference row to the largest, each counted above the first
/// row's: the cost added per unit added (KiB, pool) at the largest over that at the reference
/// (1.0 = linear), and the exponent k in added cost ~ added size^k between them (1.0 =
/// linear).
#[derive(Clone, Copy, Debug)]
pub struct Growth {
    pub ratio: f64,
    pub exponent: f64,
}

/// [`Growth`] over `points` (size, cost), from the first point of at least `reference`; `None`
/// without a larger point after it.
pub fn growth(points: &[(f64, f64)], reference: f64) -> Option<Growth> {
    let (x0, y0) = *points.first()?;
    let (xr, yr) = *points.iter().find(|p| p.0 >= reference)?;
    let (xl, yl) = *points.last()?;
    if xl <= xr {
        return None;
    }
    let per_unit = |x: f64, y: f64| (y - y0) / (x - x0);
    Some(Growth {
        ratio: per_unit(xl, yl) / per_unit(xr, yr),
        exponent: ((yl - y0) / (yr - y0)).ln() / ((xl - x0) / (xr - x0)).ln(),
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
    fn a_line_grows_linearly() {
        let points: Vec<(f64, f64)> = [1.0, 64.0, 256.0, 1024.0, 3072.0]
            .iter()
            .map(|&k| (k, 20_000.0 + 300.0 * k))
            .collect();
        let line = growth(&points, 64.0).unwrap();
        assert!((line.ratio - 1.0).abs() < 1e-9);
        assert!((line.exponent - 1.0).abs() < 1e-9);
        let square: Vec<(f64, f64)> = points.iter().map(|&(x, _)| (x, x * x)).collect();
        assert!((growth(&square, 64.0).unwrap().exponent - 2.0).abs() < 0.01);
        assert!(growth(&points[..2], 64.0).is_none());
    }
}
