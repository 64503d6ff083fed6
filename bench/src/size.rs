//! The module's size before and after binaryen's wasm-opt (and wasm-strip), what the
//! optimized variants do on the scenarios, and the module's compile times.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use policy_host::annotate::{annotate, AnnotateOptions};
use policy_host::engine::EngineOptions;
use scenario_model::runner::{run_all, Evaluator, ScenarioResult};

use crate::measure::load_policy;
use crate::stats::Samples;
use crate::suite::SuiteOptions;

/// Features rustc's wasm32-wasip1 output uses; binaryen 108 (Debian) does not read them from
/// the module (the release profile strips the `target_features` section).
pub const WASM_OPT_FEATURES: &[&str] = &[
    "--enable-bulk-memory",
    "--enable-sign-ext",
    "--enable-mutable-globals",
    "--enable-nontrapping-float-to-int",
    "--enable-multivalue",
    "--enable-reference-types",
];

/// A module file and what was done to get it.
#[derive(Clone, Debug)]
pub struct Variant {
    pub name: String,
    pub command: String,
    pub path: PathBuf,
    pub bytes: u64,
    pub gzip_bytes: Option<u64>,
    pub custom_sections: Vec<(String, usize)>,
}

/// What an optimized (then annotated) module does: scenarios, compile time, speed (measured
/// interleaved with the shipped module).
#[derive(Clone, Debug)]
pub struct VariantRun {
    pub name: String,
    pub annotated_bytes: u64,
    pub annotated: PathBuf,
    pub scenarios_passed: usize,
    pub scenarios_total: usize,
    /// Scenarios whose verdict and message equal the shipped module's.
    pub scenarios_same_as_shipped: usize,
    pub compile: Samples,
    /// (case name, wasm total p50, call p50, peak memory)
    pub cases: Vec<(String, f64, f64, u64)>,
}

/// The module files and what the optimized ones do.
#[derive(Clone, Debug)]
pub struct Variants {
    pub files: Vec<Variant>,
    pub runs: Vec<VariantRun>,
    /// Scenarios passed by the shipped module, of all.
    pub shipped_scenarios: (usize, usize),
}

#[derive(Clone, Debug)]
pub struct CompileTimes {
    pub uncached: Samples,
    pub cached: Samples,
}

pub fn compile_times(module: &Path, quick: bool) -> Result<CompileTimes> {
    let rounds = if quick { 1 } else { 5 };
    let mut uncached = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        black_box(load_policy(module, false)?);
        uncached.push(t.elapsed());
    }
    // One load fills the cache, then every load is a hit.
    load_policy(module, true)?;
    let mut cached = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        black_box(load_policy(module, true)?);
        cached.push(t.elapsed());
    }
    Ok(CompileTimes {
        uncached: Samples::from_durations(&uncached),
        cached: Samples::from_durations(&cached),
    })
}

pub fn tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

fn run_tool(program: &Path, args: &[&str]) -> Result<()> {
    let output = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("cannot run {}", program.display()))?;
    if !output.status.success() {
        bail!(
            "{} {} failed: {}",
            program.display(),
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
                .lines()
                .take(5)
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    Ok(())
}

fn gzip_size(path: &Path) -> Option<u64> {
    let gzip = tool("gzip")?;
    let output = Command::new(gzip)
        .arg("-9")
        .arg("-c")
        .arg(path)
        .output()
        .ok()?;
    output
        .status
        .success()
        .then_some(output.stdout.len() as u64)
}

fn custom_sections(bytes: &[u8]) -> Vec<(String, usize)> {
    let mut sections = Vec::new();
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        if let Ok(wasmparser::Payload::CustomSection(reader)) = payload {
            sections.push((reader.name().to_string(), reader.data().len()));
        }
    }
    sections
}

fn variant(name: &str, command: String, path: PathBuf) -> Result<Variant> {
    let bytes = std::fs::read(&path).with_context(|| format!("{}", path.display()))?;
    Ok(Variant {
        name: name.to_string(),
        command,
        gzip_bytes: gzip_size(&path),
        custom_sections: custom_sections(&bytes),
        bytes: bytes.len() as u64,
        path,
    })
}

pub fn display(path: &Path, workspace: &Path) -> String {
    path.strip_prefix(workspace)
        .unwrap_or(path)
        .display()
        .to_string()
}

pub fn module_variants(options: &SuiteOptions, notes: &mut Vec<String>) -> Result<Variants> {
    let ws = &options.workspace;
    let policy = &options.policy;
    let mut variants = vec![variant(
        "cargo build (release profile: opt-level 2, LTO, 1 CGU, strip, panic abort)",
        format!("make target/policy.cargo.wasm -> {}", display(policy, ws)),
        policy.clone(),
    )?];
    let out = |file: &str| options.work_dir.join(file);
    let policy_arg = policy.to_string_lossy().into_owned();

    match tool("wasm-strip") {
        Some(strip) => {
            let path = out("policy.wasm-strip.wasm");
            let path_arg = path.to_string_lossy().into_owned();
            run_tool(&strip, &[&policy_arg, "-o", &path_arg])?;
            variants.push(variant(
                "wasm-strip (wabt)",
                format!(
                    "wasm-strip {} -o {}",
                    display(policy, ws),
                    display(&path, ws)
                ),
                path,
            )?);
        }
        None => notes.push("wasm-strip (wabt) not found: its row is missing".to_string()),
    }

    // (name, file slug, module): run against the shipped module below. The cargo output shows
    // what the Makefile's wasm-opt step buys.
    let mut optimized = vec![(
        "cargo output, no wasm-opt".to_string(),
        "cargo".to_string(),
        policy.clone(),
    )];
    match tool("wasm-opt") {
        Some(opt) => {
            let features = WASM_OPT_FEATURES.join(" ");
            for (label, flag, file) in [
                (
                    "wasm-opt --strip-debug (re-encode only)",
                    "--strip-debug",
                    "policy.strip-debug.wasm",
                ),
                ("wasm-opt -Oz", "-Oz", "policy.Oz.wasm"),
                ("wasm-opt -O3", "-O3", "policy.O3.wasm"),
            ] {
                let path = out(file);
                let path_arg = path.to_string_lossy().into_owned();
                let mut args: Vec<&str> = WASM_OPT_FEATURES.to_vec();
                args.extend([flag, policy_arg.as_str(), "-o", path_arg.as_str()]);
                run_tool(&opt, &args)?;
                variants.push(variant(
                    label,
                    format!(
                        "wasm-opt {features} {flag} {} -o {}",
                        display(policy, ws),
                        display(&path, ws)
                    ),
                    path.clone(),
                )?);
                if flag != "--strip-debug" {
                    let level = flag.trim_start_matches('-');
                    optimized.push((format!("wasm-opt -{level}"), level.to_string(), path));
                }
            }
        }
        None => notes.push(
            "wasm-opt (binaryen) not found: no optimized variants (apt-get install binaryen)"
                .to_string(),
        ),
    }
    variants.push(variant(
        "annotated (shipped): wasm-opt -O3, + metadata and README",
        format!(
            "make policy.wasm && policy-host annotate -m metadata.yml -u README.md -o {} policy.wasm",
            display(&options.annotated, ws)
        ),
        options.annotated.clone(),
    )?);

    let mut runs = Vec::new();
    let jobs = std::thread::available_parallelism().map_or(1, |n| n.get());
    let outcome = |r: &ScenarioResult| (r.name.clone(), r.verdict.label(), r.summary.clone());
    eprintln!("bench: scenarios on the shipped module");
    let results = run_all(
        &Evaluator::policy_host(&options.host),
        &options.scenarios,
        &options.annotated,
        jobs,
    )?;
    let shipped_counts = (results.iter().filter(|r| r.passed()).count(), results.len());
    let shipped: Vec<_> = results.iter().map(outcome).collect();
    for (name, slug, path) in optimized {
        eprintln!("bench: {name}: annotate, scenarios, compile time");
        let annotated = out(&format!("annotated-policy.{slug}.wasm"));
        annotate(&AnnotateOptions {
            module: path,
            metadata_path: options.metadata.clone(),
            usage_path: Some(options.usage.clone()),
            output: annotated.clone(),
            engine: EngineOptions::default(),
        })?;
        let results = run_all(
            &Evaluator::policy_host(&options.host),
            &options.scenarios,
            &annotated,
            jobs,
        )?;
        let same = results
            .iter()
            .map(outcome)
            .filter(|o| shipped.contains(o))
            .count();
        let compile = compile_times(&annotated, options.quick)?.uncached;
        runs.push(VariantRun {
            name,
            annotated_bytes: std::fs::metadata(&annotated)?.len(),
            annotated,
            scenarios_passed: results.iter().filter(|r| r.passed()).count(),
            scenarios_total: results.len(),
            scenarios_same_as_shipped: same,
            compile,
            cases: Vec::new(),
        });
    }
    if let Some(baseline) = &options.baseline {
        eprintln!(
            "bench: baseline {}: scenarios, compile time",
            baseline.display()
        );
        let results = run_all(
            &Evaluator::policy_host(&options.host),
            &options.scenarios,
            baseline,
            jobs,
        )?;
        let same = results
            .iter()
            .map(outcome)
            .filter(|o| shipped.contains(o))
            .count();
        runs.push(VariantRun {
            name: format!("baseline `{}`", display(baseline, ws)),
            annotated_bytes: std::fs::metadata(baseline)?.len(),
            annotated: baseline.clone(),
            scenarios_passed: results.iter().filter(|r| r.passed()).count(),
            scenarios_total: results.len(),
            scenarios_same_as_shipped: same,
            compile: compile_times(baseline, options.quick)?.uncached,
            cases: Vec::new(),
        });
    }
    Ok(Variants {
        files: variants,
        runs,
        shipped_scenarios: shipped_counts,
    })
}
