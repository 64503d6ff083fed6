//! The suite behind `make bench`: what is measured, in which order, into one [`Report`]
//! (the measurements are in the sibling modules); and `bench --profile`, one request run
//! untimed for a profiler.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, bail, Result};
use clap::Parser;

use policy_host::engine::{EngineOptions, Policy};

use crate::inputs::{self, Apply, Input};
use crate::machine::machine;
use crate::measure::{lookups_of, measure_cases, native_validate, CaseResult, Module, Schedule};
use crate::probe::MemoryProbe;
use crate::report::Report;
use crate::scale::{fleet_sizes, sweep_sizes, FleetRow};
use crate::size::{compile_times, ModuleSizes};

/// `bench`'s command line.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "bench",
    about = "Benchmark the policy natively and in policy-host; write docs/performance.md"
)]
pub struct Options {
    /// The annotated module (what ships).
    #[arg(long, value_name = "WASM", default_value = "annotated-policy.wasm")]
    pub module: PathBuf,
    /// The module as cargo built it.
    #[arg(long, value_name = "WASM", default_value = "target/policy.cargo.wasm")]
    pub policy: PathBuf,
    /// The module after wasm-opt, before annotation.
    #[arg(long, value_name = "WASM", default_value = "policy.wasm")]
    pub optimized: PathBuf,
    /// The report file (its text outside the generated block is kept); `-` prints only.
    #[arg(long, value_name = "PATH", default_value = "docs/performance.md")]
    pub output: String,
    /// The command shown in the report.
    #[arg(long, default_value = "make bench")]
    pub command: String,
    /// Short budgets: checks that everything runs; the numbers are rough.
    #[arg(long)]
    pub quick: bool,
    /// Instead of the suite, run one request (rotation, token, edit, large, sweep-KIB for
    /// the sweep's input of that size, or fleet-POOLS for the fleet row of that many
    /// MachinePools) --iterations
    /// times untimed, for a profiler: `native`, `wasm` (fresh instance + call in the host) or
    /// `perf-map` (the module with wasmtime's /tmp/perf-PID.map, to name JIT frames).
    #[arg(long, value_names = ["TARGET", "REQUEST"], num_args = 2)]
    pub profile: Option<Vec<String>>,
    #[arg(long, default_value_t = 1000)]
    pub iterations: usize,
    /// Another annotated module (the "before" of a change) measured in the same run as the
    /// shipped one: the four requests, as kube-apiserver sends them, the fleet rows, its
    /// compile time.
    #[arg(long, value_name = "WASM")]
    pub baseline: Option<PathBuf>,
}

/// The requests of `keys`, by key.
fn keyed(keys: &[&'static str]) -> Result<Vec<(&'static str, Input)>> {
    keys.iter()
        .map(|&key| Ok((key, main_input(key)?)))
        .collect()
}

/// The four requests of the headline table, by key: a MachinePool rotation, the token
/// rotation CAPI writes every ~7.5 minutes, a typical edit, a 2 MB config.
pub const MAIN_KEYS: [&str; 4] = ["rotation", "token", "edit", "large"];

pub fn main_input(key: &str) -> Result<Input> {
    if let Some(pools) = key.strip_prefix("fleet-") {
        return inputs::fleet(pools.parse()?);
    }
    match key {
        "rotation" => Ok(inputs::machine_pool_rotation()),
        "token" => inputs::token_rotation(10 * 1024),
        "edit" => inputs::config_edit(10 * 1024),
        "large" => inputs::many_files_one_changed(200),
        // As kube-apiserver sends them: managedFields, kubectl's annotation.
        "token-mf" => inputs::as_sent(main_input("token")?, Apply::ClientSide),
        "edit-mf" => inputs::as_sent(main_input("edit")?, Apply::ClientSide),
        "large-mf" => inputs::as_sent(main_input("large")?, Apply::ServerSide),
        _ => bail!(
            "no request {key:?}: {}, {}, or fleet-POOLS",
            MAIN_KEYS.join(", "),
            APISERVER_KEYS.join(", ")
        ),
    }
}

/// The headline requests without and with what kube-apiserver adds to them (managedFields,
/// kubectl's last-applied annotation), in pairs: what reading past them costs.
pub const APISERVER_KEYS: [&str; 6] = ["token", "token-mf", "edit", "edit-mf", "large", "large-mf"];

pub fn run_suite(options: &Options) -> Result<Report> {
    let started = Instant::now();
    let machine = machine(&std::env::current_dir()?);
    let quick = options.quick;

    eprintln!("bench: module size, compile times");
    let sizes = ModuleSizes::of(&options.policy, &options.optimized, &options.module)?;
    let compile = compile_times(&options.module, quick)?;
    let baseline = options.baseline.as_ref();
    let compile_baseline = baseline.map(|b| compile_times(b, quick)).transpose()?;

    let mut modules = vec![Module::load("shipped", &options.module)?];
    if let Some(baseline) = baseline {
        modules.push(Module::load("baseline", baseline)?);
    }
    let modules: Vec<&Module> = modules.iter().collect();
    let count = modules.len();
    eprintln!("bench: the four requests, natively and in {count} module(s), interleaved");
    let main = measure_cases(&keyed(&MAIN_KEYS)?, &modules, Schedule::main(quick))?;
    let (cases, cases_baseline) = shipped_and_baseline(main);

    eprintln!("bench: size sweep");
    let sweep_inputs = sweep_sizes(quick)
        .into_iter()
        .map(|size| Ok(("sweep", inputs::one_file_changed(size)?)))
        .collect::<Result<Vec<_>>>()?;
    let sweep = measure_cases(&sweep_inputs, &modules[..1], Schedule::sweep(quick))?.remove(0);

    eprintln!("bench: requests as kube-apiserver sends them");
    let apiserver = measure_cases(&keyed(&APISERVER_KEYS)?, &modules, Schedule::sweep(quick))?;
    let (apiserver, apiserver_baseline) = shipped_and_baseline(apiserver);

    eprintln!("bench: fleet scale");
    let pools = fleet_sizes(quick);
    let fleet_inputs = pools
        .iter()
        .map(|&pools| Ok(("fleet", inputs::fleet(pools)?)))
        .collect::<Result<Vec<_>>>()?;
    let fleet = measure_cases(&fleet_inputs, &modules, Schedule::sweep(quick))?;
    let (fleet, fleet_baseline) = shipped_and_baseline(fleet);
    let fleet = (pools.iter().zip(&fleet_inputs).zip(fleet))
        .map(|((&pools, (_, input)), case)| FleetRow {
            pools,
            list_bytes: input.pool_list.as_ref().map_or(0, |l| l.len()),
            case,
        })
        .collect();

    eprintln!(
        "bench: capi-rollout-check drift, {} pools and {} MachineDeployments, once",
        crate::drift::DRIFT_POOLS,
        crate::drift::DRIFT_DEPLOYMENTS
    );
    let drift = Some(crate::drift::measure(
        crate::drift::DRIFT_POOLS,
        crate::drift::DRIFT_DEPLOYMENTS,
    ));

    Ok(Report {
        machine,
        drift,
        command: options.command.clone(),
        schedules: (
            Schedule::main(quick).describe(),
            Schedule::sweep(quick).describe(),
        ),
        cases,
        cases_baseline,
        sweep,
        fleet,
        fleet_baseline,
        apiserver,
        apiserver_baseline,
        compile,
        compile_baseline,
        sizes,
        elapsed: started.elapsed(),
    })
}

/// The shipped module's results and the baseline's, when there is one.
fn shipped_and_baseline(
    mut per_module: Vec<Vec<CaseResult>>,
) -> (Vec<CaseResult>, Option<Vec<CaseResult>>) {
    let shipped = per_module.remove(0);
    (shipped, per_module.pop())
}

/// Runs one headline request `iterations` times without timing: the workload for
/// `valgrind --tool=callgrind`. `target`: `native` (the rule engine), `wasm` (the module in
/// the host: fresh instance + call, as policy-server) or `perf-map` (the module on the memory
/// probe's engine with wasmtime's perf map on, so callgrind's JIT addresses can be named:
/// `tools/bench/name-jit-frames.py`).
pub fn profile(module: &Path, key: &str, target: &str, iterations: usize) -> Result<()> {
    // `sweep-KIB`: the sweep's input of that many KiB.
    let input = match key.strip_prefix("sweep-") {
        Some(kib) => inputs::one_file_changed(kib.parse::<usize>()? * 1024)?,
        None => main_input(key)?,
    };
    let payload = input.payload()?;
    let host = lookups_of(&input);
    if target == "native" {
        for _ in 0..iterations {
            black_box(native_validate(&payload, host.as_deref()));
        }
    } else if target == "perf-map" {
        let probe = MemoryProbe::with_perf_map(&std::fs::read(module)?, true)?;
        for _ in 0..iterations {
            black_box(probe.measure(&payload, host.clone())?);
        }
    } else if target == "wasm" {
        // No deadline: under a profiler the guest runs 50 times slower, and policy-server's 2 s
        // would cut the large request short (the count would then measure the timeout).
        let options = EngineOptions {
            timeout: None,
            cache: true,
        };
        let policy = Policy::from_file(module, &options, input.host_callback())?;
        for iteration in 0..iterations {
            let instance = policy
                .instantiate()
                .map_err(|e| anyhow!("cannot instantiate: {e}"))?;
            let answer = instance
                .call("validate", &payload)
                .map_err(|e| anyhow!("validate failed: {e}"))?;
            // A profile of the wrong work is worse than none: the first answer must be the
            // rules' answer natively (one comparison per run, the same in every count).
            if iteration == 0 && answer != native_validate(&payload, host.as_deref()) {
                bail!("{key}: the module's answer differs from the native engine's");
            }
            black_box(answer);
        }
    } else {
        bail!("--profile {target}: native, wasm or perf-map");
    }
    Ok(())
}
