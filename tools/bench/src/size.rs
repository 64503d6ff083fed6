//! The shipped module's size at each step of its build, and its compile times.

use std::hint::black_box;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result};

use crate::measure::load_policy;
use crate::stats::Samples;

/// The shipped module's bytes: cargo's output, after wasm-opt, annotated, and that gzipped.
#[derive(Clone, Debug)]
pub struct ModuleSizes {
    pub cargo: u64,
    pub optimized: u64,
    pub annotated: u64,
    /// `gzip -9` of the annotated module; `None` without gzip.
    pub annotated_gzip: Option<u64>,
}

impl ModuleSizes {
    pub fn of(cargo: &Path, optimized: &Path, annotated: &Path) -> Result<ModuleSizes> {
        let size = |path: &Path| {
            std::fs::metadata(path)
                .map(|m| m.len())
                .with_context(|| format!("{}", path.display()))
        };
        let gzip = Command::new("gzip")
            .args(["-9", "-c"])
            .arg(annotated)
            .output();
        Ok(ModuleSizes {
            cargo: size(cargo)?,
            optimized: size(optimized)?,
            annotated: size(annotated)?,
            annotated_gzip: gzip
                .ok()
                .filter(|out| out.status.success())
                .map(|out| out.stdout.len() as u64),
        })
    }
}

#[derive(Clone, Debug)]
pub struct CompileTimes {
    pub uncached: Samples,
    pub cached: Samples,
}

pub fn compile_times(module: &Path, quick: bool) -> Result<CompileTimes> {
    let rounds = if quick { 1 } else { 5 };
    let loads = |cache: bool| -> Result<Samples> {
        let mut times = Vec::new();
        for _ in 0..rounds {
            let t = Instant::now();
            black_box(load_policy(module, cache)?);
            times.push(t.elapsed());
        }
        Ok(Samples::from_durations(&times))
    };
    let uncached = loads(false)?;
    // One load fills the cache, then every load is a hit.
    load_policy(module, true)?;
    let cached = loads(true)?;
    Ok(CompileTimes { uncached, cached })
}
