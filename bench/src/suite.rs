//! The suite behind `make bench`: what is measured, in which order, into one [`Report`]
//! (the measurements are in the sibling modules); and `bench --profile`, one request run
//! untimed for a profiler.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, bail, Result};

use policy_host::engine::{EngineOptions, Policy};

use crate::inputs::{self, Apply, Input};
use crate::machine::machine;
use crate::measure::{lookups_of, measure_cases, native_validate, CaseResult, Module, Schedule};
use crate::probe::MemoryProbe;
use crate::report::Report;
use crate::scale::{fleet_sizes, sweep_sizes, FleetRow};
use crate::size::{compile_times, ModuleSizes};

#[derive(Clone, Debug)]
pub struct SuiteOptions {
    /// The shipped, annotated module.
    pub annotated: PathBuf,
    /// The module as cargo built it.
    pub policy: PathBuf,
    /// The module after wasm-opt, before annotation.
    pub optimized: PathBuf,
    pub workspace: PathBuf,
    /// The report; `None` prints it only.
    pub output: Option<PathBuf>,
    /// The command shown in the report.
    pub command: String,
    /// Short budgets: checks the suite runs, numbers are rough.
    pub quick: bool,
    /// Another annotated module measured with the shipped one (the four requests, the
    /// requests as kube-apiserver sends them, the fleet rows, its compile time): the "before"
    /// of a change, in the same run as the "after".
    pub baseline: Option<PathBuf>,
}

/// The four requests of the headline table, by key: a MachinePool rotation, the token
/// rotation CAPI writes every ~7.5 minutes, a typical edit, a 2 MB config.
pub fn main_inputs() -> Result<Vec<(&'static str, Input)>> {
    MAIN_KEYS
        .iter()
        .map(|&key| Ok((key, main_input(key)?)))
        .collect()
}

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
        // As kube-apiserver sends them: managedFields, kubectl's annotation (issue 16).
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

pub fn run_suite(options: &SuiteOptions) -> Result<Report> {
    let started = Instant::now();
    let load_at_start = std::fs::read_to_string("/proc/loadavg").ok();

    eprintln!("bench: module size, compile times");
    let sizes = ModuleSizes::of(&options.policy, &options.optimized, &options.annotated)?;
    let compile = compile_times(&options.annotated, options.quick)?;
    let compile_baseline = match &options.baseline {
        Some(baseline) => Some(compile_times(baseline, options.quick)?),
        None => None,
    };

    let mut modules = vec![Module::load("shipped", &options.annotated)?];
    if let Some(baseline) = &options.baseline {
        modules.push(Module::load("baseline", baseline)?);
    }
    let modules: Vec<&Module> = modules.iter().collect();
    eprintln!(
        "bench: the four requests, natively and in {} module(s), interleaved",
        modules.len()
    );
    let main = main_inputs()?;
    let (cases, cases_baseline) = shipped_and_baseline(measure_cases(
        &main,
        &modules,
        Schedule::main(options.quick),
    )?);

    eprintln!("bench: size sweep");
    let sweep_inputs = sweep_sizes(options.quick)
        .into_iter()
        .map(|size| Ok(("sweep", inputs::one_file_changed(size)?)))
        .collect::<Result<Vec<_>>>()?;
    let sweep =
        measure_cases(&sweep_inputs, &modules[..1], Schedule::sweep(options.quick))?.remove(0);

    eprintln!("bench: requests as kube-apiserver sends them");
    let apiserver_inputs = APISERVER_KEYS
        .iter()
        .map(|&key| Ok((key, main_input(key)?)))
        .collect::<Result<Vec<_>>>()?;
    let (apiserver, apiserver_baseline) = shipped_and_baseline(measure_cases(
        &apiserver_inputs,
        &modules,
        Schedule::sweep(options.quick),
    )?);

    eprintln!("bench: fleet scale");
    let sizes_fleet = fleet_sizes(options.quick);
    let fleet_inputs = sizes_fleet
        .iter()
        .map(|&pools| Ok(("fleet", inputs::fleet(pools)?)))
        .collect::<Result<Vec<_>>>()?;
    let (fleet_cases, fleet_cases_baseline) = shipped_and_baseline(measure_cases(
        &fleet_inputs,
        &modules,
        Schedule::sweep(options.quick),
    )?);
    let rows = |cases: Vec<CaseResult>| -> Vec<FleetRow> {
        sizes_fleet
            .iter()
            .zip(&fleet_inputs)
            .zip(cases)
            .map(|((&pools, (_, input)), case)| FleetRow {
                pools,
                list_bytes: input.pool_list.as_ref().map_or(0, |l| l.len()),
                case,
            })
            .collect()
    };
    let fleet = rows(fleet_cases);

    let mut machine = machine(&options.workspace);
    if let Some(load) = load_at_start {
        let fields: Vec<&str> = load.split_whitespace().take(3).collect();
        machine.push((
            "load average at start (1, 5, 15 min)".to_string(),
            fields.join(", "),
        ));
    }
    Ok(Report {
        machine,
        command: options.command.clone(),
        schedules: (
            Schedule::main(options.quick).describe(),
            Schedule::sweep(options.quick).describe(),
        ),
        cases,
        cases_baseline,
        sweep,
        fleet,
        fleet_baseline: fleet_cases_baseline,
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

/// Where [`profile`] runs the evaluations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProfileTarget {
    /// The rule engine, natively.
    Native,
    /// The module in the host: fresh instance + call, as policy-server.
    Wasm,
    /// The module on the memory probe's engine with wasmtime's perf map on, so callgrind's
    /// JIT addresses can be named (`bench/name-jit-frames.py`).
    PerfMap,
}

/// Runs one headline request `iterations` times without timing: the workload for
/// `valgrind --tool=callgrind`.
pub fn profile(module: &Path, key: &str, target: ProfileTarget, iterations: usize) -> Result<()> {
    // `sweep-KIB`: the sweep's input of that many KiB.
    let input = match key.strip_prefix("sweep-") {
        Some(kib) => inputs::one_file_changed(kib.parse::<usize>()? * 1024)?,
        None => main_input(key)?,
    };
    let payload = input.payload()?;
    let host = lookups_of(&input);
    if target == ProfileTarget::PerfMap {
        let probe = MemoryProbe::with_perf_map(&std::fs::read(module)?, true)?;
        for _ in 0..iterations {
            black_box(probe.measure_serving("validate", &payload, host.clone())?);
        }
    } else if target == ProfileTarget::Wasm {
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
        for _ in 0..iterations {
            black_box(native_validate(&payload, host.as_deref()));
        }
    }
    Ok(())
}
