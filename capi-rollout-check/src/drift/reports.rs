//! `drift -o report`: the findings as `openreports.io/v1alpha1` Reports, where operators already
//! look (policy-reporter, Rancher's Kubewarden UI show them beside the audit scanner's). One
//! Report per namespace, `capi-rollout-check-drift`; one result per MachinePool,
//! MachineDeployment or MachineSet: `pass` for current, `fail` for stale, `skip` for unknown,
//! the result's `resources` naming the object, its cause, confidence and fix in `properties`.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::analysis::{PoolReport, Report, Verdict};
use super::time;

pub const API_VERSION: &str = "openreports.io/v1alpha1";
pub const RESOURCE: &str = "reports.openreports.io";
/// The Report's name in each namespace.
pub const NAME: &str = "capi-rollout-check-drift";
pub const SOURCE: &str = "capi-rollout-check";
pub const POLICY: &str = "capi-rollout-check-drift";
pub const RULE: &str = "bootstrap-data-current";
/// The label every Report drift writes carries, and `--apply` prunes by.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "capi-rollout-check");

fn result_name(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Current => "pass",
        Verdict::Stale => "fail",
        Verdict::Unknown => "skip",
    }
}

/// The one-line message a UI shows beside the result.
fn message(p: &PoolReport) -> String {
    let total = p.instances.total.map_or("?".into(), |n| n.to_string());
    let what = match p.verdict {
        Verdict::Current => format!(
            "every instance runs the data of {} {}",
            p.config.kind, p.config.name
        ),
        Verdict::Stale if p.instances.every_future => format!(
            "every instance, now and future, runs older bootstrap data than {} {} says",
            p.config.kind, p.config.name
        ),
        Verdict::Stale => format!(
            "{} of {total} instances run older bootstrap data than {} {} says",
            if p.instances.stale.is_empty() {
                "all".to_string()
            } else {
                p.instances.stale.len().to_string()
            },
            p.config.kind,
            p.config.name
        ),
        Verdict::Unknown => format!(
            "drift not known: {}",
            p.confidence.reasons.first().cloned().unwrap_or_default()
        ),
    };
    format!("{} {}: {what}", p.kind.name(), p.name)
}

fn properties(p: &PoolReport) -> Map<String, Value> {
    let mut props = BTreeMap::new();
    props.insert("verdict", p.verdict.name().to_string());
    props.insert("confidence", p.confidence.level.name().to_string());
    props.insert("confidenceReasons", p.confidence.reasons.join("; "));
    props.insert(
        "bootstrapConfig",
        format!("{}/{}", p.config.kind, p.config.name),
    );
    if let Some(total) = p.instances.total {
        props.insert("instances", total.to_string());
    }
    if p.verdict != Verdict::Current {
        props.insert("staleCount", p.instances.stale.len().to_string());
    }
    if !p.instances.stale.is_empty() {
        props.insert(
            "staleInstances",
            p.instances
                .stale
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        );
    }
    if !p.causes.is_empty() {
        props.insert(
            "cause",
            p.causes
                .iter()
                .map(|c| c.kind.name())
                .collect::<Vec<_>>()
                .join(","),
        );
        props.insert(
            "causeSummary",
            p.causes
                .iter()
                .map(|c| c.summary.as_str())
                .collect::<Vec<_>>()
                .join("; "),
        );
        let paths: Vec<&str> = p
            .causes
            .iter()
            .flat_map(|c| c.paths.iter().map(String::as_str))
            .collect();
        if !paths.is_empty() {
            props.insert("paths", paths.join(", "));
        }
        if let Some(manager) = p.causes.iter().find_map(|c| c.manager.as_deref()) {
            props.insert("manager", manager.to_string());
        }
    }
    if !p.fix.is_empty() {
        props.insert("fix", p.fix.join("\n"));
    }
    props
        .into_iter()
        .map(|(k, v)| (k.to_string(), Value::String(v)))
        .collect()
}

fn result(p: &PoolReport, now: i64) -> Value {
    let verdict = result_name(p.verdict);
    let mut r = json!({
        "source": SOURCE,
        "policy": POLICY,
        "rule": RULE,
        "category": "Cluster API",
        "result": verdict,
        "scored": true,
        "timestamp": {"seconds": now, "nanos": 0},
        "message": message(p),
        "resources": [{
            "apiVersion": p.api_version,
            "kind": p.kind.name(),
            "name": p.name,
            "namespace": p.namespace,
            "uid": p.uid,
        }],
        "properties": properties(p),
    });
    if p.verdict == Verdict::Stale {
        r["severity"] = json!("medium");
    }
    r
}

/// The Reports, one per namespace of `namespaces` (every namespace with an object, and the
/// namespace of `-n` even without one, so that an older Report there is emptied).
pub fn reports(report: &Report, namespaces: &[String]) -> Vec<Value> {
    let mut by_ns: BTreeMap<&str, Vec<&PoolReport>> = namespaces
        .iter()
        .map(|n| (n.as_str(), Vec::new()))
        .collect();
    for p in &report.pools {
        by_ns.entry(p.namespace.as_str()).or_default().push(p);
    }
    by_ns
        .into_iter()
        .map(|(ns, pools)| {
            let count = |v: Verdict| pools.iter().filter(|p| p.verdict == v).count();
            json!({
                "apiVersion": API_VERSION,
                "kind": "Report",
                "metadata": {
                    "name": NAME,
                    "namespace": ns,
                    "labels": {MANAGED_BY.0: MANAGED_BY.1},
                    "annotations": {"capi-rollout-check/generated": time::format(report.now)},
                },
                "source": SOURCE,
                "summary": {
                    "pass": count(Verdict::Current),
                    "fail": count(Verdict::Stale),
                    "warn": 0,
                    "error": 0,
                    "skip": count(Verdict::Unknown),
                },
                "results": pools.iter().map(|p| result(p, report.now)).collect::<Vec<_>>(),
            })
        })
        .collect()
}

/// The Reports as YAML documents, ready for `kubectl apply -f -`.
pub fn yaml(reports: &[Value]) -> String {
    reports
        .iter()
        .map(|r| format!("---\n{}", yaml_serde::to_string(r).unwrap_or_default()))
        .collect()
}
