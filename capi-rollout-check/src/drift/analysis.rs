//! The drift of each MachinePool, from the listed objects alone: pure, no I/O.
//!
//! An instance's launch is its MachinePool Machine's `creationTimestamp` (or its infrastructure
//! machine's). What its bootstrap data held is read from two times: the data Secret's
//! `creationTimestamp` (a rotation makes a new Secret) and the last write of its `data`
//! (its `managedFields`), and the time of the config's last spec change by anyone but a
//! controller (the config's `managedFields`). An instance launched before the data it should run
//! was written runs older data.

use std::collections::BTreeMap;

use serde_json::Value;

use super::records::{self, Bootstrap, Effect, Infra};
use super::time;

/// CABPK's longest wait between an edit and the data Secret's re-render: the next token
/// rotation, TTL/2 + TTL/3 at the default 15 min TTL.
pub const TOKEN_ROTATION_BOUND: i64 = 750;
/// How long a reconcile-every-time provider (EKSConfig) may take to write an edit: its
/// controller's resync period.
pub const RECONCILE_BOUND: i64 = 600;
/// A config created this long after its pool was a rotation, not the pool's first config.
const ROTATION_GRACE: i64 = 60;

/// Field managers that are controllers, not edits: controller-runtime's default name (the
/// binary, `manager`, for CAPI, CABPK, CAPA, RKE2...).
pub const CONTROLLER_MANAGERS: &[&str] = &["manager"];
pub const TOPOLOGY_MANAGER: &str = "capi-topology";
pub const ANCIENT_CHANGES: &str = "ancient-changes";
pub const CLUSTERCTL: &str = "clusterctl";
pub const POOL_NAME_LABEL: &str = "cluster.x-k8s.io/pool-name";
pub const TOPOLOGY_OWNED_LABEL: &str = "topology.cluster.x-k8s.io/owned";
pub const TOPOLOGY_POOL_LABEL: &str = "topology.cluster.x-k8s.io/pool-name";
pub const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";

mod cause;
mod deployments;
mod fix;
mod managed_fields;
mod objects;
mod report;

pub use deployments::{strategy, TOPOLOGY_DEPLOYMENT_LABEL};
#[cfg(test)]
pub(crate) use fix::fresh_name;
pub use fix::{reissue_name, resource};
pub use managed_fields::leaf_paths;
pub use objects::owner;
pub use report::{
    Cause, CauseKind, Confidence, ConfigInfo, Inputs, Instance, Instances, Level, PathsAre,
    PoolReport, Report, SecretInfo, StaleBecause, StaleInstance, Topology, Verdict, WorkerKind,
};

use fix::fix_lines;
use managed_fields::{entries, owns_data, owns_spec, Entry};
use objects::{created, key, label, meta, reference, s, Index};

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
pub fn analyze(inputs: &Inputs) -> Report {
    let index = Index::new(inputs);
    let mut pools: Vec<PoolReport> = inputs
        .pools
        .iter()
        .filter_map(|pool| analyze_pool(inputs, &index, pool))
        .collect();
    let settings = capi_bootstrap_rollout_policy::settings::Settings::default();
    pools.extend(deployments::analyze(inputs, &index, &settings));
    pools.sort_by(|a, b| (&a.namespace, a.kind, &a.name).cmp(&(&b.namespace, b.kind, &b.name)));
    Report {
        now: inputs.now,
        pools,
    }
}

struct Judgement {
    stale: BTreeMap<String, StaleInstance>,
    every_future: bool,
    /// (level, reason): the confidence is the least sure of them.
    levels: Vec<(Level, String)>,
    causes: Vec<Cause>,
    reissue: bool,
    roll: bool,
    wait: Vec<String>,
}

impl Judgement {
    fn mark(&mut self, i: &Instance, because: StaleBecause, certain: bool) {
        self.stale.entry(i.name.clone()).or_insert(StaleInstance {
            name: i.name.clone(),
            launched: i.launched,
            because,
            certain,
            paths: Vec::new(),
        });
    }
}

/// Makes `report` the report of an object whose drift cannot be told, and why.
fn mark_unknown(report: &mut PoolReport, reason: String) {
    report.verdict = Verdict::Unknown;
    report.confidence = Confidence {
        level: Level::Unknown,
        reasons: vec![reason],
    };
}

/// [`mark_unknown`] for a pool; `None`: no more to read.
fn unknown_pool<T>(report: &mut PoolReport, reason: String) -> Option<T> {
    mark_unknown(report, reason);
    None
}

/// What a pool names and holds, read before any judgement.
struct Pool<'a> {
    now: i64,
    ns: String,
    name: String,
    kind: String,
    config_name: String,
    pool: &'a Value,
    bootstrap_spec: &'a Value,
    deleting: bool,
    infra_ref: Option<(String, String, String)>,
    infra: Option<Infra>,
    infra_label: String,
    bootstrap: Option<Bootstrap>,
    instances: Vec<Instance>,
    replicas: Option<u64>,
}

/// The pool's config and data Secret, with the Secret's two times.
struct Data<'a> {
    config: &'a Value,
    secret_name: String,
    secret_created: i64,
    content_written: i64,
}

/// One pool, step by step: what it names and holds, its config and data Secret, what the
/// config's history hides, the causes (an edit, a rotation not rolled), then the verdict.
fn analyze_pool(inputs: &Inputs, index: &Index, pool: &Value) -> Option<PoolReport> {
    let (mut report, p) = read_pool(inputs, index, pool)?;
    let Some(d) = read_data(index, &p, &mut report) else {
        return Some(report);
    };
    let mut j = Judgement {
        stale: BTreeMap::new(),
        every_future: false,
        levels: Vec::new(),
        causes: Vec::new(),
        reissue: false,
        roll: false,
        wait: Vec::new(),
    };
    let config_entries = entries(d.config);
    history_levels(&d, &config_entries, &mut j);
    let edit = last_edit(&p, &d, &config_entries);
    if let Some(edit) = edit {
        cause::edit_cause(&p, &d, edit, &mut j);
    }
    cause::rotation_cause(&p, &d, &mut j);
    let infra = &p.infra;
    if j.reissue
        && infra
            .as_ref()
            .is_some_and(|i| i.on_rotation == Effect::NewInstancesOnly)
    {
        j.roll = true;
    }
    if p.instances.is_empty() {
        report.instances.source = None;
        no_instance_ages(&p, &d, edit, &mut j);
    }
    verdict(inputs, &p, &d, edit, j, &mut report);
    Some(report)
}

/// The pool's references, records and instances; `None` for a pool without a `configRef`.
fn read_pool<'a>(
    inputs: &Inputs,
    index: &Index<'a>,
    pool: &'a Value,
) -> Option<(PoolReport, Pool<'a>)> {
    let now = inputs.now;
    let ns = meta(pool, "namespace").unwrap_or("").to_string();
    let name = meta(pool, "name")?.to_string();
    let deleting = pool.pointer("/metadata/deletionTimestamp").is_some();
    let bootstrap_spec = pool.pointer("/spec/template/spec/bootstrap")?;
    let (group, kind, config_name) = reference(bootstrap_spec.get("configRef")?)?;
    let topology = label(pool, TOPOLOGY_OWNED_LABEL).map(|_| Topology {
        cluster: label(pool, CLUSTER_NAME_LABEL).map(str::to_string),
        pool: label(pool, TOPOLOGY_POOL_LABEL).map(str::to_string),
    });
    let infra_ref = pool
        .pointer("/spec/template/spec/infrastructureRef")
        .and_then(reference);
    let infra_object = infra_ref
        .as_ref()
        .and_then(|(_, k, n)| index.infra_pools.get(&key(k, &ns, n)).copied());
    let infra = infra_ref
        .as_ref()
        .and_then(|(g, k, _)| records::infra(g, k, infra_object));
    let bootstrap = records::bootstrap(&kind);
    let mut report = PoolReport {
        kind: WorkerKind::MachinePool,
        namespace: ns.clone(),
        name: name.clone(),
        api_version: s(pool, &["apiVersion"]).unwrap_or("").to_string(),
        uid: meta(pool, "uid").unwrap_or("").to_string(),
        config: ConfigInfo {
            group: group.clone(),
            kind: kind.clone(),
            name: config_name.clone(),
        },
        bootstrap,
        infra_kind: infra_ref.as_ref().map(|(_, k, _)| k.clone()),
        infra: infra.clone(),
        data_secret: None,
        verdict: Verdict::Current,
        confidence: Confidence {
            level: Level::Exact,
            reasons: Vec::new(),
        },
        instances: Instances::default(),
        causes: Vec::new(),
        topology,
        fix: Vec::new(),
    };

    // Instances: MachinePool Machines, else the infrastructure's own machines.
    let mut instances = index
        .machines
        .get(&(ns.clone(), name.clone()))
        .cloned()
        .unwrap_or_default();
    if instances.is_empty() {
        if let Some(list) = index
            .infra_instances
            .get(&(ns.clone(), name.clone()))
            .or_else(|| {
                infra_ref
                    .as_ref()
                    .and_then(|(_, _, n)| index.infra_instances.get(&(ns.clone(), n.clone())))
            })
        {
            instances = list.clone();
        }
    }
    instances.sort_by(|a, b| (a.launched, &a.name).cmp(&(b.launched, &b.name)));
    let replicas = pool.pointer("/status/replicas").and_then(Value::as_u64);
    report.instances.source = instances.first().map(|i| i.kind.clone());
    report.instances.total = if instances.is_empty() {
        replicas
    } else {
        Some(instances.len() as u64)
    };
    let infra_label = infra
        .as_ref()
        .map(|i| i.kind.clone())
        .or_else(|| report.infra_kind.clone())
        .unwrap_or_else(|| "its infrastructure".into());
    let pool = Pool {
        now,
        ns,
        name,
        kind,
        config_name,
        pool,
        bootstrap_spec,
        deleting,
        infra_ref,
        infra,
        infra_label,
        bootstrap,
        instances,
        replicas,
    };
    Some((report, pool))
}

/// The config and its data Secret; `None` when the pool cannot be judged further (being
/// deleted, never reading bootstrap data, a missing object, a rotation in progress): `report`
/// then says why.
fn read_data<'a>(index: &Index<'a>, p: &Pool<'a>, report: &mut PoolReport) -> Option<Data<'a>> {
    let (ns, kind, config_name) = (&p.ns, &p.kind, &p.config_name);
    let (deleting, infra, bootstrap_spec) = (p.deleting, &p.infra, p.bootstrap_spec);
    if deleting {
        return unknown_pool(report, "the pool is being deleted".into());
    }
    if let Some(infra) = infra.as_ref().filter(|i| !i.reads) {
        report.confidence.reasons.push(format!(
            "{} never reads bootstrap data: its instances boot without it",
            infra.kind
        ));
        return None;
    }
    let Some(config) = index.configs.get(&key(kind, ns, config_name)).copied() else {
        return unknown_pool(
            report,
            format!("{kind} {ns}/{config_name} (its configRef) was not found"),
        );
    };
    let secret_name = bootstrap_spec
        .get("dataSecretName")
        .and_then(Value::as_str)
        .or_else(|| s(config, &["status", "dataSecretName"]));
    let Some(secret_name) = secret_name else {
        return unknown_pool(
            report,
            format!("{kind} {ns}/{config_name} has no data Secret yet (no dataSecretName)"),
        );
    };
    let config_secret = s(config, &["status", "dataSecretName"]);
    if config_secret != Some(secret_name) {
        return unknown_pool(
            report,
            format!(
                "a rotation in progress: the pool still has data Secret {secret_name}, {kind} {config_name} {}",
                config_secret.map_or_else(
                    || "has none yet".to_string(),
                    |c| format!("has {c}, which CAPI has not copied into the pool yet")
                )
            ),
        );
    }
    let Some(secret) = index
        .secrets
        .get(&(ns.clone(), secret_name.to_string()))
        .copied()
    else {
        return unknown_pool(
            report,
            format!("the data Secret {ns}/{secret_name} was not found"),
        );
    };
    let secret_created = created(secret);
    let content_written = entries(secret)
        .iter()
        .filter(|e| owns_data(e))
        .filter_map(|e| e.time)
        .max()
        .or(secret_created);
    report.data_secret = Some(SecretInfo {
        name: secret_name.to_string(),
        created: secret_created,
        content_written,
    });
    let (Some(secret_created), Some(content_written)) = (secret_created, content_written) else {
        return unknown_pool(
            report,
            format!("the data Secret {ns}/{secret_name} has no creationTimestamp"),
        );
    };
    let data = Data {
        config,
        secret_name: secret_name.to_string(),
        secret_created,
        content_written,
    };
    Some(data)
}

/// What the config's managedFields cannot tell: a clusterctl move, edits merged away.
fn history_levels(d: &Data, config_entries: &[Entry], j: &mut Judgement) {
    let secret_created = d.secret_created;
    if let Some(moved) = config_entries.iter().find(|e| e.manager == CLUSTERCTL) {
        j.levels.push((
            Level::Unknown,
            format!(
                "the config was written by clusterctl{} (a move or restore): its managedFields and every creation time start there, so older edits and launches are not seen",
                moved.time.map(|t| format!(" at {}", time::format(t))).unwrap_or_default()
            ),
        ));
    }
    if let Some(ancient) = config_entries
        .iter()
        .find(|e| e.manager == ANCIENT_CHANGES && owns_spec(e))
    {
        if ancient.time.is_none_or(|t| t > secret_created) {
            j.levels.push((
                Level::Unknown,
                "more than 10 Update managers were merged into ancient-changes: the time of an edit among them is lost".into(),
            ));
        }
    }
}

/// The last spec change by a person or the topology controller after the data Secret was
/// created (edits before it are in it); a write of only what the bootstrap controller fills
/// itself is none, whatever its manager is called.
fn last_edit<'e>(p: &Pool, d: &Data, config_entries: &'e [Entry]) -> Option<&'e Entry> {
    let secret_created = d.secret_created;
    config_entries
        .iter()
        .filter(|e| {
            owns_spec(e)
                && !CONTROLLER_MANAGERS.contains(&e.manager.as_str())
                && e.manager != ANCIENT_CHANGES
                && e.manager != CLUSTERCTL
                && !records::controller_filled(&p.kind, &leaf_paths(&e.fields, "spec"))
        })
        .filter(|e| e.time.is_some_and(|t| t > secret_created))
        .max_by_key(|e| e.time)
}

/// With no instance ages: whether the count can still be told.
fn no_instance_ages(p: &Pool, d: &Data, edit: Option<&Entry>, j: &mut Judgement) {
    let (config, pool, infra, infra_label) = (d.config, p.pool, &p.infra, &p.infra_label);
    let (replicas, secret_created, content_written) =
        (p.replicas, d.secret_created, d.content_written);
    let rotated = created(config)
        .zip(created(pool))
        .is_some_and(|(c, p)| c > p + ROTATION_GRACE)
        || created(pool).is_some_and(|p| secret_created > p + ROTATION_GRACE);
    let pending_everything = j.every_future
        || (edit.is_some() && content_written < edit.and_then(|e| e.time).unwrap_or(0));
    if replicas == Some(0) && !j.every_future {
        j.levels
            .push((Level::Exact, "the pool has no instances".into()));
    } else if pending_everything {
        // Every instance runs older data whatever its age.
    } else if edit.is_some() || rotated {
        j.levels.push((
            Level::Unknown,
            format!(
                "no MachinePool Machines and no instance ages ({}): which instances predate the data they should run is not known",
                infra.as_ref().and_then(|i| i.instance_kind).map_or_else(
                    || format!("{infra_label} makes none"),
                    |k| format!("no {k} either; CAPA makes them only behind its MachinePoolMachines feature gate")
                )
            ),
        ));
    } else {
        j.levels.push((
            Level::Exact,
            "no edit and no rotation since the pool was made".into(),
        ));
    }
}

/// The verdict, the confidence and the fix, from what the steps found.
fn verdict(
    inputs: &Inputs,
    p: &Pool,
    d: &Data,
    edit: Option<&Entry>,
    j: Judgement,
    report: &mut PoolReport,
) {
    let (instances, replicas) = (&p.instances, p.replicas);
    let (secret_created, content_written) = (d.secret_created, d.content_written);
    let certain = j.stale.values().filter(|s| s.certain).count();
    let pending_all = instances.is_empty()
        && edit.is_some_and(|e| e.time.is_some_and(|t| content_written < t))
        && replicas.is_some_and(|r| r > 0);
    let level = j
        .levels
        .iter()
        .map(|(l, _)| *l)
        .min()
        .unwrap_or(Level::Exact);
    report.verdict = if certain > 0 || j.every_future || (pending_all && level != Level::Unknown) {
        Verdict::Stale
    } else if !j.stale.is_empty() || level == Level::Unknown {
        Verdict::Unknown
    } else {
        Verdict::Current
    };
    report.instances.every_future = j.every_future;
    report.instances.stale = j.stale.into_values().collect();
    report
        .instances
        .stale
        .sort_by(|a, b| (a.launched, &a.name).cmp(&(b.launched, &b.name)));
    let mut reasons: Vec<String> = j
        .levels
        .iter()
        .filter(|(l, _)| *l == level)
        .map(|(_, r)| r.clone())
        .collect();
    if reasons.is_empty() {
        reasons.push(if instances.is_empty() {
            "no instance to compare".into()
        } else {
            format!(
                "{} launch times compared with the data Secret's creation ({}) and last write ({}) and the config's last edit",
                report.instances.source.clone().unwrap_or_default(),
                time::format(secret_created),
                time::format(content_written)
            )
        });
    }
    report.confidence = Confidence { level, reasons };
    report.causes = j.causes;
    if report.verdict != Verdict::Current {
        report.fix = fix_lines(inputs, report, j.reissue, j.roll, &j.wait);
    }
}
