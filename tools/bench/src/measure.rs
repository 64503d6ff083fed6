//! Requests timed natively (the floor) and in the annotated module the way policy-server runs
//! it (a fresh instance from the pre-instantiated module for every evaluation), interleaved in
//! rounds, with the guest's memory per evaluation.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context, Result};
use serde_json::{json, Map, Value};

use capi_bootstrap_rollout_policy::engine::validate_payload_with;
use capi_bootstrap_rollout_policy::host_lookups::HostLookups;
use capi_bootstrap_rollout_policy::lookups::NoLookups;
use policy_host::admission::{from_validation_response, ValidateRequest, ValidationResponse};
use policy_host::callbacks::HostContext;
use policy_host::engine::{EngineOptions, HostCallback, Policy};
use policy_host::run;

use crate::inputs::Input;
use crate::probe::{MemoryProbe, MemoryUse};
use crate::stats::Samples;

/// How a set of cases is measured: in rounds, every case getting a slice of each round, so
/// that a change of load on the machine spreads over all the cases (and over native and wasm
/// alike) instead of falling on one of them.
#[derive(Clone, Copy, Debug)]
pub struct Schedule {
    warm_up: Duration,
    rounds: usize,
    slice: Duration,
    /// Evaluations per slice at least, however slow.
    min_per_slice: usize,
}

impl Schedule {
    const QUICK: Schedule = Schedule::new(10, 2, 10, 1);

    const fn new(warm_up_ms: u64, rounds: usize, slice_ms: u64, min_per_slice: usize) -> Self {
        Schedule {
            warm_up: Duration::from_millis(warm_up_ms),
            rounds,
            slice: Duration::from_millis(slice_ms),
            min_per_slice,
        }
    }

    /// The headline requests'.
    pub fn main(quick: bool) -> Schedule {
        if quick {
            Schedule::QUICK
        } else {
            Schedule::new(100, 20, 60, 3)
        }
    }

    /// The sweep's, and the other tables'.
    pub fn sweep(quick: bool) -> Schedule {
        if quick {
            Schedule::QUICK
        } else {
            Schedule::new(50, 15, 30, 1)
        }
    }

    pub fn describe(&self) -> String {
        format!(
            "{} rounds; in each, every case runs for {} ms and at least {} times",
            self.rounds,
            self.slice.as_millis(),
            self.min_per_slice
        )
    }
}

/// The guest's work, natively: parse the payload, judge, serialize the answer (what the
/// module's `validate` does between receiving the payload and returning the response). `host`
/// answers the lookups, as the host answers the guest's host calls.
pub fn native_validate(payload: &[u8], host: Option<&HostCallback>) -> Vec<u8> {
    let verdict = match host {
        Some(host) => validate_payload_with(payload, &HostLookups(host)),
        None => validate_payload_with(payload, &NoLookups),
    };
    serde_json::to_vec(&verdict.into_response()).expect("a response serializes")
}

/// The host callback of an input that looks something up.
pub fn lookups_of(input: &Input) -> Option<Arc<HostCallback>> {
    input.pool_list.as_ref().map(|_| input.host_callback())
}

/// Per-evaluation timings of the module in the host.
#[derive(Clone, Debug)]
pub struct WasmTimings {
    /// A new instance: store, memory, WASI context, `wapc_init`.
    pub instantiate: Samples,
    /// The `validate` guest call.
    pub call: Samples,
    /// instantiate + call + dropping the instance: policy-server's per-request cost.
    pub total: Samples,
    /// Host side: building the payload, reading the answer into an AdmissionResponse.
    pub host_json: Samples,
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// One thing measured on one input (the native engine, or a module in the host with a fresh
/// instance per evaluation): an evaluation gives one or more timings, each kept in a column.
struct Meter<'a> {
    evaluate: Box<dyn FnMut() -> Result<Vec<u64>> + 'a>,
    columns: Vec<Vec<u64>>,
}

impl<'a> Meter<'a> {
    fn native(input: &Input) -> Result<Meter<'a>> {
        let (payload, host) = (input.payload()?, lookups_of(input));
        Ok(Meter::new(move || {
            let t = Instant::now();
            black_box(native_validate(&payload, host.as_deref()));
            Ok(vec![ns(t.elapsed())])
        }))
    }

    /// Columns: instantiate, call, total, host JSON.
    fn wasm(policy: &'a Policy, input: &Input) -> Result<Meter<'a>> {
        let (request, settings) = (input.validate_request()?, input.settings.clone());
        let object = input.request.get("object").cloned();
        Ok(Meter::new(move || {
            evaluate_in_host(policy, &request, &settings, object.as_ref()).map(Vec::from)
        }))
    }

    fn new(evaluate: impl FnMut() -> Result<Vec<u64>> + 'a) -> Meter<'a> {
        Meter {
            evaluate: Box::new(evaluate),
            columns: Vec::new(),
        }
    }

    /// Evaluates for `slice` and at least `min` times; keeps the timings if `keep`.
    fn run(&mut self, slice: Duration, min: usize, keep: bool) -> Result<()> {
        let start = Instant::now();
        let mut done = 0;
        while done < min || start.elapsed() < slice {
            let timings = (self.evaluate)()?;
            if keep {
                self.columns.resize(timings.len(), Vec::new());
                for (column, value) in self.columns.iter_mut().zip(timings) {
                    column.push(value);
                }
            }
            done += 1;
        }
        Ok(())
    }

    fn samples(self) -> impl Iterator<Item = Samples> {
        self.columns.into_iter().map(Samples::new)
    }
}

/// One evaluation as policy-server does it: [instantiate, call, total, host JSON] in ns.
fn evaluate_in_host(
    policy: &Policy,
    request: &ValidateRequest,
    settings: &Map<String, Value>,
    object: Option<&Value>,
) -> Result<[u64; 4]> {
    let t0 = Instant::now();
    let payload = json!({ "request": request, "settings": settings }).to_string();
    let t1 = Instant::now();
    let instance = policy
        .instantiate()
        .map_err(|e| anyhow!("cannot instantiate: {e}"))?;
    let t2 = Instant::now();
    let answer = instance
        .call("validate", payload.as_bytes())
        .map_err(|e| anyhow!("validate failed: {e}"))?;
    let t3 = Instant::now();
    drop(instance);
    let t4 = Instant::now();
    let response: ValidationResponse = serde_json::from_slice(&answer)?;
    let response =
        from_validation_response(request.uid(), object, &response).map_err(|e| anyhow!("{e}"))?;
    black_box(response);
    let t5 = Instant::now();
    Ok([
        ns(t2 - t1),
        ns(t3 - t2),
        ns(t4 - t1),
        ns((t1 - t0) + (t5 - t4)),
    ])
}

/// Warms every meter up, then runs the rounds, starting each round one meter further on.
fn run_schedule(meters: &mut [Meter<'_>], schedule: Schedule) -> Result<()> {
    for meter in meters.iter_mut() {
        meter.run(schedule.warm_up, 1, false)?;
    }
    let count = meters.len();
    for round in 0..schedule.rounds {
        for i in 0..count {
            meters[(round + i) % count].run(schedule.slice, schedule.min_per_slice, true)?;
        }
    }
    Ok(())
}

pub fn load_policy(module: &Path, cache: bool) -> Result<Policy> {
    let options = EngineOptions {
        cache,
        ..EngineOptions::default()
    };
    Policy::from_file(module, &options, HostContext::offline().into_callback())
}

/// Checks the module and the native engine give the input's expected verdict, the same line.
fn check_verdicts(policy: &Policy, input: &Input) -> Result<()> {
    let request = input.validate_request()?;
    let wasm = run::validate(policy, &request, &input.settings);
    let native = native_validate(&input.payload()?, lookups_of(input).as_deref());
    let native = serde_json::from_slice::<ValidationResponse>(&native)?;
    let native = from_validation_response(request.uid(), input.request.get("object"), &native)
        .map_err(|e| anyhow!("{e}"))?;
    let (name, line) = (&input.name, wasm.to_line());
    ensure!(
        line == native.to_line(),
        "{name}: the module and the native engine disagree:\n  wasm   {line}\n  native {}",
        native.to_line()
    );
    ensure!(
        wasm.allowed == input.allowed,
        "{name}: expected allowed={}, got {line}",
        input.allowed
    );
    Ok(())
}

/// The guest's memory on `input`, checked against the native answer.
fn memory_of(probe: &MemoryProbe, input: &Input) -> Result<MemoryUse> {
    let payload = input.payload()?;
    let memory = probe.measure(&payload, lookups_of(input))?;
    if memory.response != native_validate(&payload, lookups_of(input).as_deref()) {
        bail!(
            "{}: the memory probe's answer differs from the native engine's",
            input.name
        );
    }
    Ok(memory)
}

/// One request measured natively and in the host.
#[derive(Clone, Debug)]
pub struct CaseResult {
    /// `rotation`, `token`, `edit`, `large` for the headline requests, `sweep` otherwise.
    pub key: &'static str,
    pub name: String,
    pub object_bytes: usize,
    pub payload_bytes: usize,
    pub allowed: bool,
    pub native: Samples,
    pub wasm: WasmTimings,
    pub memory: MemoryUse,
}

impl CaseResult {
    pub fn call_ratio(&self) -> f64 {
        self.wasm.call.p50() / self.native.p50()
    }

    pub fn total_ratio(&self) -> f64 {
        self.wasm.total.p50() / self.native.p50()
    }
}

/// A module measured on the inputs.
pub struct Module {
    name: String,
    path: PathBuf,
    policy: Policy,
    probe: MemoryProbe,
}

impl Module {
    pub fn load(name: &str, path: &Path) -> Result<Module> {
        Ok(Module {
            name: name.to_string(),
            path: path.to_path_buf(),
            policy: load_policy(path, true)?,
            probe: MemoryProbe::new(&std::fs::read(path)?)?,
        })
    }
}

/// Measures every input natively and in every module, interleaved; one list of results per
/// module, in input order.
pub fn measure_cases(
    inputs: &[(&'static str, Input)],
    modules: &[&Module],
    schedule: Schedule,
) -> Result<Vec<Vec<CaseResult>>> {
    // An input that looks something up gets the module loaded with a host that answers it
    // (per module, per input, in that order).
    let mut serving = Vec::new();
    for module in modules {
        for (_, input) in inputs {
            let options = EngineOptions::default();
            let own = input
                .pool_list
                .as_ref()
                .map(|_| Policy::from_file(&module.path, &options, input.host_callback()));
            serving.push(own.transpose()?);
        }
    }
    let policy = |m: usize, i: usize| -> &Policy {
        serving[m * inputs.len() + i]
            .as_ref()
            .unwrap_or(&modules[m].policy)
    };
    for (m, module) in modules.iter().enumerate() {
        for (i, (_, input)) in inputs.iter().enumerate() {
            check_verdicts(policy(m, i), input)
                .with_context(|| format!("module {}", module.name))?;
        }
    }
    // Per input: native, then one meter per module.
    let mut meters = Vec::new();
    for (i, (_, input)) in inputs.iter().enumerate() {
        meters.push(Meter::native(input)?);
        for m in 0..modules.len() {
            meters.push(Meter::wasm(policy(m, i), input)?);
        }
    }
    run_schedule(&mut meters, schedule)?;
    let mut results: Vec<Vec<CaseResult>> = modules.iter().map(|_| Vec::new()).collect();
    let mut meters = meters.into_iter();
    for (key, input) in inputs {
        let native = meters.next().context("a native meter")?.samples().next();
        for (m, module) in modules.iter().enumerate() {
            let mut wasm = meters.next().context("a wasm meter")?.samples();
            let mut column = || wasm.next().context("a wasm timing");
            results[m].push(CaseResult {
                key,
                name: input.name.clone(),
                object_bytes: input.object_bytes(),
                payload_bytes: input.payload()?.len(),
                allowed: input.allowed,
                native: native.clone().context("a native timing")?,
                wasm: WasmTimings {
                    instantiate: column()?,
                    call: column()?,
                    total: column()?,
                    host_json: column()?,
                },
                memory: memory_of(&module.probe, input)?,
            });
        }
    }
    Ok(results)
}
