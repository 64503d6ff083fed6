//! The report: markdown written between markers into docs/performance.md, so the hand-written
//! text around them survives, and the targets the numbers are held to.

use std::fmt::Write as _;
use std::time::Duration;

use crate::measure::{CaseResult, WasmTimings};
use crate::scale::{
    extra_memory, growth, FleetRow, TARGET_FLEET_EXTRA_BYTES, TARGET_FLEET_NS, TARGET_FLEET_POOLS,
};
use crate::size::{CompileTimes, ModuleSizes};
use crate::stats::{fmt_bytes, fmt_ns, Samples};

pub const BEGIN_MARKER: &str = "<!-- make bench: generated from here -->";
pub const END_MARKER: &str = "<!-- make bench: generated up to here -->";

/// The targets the numbers are held to. The module's is the project's size budget: the
/// annotated module at most 512 KiB (524,288 bytes).
pub const TARGET_MODULE_BYTES: u64 = 512 * 1024;
pub const TARGET_TYPICAL_EDIT_NS: f64 = 150_000.0;
pub const TARGET_WASM_NATIVE_RATIO: f64 = 3.0;
/// A 2 MB object: at most 20 ms (p50, in the host) and 6 MiB of guest memory at peak.
pub const TARGET_2MIB_NS: f64 = 20_000_000.0;
pub const TARGET_2MIB_PEAK_BYTES: u64 = 6 * 1024 * 1024;

#[derive(Clone, Debug)]
pub struct Report {
    pub machine: Vec<(String, String)>,
    pub command: String,
    /// How the headline requests and the sweep were measured.
    pub schedules: (String, String),
    pub cases: Vec<CaseResult>,
    /// The four requests in the baseline module (`--baseline`).
    pub cases_baseline: Option<Vec<CaseResult>>,
    pub sweep: Vec<CaseResult>,
    pub fleet: Vec<FleetRow>,
    /// [`APISERVER_KEYS`], in the shipped module and in the baseline (`--baseline`).
    pub apiserver: Vec<CaseResult>,
    pub apiserver_baseline: Option<Vec<CaseResult>>,
    /// The fleet rows' measurements in the baseline module (`--baseline`).
    pub fleet_baseline: Option<Vec<CaseResult>>,
    /// `capi-rollout-check drift` on one namespace, measured once.
    pub drift: Option<crate::drift::DriftRow>,
    pub compile: CompileTimes,
    pub compile_baseline: Option<CompileTimes>,
    pub sizes: ModuleSizes,
    pub elapsed: Duration,
}

pub struct TargetRow {
    pub target: String,
    pub measured: String,
    pub met: bool,
}

pub fn targets(report: &Report) -> Vec<TargetRow> {
    let mut rows = Vec::new();
    let mut row = |target: String, measured: String, met: bool| {
        rows.push(TargetRow {
            target,
            measured,
            met,
        })
    };
    let (annotated, limit) = (report.sizes.annotated, TARGET_MODULE_BYTES);
    let measured = format!("{} annotated", fmt_bytes(annotated));
    row(
        format!("annotated module <= {} (the size budget)", fmt_bytes(limit)),
        measured,
        annotated <= limit,
    );
    if let Some(edit) = report.cases.iter().find(|c| c.key == "edit") {
        let (p50, limit) = (edit.wasm.total.p50(), TARGET_TYPICAL_EDIT_NS);
        let target = format!(
            "typical 10 KiB edit p50 <= {} in the host, instantiation included",
            fmt_ns(limit)
        );
        row(target, fmt_ns(p50), p50 <= limit);
    }
    let call: fn(&CaseResult) -> f64 = CaseResult::call_ratio;
    for (what, ratio) in [
        ("guest call vs the same work natively", call),
        ("fresh instance + call vs native", CaseResult::total_ratio),
    ] {
        let (worst, limit) = (
            report.cases.iter().map(ratio).fold(0.0, f64::max),
            TARGET_WASM_NATIVE_RATIO,
        );
        let target = format!("wasm/native <= {limit}x, {what}");
        row(target, format!("{worst:.1}x at worst"), worst <= limit);
    }
    if let Some(big) = report.cases.iter().find(|c| c.key == "large") {
        let (p50, limit, size) = (big.wasm.total.p50(), TARGET_2MIB_NS, big.object_bytes);
        let target = format!(
            "2 MB object ({}) <= {} (p50, in the host)",
            bytes(size),
            fmt_ns(limit)
        );
        row(target, fmt_ns(p50), p50 <= limit);
        let (peak, limit) = (big.memory.after_call_bytes, TARGET_2MIB_PEAK_BYTES);
        let target = format!("2 MB object: peak guest memory <= {}", fmt_bytes(limit));
        row(target, fmt_bytes(peak), peak <= limit);
    }
    let sweep = report.sweep.iter();
    let sweep: Vec<(f64, f64)> = sweep
        .map(|c| (c.object_bytes as f64 / 1024.0, c.wasm.total.p50()))
        .collect();
    if let Some(growth) = growth(&sweep, 64.0) {
        let (exponent, ratio) = (growth.exponent, growth.ratio);
        let target = "cost linear in object size (wasm), from 64 KiB to the largest";
        let measured = format!("exponent {exponent:.2}, per-KiB cost largest/64 KiB {ratio:.2}");
        row(
            target.to_string(),
            measured,
            (0.9..=1.1).contains(&exponent),
        );
    }
    let pools = TARGET_FLEET_POOLS;
    if let Some(fleet) = report.fleet.iter().find(|r| r.pools == pools) {
        let (call, total) = (fleet.case.wasm.call.p50(), fleet.case.wasm.total.p50());
        let target = format!(
            "{pools} MachinePools: config update needing the list <= {} per evaluation (guest call p50)",
            fmt_ns(TARGET_FLEET_NS)
        );
        let measured = format!("{} (fresh instance + call {})", fmt_ns(call), fmt_ns(total));
        row(target, measured, call <= TARGET_FLEET_NS);
        let (extra, limit) = (extra_memory(&report.fleet, fleet), TARGET_FLEET_EXTRA_BYTES);
        let target = format!(
            "{pools} MachinePools: <= {} extra guest memory (over 1 pool)",
            fmt_bytes(limit)
        );
        row(target, fmt_bytes(extra), extra <= limit);
    }
    let fleet = report.fleet.iter();
    let fleet: Vec<(f64, f64)> = fleet
        .map(|r| (r.pools as f64, r.case.wasm.call.p50()))
        .collect();
    if let Some(growth) = growth(&fleet, pools as f64) {
        let (exponent, ratio) = (growth.exponent, growth.ratio);
        let target = "cost linear in MachinePools (guest call), from 1,000 pools to the largest";
        let measured =
            format!("exponent {exponent:.2}, per-pool cost largest/1,000 pools {ratio:.2}");
        row(target.to_string(), measured, (0.8..=1.25).contains(&ratio));
    }
    rows
}

/// A markdown table: `head` names the columns, separated by ` | `, a `<` before a column of
/// text (left-aligned; the others hold numbers); then one row of cells per item.
fn table(w: &mut String, head: &str, rows: impl Iterator<Item = Vec<String>>) {
    let columns: Vec<&str> = head.split(" | ").collect();
    let names: Vec<&str> = columns.iter().map(|c| c.trim_start_matches('<')).collect();
    let rule: Vec<&str> = columns
        .iter()
        .map(|c| if c.starts_with('<') { "---" } else { "--:" })
        .collect();
    let _ = writeln!(w, "| {} |\n|{}|", names.join(" | "), rule.join("|"));
    for cells in rows {
        let _ = writeln!(w, "| {} |", cells.join(" | "));
    }
}

/// With a baseline (`--baseline`): its `time` p50 and peak memory, two more columns.
fn before_head(head: &str, baseline: Option<&Vec<CaseResult>>, time: &str) -> String {
    match baseline {
        Some(_) => format!("{head} | before: {time} p50 | before: peak memory"),
        None => head.to_string(),
    }
}

/// `cells` of row `i`, followed by the baseline's, when there is one.
fn before_cells(
    mut cells: Vec<String>,
    baseline: Option<&Vec<CaseResult>>,
    i: usize,
    time: fn(&WasmTimings) -> &Samples,
) -> Vec<String> {
    if let Some(b) = baseline.and_then(|b| b.get(i)) {
        cells.extend([
            fmt_ns(time(&b.wasm).p50()),
            bytes(b.memory.after_call_bytes),
        ]);
    }
    cells
}

fn bytes(n: impl TryInto<u64>) -> String {
    fmt_bytes(n.try_into().unwrap_or(u64::MAX))
}

/// Measured with the baseline module, when there is one.
fn with_baseline(baseline: Option<&Vec<CaseResult>>) -> &'static str {
    match baseline {
        Some(_) => "; before: the baseline module, measured with them",
        None => "",
    }
}

pub fn render(report: &Report) -> String {
    let mut md = String::new();
    let w = &mut md;
    render_machine_and_targets(w, report);
    render_per_evaluation(w, report);
    render_memory(w, report);
    render_sweep(w, report);
    if !report.apiserver.is_empty() {
        render_apiserver(w, report);
    }
    if !report.fleet.is_empty() {
        render_fleet(w, report);
    }
    if let Some(drift) = &report.drift {
        render_drift(w, drift);
    }
    render_compilation(w, report);
    render_size(w, report);
    md
}

/// The run's command and time, the machine, the targets met or missed.
fn render_machine_and_targets(w: &mut String, report: &Report) {
    let (command, seconds) = (&report.command, report.elapsed.as_secs_f64());
    let _ = writeln!(
        w,
        "Generated by `{command}` in {seconds:.0} s.\n\n### Machine\n"
    );
    let machine = report.machine.iter();
    table(w, "< | <", machine.map(|(k, v)| vec![k.clone(), v.clone()]));

    let _ = writeln!(w, "\n### Targets\n");
    let targets = targets(report).into_iter().map(|t| {
        let met = if t.met { "met" } else { "**missed**" };
        vec![t.target, t.measured, met.to_string()]
    });
    table(w, "<target | <measured | <", targets);
}

/// Each request natively, as a guest call and on a fresh instance, with the baseline's if any.
fn render_per_evaluation(w: &mut String, report: &Report) {
    let baseline = report.cases_baseline.as_ref();
    let samples = report
        .cases
        .iter()
        .map(|c| c.wasm.total.len().min(c.native.len()));
    let _ = writeln!(
        w,
        "\n### Per evaluation\n\nnative: `engine::validate_payload` on the payload the host sends, plus \
         serializing the answer (the guest's work, natively). wasm call: the `validate` guest call \
         on a ready instance. fresh instance + call: what policy-server pays per request: a new \
         instance from the pre-instantiated module (store, memory, WASI, `wapc_init`), the call, \
         dropping the instance. host JSON: building the payload and reading the answer, outside \
         the guest. Each timing is the p50 (p99) of one evaluation, {} samples or more; with \
         fewer than 100 the p99 is the maximum. Native and wasm are measured interleaved ({}{}), \
         so a change of load falls on all of them.\n",
        samples.min().unwrap_or(0),
        report.schedules.0,
        with_baseline(baseline),
    );
    let p50_p99 = |s: &Samples| format!("{} ({})", fmt_ns(s.p50()), fmt_ns(s.p99()));
    let head = "<request | object | <verdict | native | wasm call | instantiate | \
                fresh instance + call | call / native | total / native | host JSON";
    let rows = report.cases.iter().enumerate().map(|(i, c)| {
        let cells = vec![
            c.name.clone(),
            bytes(c.object_bytes),
            if c.allowed { "allow" } else { "reject" }.to_string(),
            p50_p99(&c.native),
            p50_p99(&c.wasm.call),
            fmt_ns(c.wasm.instantiate.p50()),
            p50_p99(&c.wasm.total),
            format!("{:.1}x", c.call_ratio()),
            format!("{:.1}x", c.total_ratio()),
            fmt_ns(c.wasm.host_json.p50()),
        ];
        before_cells(cells, baseline, i, |t| &t.total)
    });
    table(
        w,
        &before_head(head, baseline, "fresh instance + call"),
        rows,
    );
}

/// The guest's linear memory after init and after the call.
fn render_memory(w: &mut String, report: &Report) {
    let _ = writeln!(
        w,
        "\n### Guest memory per evaluation\n\nThe size of the guest's exported linear memory on a \
         fresh instance, after `wapc_init` and after the `validate` call (it never shrinks: \
         the second is the evaluation's peak).\n"
    );
    let head = "<request | payload | after init | after the call (peak) | grown by";
    let rows = report.cases.iter().chain(&report.sweep).map(|c| {
        let (initial, peak) = (c.memory.initial_bytes, c.memory.after_call_bytes);
        let sizes = [c.payload_bytes as u64, initial, peak, peak - initial];
        [c.name.clone()]
            .into_iter()
            .chain(sizes.map(bytes))
            .collect()
    });
    table(w, head, rows);
}

/// The cost against the object's size.
fn render_sweep(w: &mut String, report: &Report) {
    let _ = writeln!(
        w,
        "\n### Cost against object size\n\nAn in-use KubeadmConfig made of 10 KiB files, one \
         changed (rejected): the whole spec is compared and fingerprinted. Measured interleaved \
         ({}). per KiB: the cost above the smallest object's, divided by the KiB added (from \
         16 KiB on).\n",
        report.schedules.1
    );
    let native: fn(&CaseResult) -> f64 = |c| c.native.p50();
    let wasm: fn(&CaseResult) -> f64 = |c| c.wasm.total.p50();
    let head = "object | native p50 | native per KiB | fresh instance + call p50 | wasm per KiB | \
                total / native";
    let rows = report.sweep.iter().map(|c| {
        let first = &report.sweep[0];
        let added = (c.object_bytes as f64 - first.object_bytes as f64) / 1024.0;
        // Below 16 KiB the added cost is within the noise of the fixed cost.
        let per_kib = |ns: fn(&CaseResult) -> f64| match c.object_bytes >= 16 * 1024 {
            true if added > 0.0 => fmt_ns((ns(c) - ns(first)) / added),
            _ => "-".to_string(),
        };
        let ratio = format!("{:.1}x", c.total_ratio());
        let (native_p50, wasm_p50) = (fmt_ns(native(c)), fmt_ns(wasm(c)));
        vec![bytes(c.object_bytes), native_p50, per_kib(native)]
            .into_iter()
            .chain([wasm_p50, per_kib(wasm), ratio])
            .collect()
    });
    table(w, head, rows);
}

/// Loading the module, with wasmtime's cache off and on.
fn render_compilation(w: &mut String, report: &Report) {
    let _ = writeln!(
        w,
        "\n### Compilation\n\nLoading the annotated module into a new engine, as policy-server \
         does at start (`Module::new` + pre-instantiation); median of {} loads.\n",
        report.compile.uncached.len(),
    );
    let compile = [
        ("", Some(&report.compile)),
        ("before: ", report.compile_baseline.as_ref()),
    ];
    let rows = compile.into_iter().flat_map(|(prefix, times)| {
        times.into_iter().flat_map(move |t| {
            [
                vec![
                    format!("{prefix}compile (cache off)"),
                    fmt_ns(t.uncached.p50()),
                ],
                vec![
                    format!("{prefix}load from wasmtime's cache"),
                    fmt_ns(t.cached.p50()),
                ],
            ]
        })
    });
    table(w, "< | median", rows);
}

/// The module's size at each step of its build.
fn render_size(w: &mut String, report: &Report) {
    let _ = writeln!(
        w,
        "\n### Module size\n\nThe shipped module at each step of its build: `cargo build` (release \
         profile: opt-level 2, LTO, 1 CGU, strip, panic abort; `target/policy.cargo.wasm`), \
         binaryen's `wasm-opt -O3` (`policy.wasm`), annotated with metadata.yml and README.md \
         (`annotated-policy.wasm`).\n"
    );
    let sizes = &report.sizes;
    let size = |n: u64| format!("{} ({n} B)", fmt_bytes(n));
    let mut row: Vec<String> = [sizes.cargo, sizes.optimized, sizes.annotated]
        .map(size)
        .into();
    row.push(sizes.annotated_gzip.map_or("-".to_string(), fmt_bytes));
    let head = "cargo build | after wasm-opt | annotated | annotated, gzip -9";
    table(w, head, [row].into_iter());
}

fn render_apiserver(w: &mut String, report: &Report) {
    let baseline = report.apiserver_baseline.as_ref();
    let _ = writeln!(
        w,
        "\n### Requests as kube-apiserver sends them\n\nThe headline requests, each also as the API \
         server sends it: `metadata.managedFields` on object and oldObject (the person's apply, \
         CAPI core's ownerReferences, CABPK's discovery fields and status) and, for a \
         `kubectl apply`, the last-applied annotation holding the applied manifest; the 2.1 MiB \
         config is applied server-side (kubectl refuses annotations over 256 KiB). No rule reads \
         them. Measured interleaved ({}{}).\n",
        report.schedules.1,
        with_baseline(baseline),
    );
    let head = "<request | payload | native p50 | fresh instance + call p50 | peak memory";
    let rows = report.apiserver.iter().enumerate().map(|(i, c)| {
        let cells = vec![
            c.name.clone(),
            bytes(c.payload_bytes),
            fmt_ns(c.native.p50()),
            fmt_ns(c.wasm.total.p50()),
            bytes(c.memory.after_call_bytes),
        ];
        before_cells(cells, baseline, i, |t| &t.total)
    });
    table(
        w,
        &before_head(head, baseline, "fresh instance + call"),
        rows,
    );
    let cost = |cases: &[CaseResult]| -> Vec<String> {
        let pairs = cases.chunks_exact(2).map(|pair| (&pair[0], &pair[1]));
        pairs
            .map(|(plain, sent)| {
                format!(
                    "{}: +{} of payload, {} ({:+.0} %), peak memory {:+.0} KiB",
                    plain.name,
                    bytes(sent.payload_bytes - plain.payload_bytes.min(sent.payload_bytes)),
                    fmt_ns(sent.wasm.total.p50() - plain.wasm.total.p50()),
                    100.0 * (sent.wasm.total.p50() / plain.wasm.total.p50() - 1.0),
                    (sent.memory.after_call_bytes as f64 - plain.memory.after_call_bytes as f64)
                        / 1024.0,
                )
            })
            .collect()
    };
    let _ = writeln!(
        w,
        "\nWhat they cost (fresh instance + call p50, as sent minus without): {}.",
        cost(&report.apiserver).join("; ")
    );
    if let Some(before) = baseline {
        let _ = writeln!(w, "Before: {}.", cost(before).join("; "));
    }
}

fn render_fleet(w: &mut String, report: &Report) {
    let baseline = report.fleet_baseline.as_ref();
    let _ = writeln!(
        w,
        "\n### Fleet scale\n\nThe 10 KiB in-use edit with `contextAware: true` (rejected): a \
         compared spec change, so the policy lists the namespace's MachinePools and looks for the \
         one that references the config. The host answers the list from memory (policy-server \
         answers from its cache; serializing it is the host's cost and is left out), field-masked \
         as policy-server returns it: each item only metadata.name, uid, deletionTimestamp and \
         spec.template.spec.bootstrap. wasm call: the `validate` call, the list's transfer into \
         the guest included. extra memory: peak guest memory above the 1-pool row's. Measured \
         interleaved ({}{}).\n",
        report.schedules.1,
        with_baseline(baseline),
    );
    let head = "MachinePools | list | native p50 | wasm call p50 | fresh instance + call p50 | \
                peak memory | extra memory";
    let rows = report.fleet.iter().enumerate().map(|(i, row)| {
        let c = &row.case;
        let cells = vec![
            row.pools.to_string(),
            bytes(row.list_bytes),
            fmt_ns(c.native.p50()),
            fmt_ns(c.wasm.call.p50()),
            fmt_ns(c.wasm.total.p50()),
            bytes(c.memory.after_call_bytes),
            bytes(extra_memory(&report.fleet, row)),
        ];
        before_cells(cells, baseline, i, |t| &t.call)
    });
    table(w, &before_head(head, baseline, "wasm call"), rows);
}

fn render_drift(w: &mut String, d: &crate::drift::DriftRow) {
    let _ = writeln!(
        w,
        "\n### capi-rollout-check drift\n\n`capi-rollout-check drift -n fleet` on one namespace of \
         {} MachinePools (three Machines each; a quarter clean, a quarter with a rotation not \
         rolled, half edited in place) and {} MachineDeployments ({} Machines, each with its own \
         config; every other template edited in place after half its Machines were made), \
         measured once: the analysis of the listed objects as kubectl returns them \
         (managedFields included) and the three renderings (`-o report`: the OpenReports YAML). \
         kubectl's lists (one per kind, paged by kubectl 500 items a request) are the API \
         server's cost and are left out.\n",
        d.pools, d.deployments, d.deployment_machines
    );
    let head = "MachinePools | MachineDeployments | objects listed | their JSON | stale | analysis | table | JSON | Reports | JSON output";
    let ms = |t: std::time::Duration| fmt_ns(t.as_nanos() as f64);
    let row = vec![
        d.pools.to_string(),
        d.deployments.to_string(),
        d.objects.to_string(),
        bytes(d.input_bytes),
        d.stale.to_string(),
        ms(d.analyze),
        ms(d.table),
        ms(d.json),
        ms(d.report),
        bytes(d.json_bytes),
    ];
    table(w, head, std::iter::once(row));
}

/// Puts `generated` between the markers of `existing` (or builds a new file around it).
pub fn splice(existing: Option<&str>, generated: &str) -> String {
    let block = format!("{BEGIN_MARKER}\n{generated}\n{END_MARKER}");
    if let Some(text) = existing {
        if let (Some(begin), Some(end)) = (text.find(BEGIN_MARKER), text.find(END_MARKER)) {
            if begin < end {
                return format!(
                    "{}{block}{}",
                    &text[..begin],
                    &text[end + END_MARKER.len()..]
                );
            }
        }
    }
    format!("# Performance\n\n{block}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splice_keeps_what_is_around_the_markers() {
        let first = splice(None, "one");
        assert!(first.starts_with("# Performance"));
        let edited =
            first.replace("# Performance\n", "# Performance\n\nhand-written\n") + "\nnotes after\n";
        let second = splice(Some(&edited), "two");
        assert!(second.contains("hand-written"));
        assert!(second.contains("notes after"));
        assert!(second.contains("two"));
        assert!(!second.contains("one"));
    }
}
