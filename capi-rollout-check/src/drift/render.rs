//! The report for people (a table, then each object that is not current) and for tools
//! (`-o json`, schema `capi-rollout-check.drift/v2`, documented in docs/drift.md; `-o report`,
//! OpenReports, in reports.rs).

use serde_json::{json, Value};

use super::analysis::{Cause, PathsAre, PoolReport, Report, Verdict, WorkerKind};
use super::time;

pub const SCHEMA: &str = "capi-rollout-check.drift/v2";

fn t(seconds: Option<i64>) -> Value {
    seconds.map_or(Value::Null, |s| Value::String(time::format(s)))
}

fn cause_json(c: &Cause) -> Value {
    json!({
        "kind": c.kind.name(),
        "manager": c.manager,
        "operation": c.operation,
        "time": t(c.time),
        "paths": c.paths,
        "pathsAre": c.paths_are.name(),
        "inDataSecret": c.in_data_secret,
        "replacedByProvider": c.replaced_by_provider,
        "summary": c.summary,
    })
}

pub fn pool_json(p: &PoolReport) -> Value {
    json!({
        "kind": p.kind.name(),
        "namespace": p.namespace,
        "name": p.name,
        "verdict": p.verdict.name(),
        "confidence": {
            "level": p.confidence.level.name(),
            "reasons": p.confidence.reasons,
        },
        "bootstrap": {
            "group": p.config.group,
            "kind": p.config.kind,
            "name": p.config.name,
            "provider": p.bootstrap.map(|b| b.provider),
            "rendering": p.bootstrap.map(|b| super::records::rendering_name(b.rendering)),
        },
        "infrastructure": {
            "kind": p.infra_kind,
            "provider": p.infra.as_ref().map(|i| i.provider),
            "readsBootstrapData": p.infra.as_ref().map(|i| i.reads),
            "onRotation": p.infra.as_ref().map(|i| super::records::effect_name(i.on_rotation)),
            "onContentChange": p.infra.as_ref().map(|i| super::records::effect_name(i.on_content_change)),
        },
        "dataSecret": p.data_secret.as_ref().map(|d| json!({
            "name": d.name,
            "created": t(d.created),
            "contentWritten": t(d.content_written),
        })),
        "instances": {
            "source": p.instances.source,
            "total": p.instances.total,
            "staleCount": p.instances.stale.len(),
            "everyInstanceNowAndFuture": p.instances.every_future,
            "stale": p.instances.stale.iter().map(|s| json!({
                "name": s.name,
                "launched": t(Some(s.launched)),
                "because": s.because.name(),
                "certain": s.certain,
                "paths": s.paths,
            })).collect::<Vec<_>>(),
        },
        "causes": p.causes.iter().map(cause_json).collect::<Vec<_>>(),
        "clusterClass": p.topology.as_ref().map(|tp| json!({"cluster": tp.cluster, "topologyName": tp.pool})),
        "fix": p.fix,
    })
}

pub fn json(report: &Report) -> String {
    let value = json!({
        "schema": SCHEMA,
        "now": t(Some(report.now)),
        "summary": {
            "objects": report.pools.len(),
            "kinds": WorkerKind::ALL.iter().map(|k| (k.name().to_string(), json!(report.count_kind(*k)))).collect::<serde_json::Map<_, _>>(),
            "current": report.count(Verdict::Current),
            "stale": report.count(Verdict::Stale),
            "unknown": report.count(Verdict::Unknown),
        },
        "items": report.pools.iter().map(pool_json).collect::<Vec<_>>(),
    });
    let mut text = serde_json::to_string_pretty(&value).unwrap_or_default();
    text.push('\n');
    text
}

/// `2/3`, `all 3+`, `?`.
pub fn stale_column(p: &PoolReport) -> String {
    let total = p.instances.total.map_or("?".to_string(), |n| n.to_string());
    if p.instances.every_future {
        return format!("all {total}+new");
    }
    match (p.verdict, p.instances.stale.len()) {
        (Verdict::Stale, 0) => format!("all {total}"),
        (_, n) => format!("{n}/{total}"),
    }
}

fn cause_column(p: &PoolReport) -> String {
    if p.causes.is_empty() {
        return "-".into();
    }
    p.causes
        .iter()
        .map(|c| c.kind.name())
        .collect::<Vec<_>>()
        .join(",")
}

pub const COLUMNS: [&str; 8] = [
    "NAMESPACE",
    "OBJECT",
    "CONFIG",
    "INFRASTRUCTURE",
    "VERDICT",
    "STALE",
    "CONFIDENCE",
    "CAUSE",
];

pub fn table(report: &Report) -> String {
    let mut rows: Vec<[String; 8]> = vec![COLUMNS.map(str::to_string)];
    for p in &report.pools {
        rows.push([
            p.namespace.clone(),
            format!("{}/{}", p.kind.arg(), p.name),
            format!("{}/{}", p.config.kind, p.config.name),
            p.infra_kind.clone().unwrap_or_else(|| "-".into()),
            p.verdict.name().into(),
            stale_column(p),
            p.confidence.level.name().into(),
            cause_column(p),
        ]);
    }
    let widths: Vec<usize> = (0..8)
        .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in &rows {
        let line: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(c, v)| format!("{v:<w$}", w = widths[c]))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    for p in report
        .pools
        .iter()
        .filter(|p| p.verdict != Verdict::Current)
    {
        out.push('\n');
        out.push_str(&format!(
            "{} {}/{}: {} ({}): {}\n",
            p.namespace,
            p.kind.arg(),
            p.name,
            p.verdict.name(),
            p.confidence.level.name(),
            p.confidence.reasons.join("; ")
        ));
        for c in &p.causes {
            out.push_str(&format!("  {}: {}\n", c.kind.name(), c.summary));
            if !c.paths.is_empty() {
                out.push_str(&format!(
                    "    {}: {}\n",
                    // An Update manager's set is what it owns, not what this edit changed: a
                    // manager that also wrote the field before owns it still.
                    match c.paths_are {
                        PathsAre::AppliedSet => "applied set",
                        PathsAre::Owned => "owned by its manager",
                        PathsAre::Different => "differ from the Machines' configs",
                    },
                    c.paths.join(", ")
                ));
            }
        }
        if p.instances.every_future {
            out.push_str("  every instance, now and future, until a rotation\n");
        }
        for s in &p.instances.stale {
            out.push_str(&format!(
                "  {} launched {} ({}{}){}\n",
                s.name,
                time::format(s.launched),
                s.because.name(),
                if s.certain { "" } else { ", maybe" },
                if s.paths.is_empty() {
                    String::new()
                } else {
                    format!(": {}", s.paths.join(", "))
                }
            ));
        }
        if !p.fix.is_empty() {
            out.push_str("  fix:\n");
            for line in &p.fix {
                out.push_str(&format!("    {line}\n"));
            }
        }
    }
    out.push_str(&format!(
        "\n{}: {} current, {} stale, {} unknown\n",
        counted(report),
        report.count(Verdict::Current),
        report.count(Verdict::Stale),
        report.count(Verdict::Unknown)
    ));
    out
}

/// `3 objects (2 MachinePools, 1 MachineDeployment)`.
fn counted(report: &Report) -> String {
    let kinds: Vec<String> = WorkerKind::ALL
        .iter()
        .map(|k| (k, report.count_kind(*k)))
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| format!("{n} {}{}", k.name(), if n == 1 { "" } else { "s" }))
        .collect();
    let n = report.pools.len();
    let objects = format!("{n} object{}", if n == 1 { "" } else { "s" });
    if kinds.is_empty() {
        objects
    } else {
        format!("{objects} ({})", kinds.join(", "))
    }
}
