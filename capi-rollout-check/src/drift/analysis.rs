//! The drift of each MachinePool, from the listed objects alone: pure, no I/O.
//!
//! An instance's launch is its MachinePool Machine's `creationTimestamp` (or its infrastructure
//! machine's). What its bootstrap data held is read from two times: the data Secret's
//! `creationTimestamp` (a rotation makes a new Secret) and the last write of its `data`
//! (its `managedFields`), and the time of the config's last spec change by anyone but a
//! controller (the config's `managedFields`). An instance launched before the data it should run
//! was written runs older data.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use super::records::{self, Bootstrap, Effect, Infra, Rendering};
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

/// The listed objects, as kubectl returned them (`--show-managed-fields`).
#[derive(Default)]
pub struct Inputs<'a> {
    /// Unix seconds.
    pub now: i64,
    pub pools: &'a [Value],
    /// Bootstrap configs of every kind in use.
    pub configs: &'a [Value],
    pub secrets: &'a [Value],
    /// CAPI Machines labelled `cluster.x-k8s.io/pool-name`.
    pub machines: &'a [Value],
    /// Infrastructure MachinePools (AzureMachinePool...), for their knobs.
    pub infra_pools: &'a [Value],
    /// Infrastructure machines of pools (AzureMachinePoolMachine...), for instance ages when a
    /// pool has no MachinePool Machines.
    pub infra_instances: &'a [Value],
    /// How the printed commands reach the same cluster (` --context prod`), or empty.
    pub cluster_flags: String,
    /// `rotate --reissue` exists: the fix rotates with it, else with kubectl.
    pub reissue_flag: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    Current,
    Stale,
    Unknown,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Current => "current",
            Verdict::Stale => "stale",
            Verdict::Unknown => "unknown",
        }
    }
}

/// How sure the count is; ordered from least to most sure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Unknown,
    Bounded,
    Exact,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::Exact => "exact",
            Level::Bounded => "bounded",
            Level::Unknown => "unknown",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Confidence {
    pub level: Level,
    /// Why, in words: what was compared, the bound, or what is missing.
    pub reasons: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StaleBecause {
    /// Launched before the edit of the config.
    Edit,
    /// Launched between the edit and the data Secret's write: old or new data.
    RenderWindow,
    /// Launched before the current data Secret was created (a rotation not rolled).
    Rotation,
    /// Launched after the edit, from a data Secret that does not hold it.
    DataWithoutEdit,
}

impl StaleBecause {
    pub fn name(self) -> &'static str {
        match self {
            StaleBecause::Edit => "launched-before-edit",
            StaleBecause::RenderWindow => "launched-while-rendering",
            StaleBecause::Rotation => "launched-before-data-secret",
            StaleBecause::DataWithoutEdit => "launched-from-data-without-edit",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instance {
    pub name: String,
    /// `Machine`, or the infrastructure machine's kind.
    pub kind: String,
    pub launched: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StaleInstance {
    pub name: String,
    pub launched: i64,
    pub because: StaleBecause,
    /// False: it may have the new data (launched while the provider was rendering).
    pub certain: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Instances {
    /// Where the ages came from (`Machine`, `AzureMachinePoolMachine`), or None: no ages.
    pub source: Option<String>,
    /// M: the instances seen, or the pool's `status.replicas` when none is seen.
    pub total: Option<u64>,
    pub stale: Vec<StaleInstance>,
    /// Every instance, now and future, runs older data until a rotation.
    pub every_future: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CauseKind {
    InPlaceEdit,
    TopologyPatch,
    RotationNotRolled,
}

impl CauseKind {
    pub fn name(&self) -> &'static str {
        match self {
            CauseKind::InPlaceEdit => "in-place-edit",
            CauseKind::TopologyPatch => "topology-patch",
            CauseKind::RotationNotRolled => "rotation-not-rolled",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cause {
    pub kind: CauseKind,
    /// The edit's field manager and operation (Update, Apply); none for a rotation.
    pub manager: Option<String>,
    pub operation: Option<String>,
    /// The edit's time, or the data Secret's creation for a rotation.
    pub time: Option<i64>,
    /// The fields an Update manager owns under spec (the fields it changed); for an Apply
    /// manager its applied set (`paths_are_applied_set`).
    pub paths: Vec<String>,
    pub paths_are_applied_set: bool,
    /// Whether the data Secret was written after the edit; None for a rotation.
    pub in_data_secret: Option<bool>,
    /// The infrastructure replaces the instances itself (an instance refresh): wait.
    pub replaced_by_provider: bool,
    pub summary: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigInfo {
    pub group: String,
    pub kind: String,
    pub name: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretInfo {
    pub name: String,
    pub created: Option<i64>,
    /// The last write of its `data` (managedFields), else its creation.
    pub content_written: Option<i64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    pub cluster: Option<String>,
    pub pool: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolReport {
    pub namespace: String,
    pub name: String,
    pub config: ConfigInfo,
    pub bootstrap: Option<Bootstrap>,
    pub infra_kind: Option<String>,
    pub infra: Option<Infra>,
    pub data_secret: Option<SecretInfo>,
    pub verdict: Verdict,
    pub confidence: Confidence,
    pub instances: Instances,
    pub causes: Vec<Cause>,
    pub topology: Option<Topology>,
    /// Runnable commands (a `#` line is what to do by hand).
    pub fix: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub now: i64,
    pub pools: Vec<PoolReport>,
}

impl Report {
    pub fn count(&self, verdict: Verdict) -> usize {
        self.pools.iter().filter(|p| p.verdict == verdict).count()
    }
}

fn s<'v>(value: &'v Value, path: &[&str]) -> Option<&'v str> {
    path.iter().try_fold(value, |v, k| v.get(k))?.as_str()
}

fn meta<'v>(object: &'v Value, key: &str) -> Option<&'v str> {
    s(object, &["metadata", key])
}

fn label<'v>(object: &'v Value, key: &str) -> Option<&'v str> {
    object.get("metadata")?.get("labels")?.get(key)?.as_str()
}

fn created(object: &Value) -> Option<i64> {
    meta(object, "creationTimestamp").and_then(time::parse)
}

pub fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

/// `{apiGroup|apiVersion, kind, name}` of a reference.
fn reference(r: &Value) -> Option<(String, String, String)> {
    let group = r
        .get("apiGroup")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| {
            r.get("apiVersion")
                .and_then(Value::as_str)
                .map(|v| group_of(v).to_string())
        })
        .unwrap_or_default();
    Some((
        group,
        r.get("kind")?.as_str()?.to_string(),
        r.get("name")?.as_str()?.to_string(),
    ))
}

type Key = (String, String, String);

fn key(kind: &str, ns: &str, name: &str) -> Key {
    (kind.to_string(), ns.to_string(), name.to_string())
}

struct Index<'a> {
    configs: HashMap<Key, &'a Value>,
    secrets: HashMap<(String, String), &'a Value>,
    infra_pools: HashMap<Key, &'a Value>,
    /// (namespace, pool name) -> instances.
    machines: HashMap<(String, String), Vec<Instance>>,
    /// (namespace, pool name or infra pool name) -> instances, by label or owner.
    infra_instances: HashMap<(String, String), Vec<Instance>>,
}

fn instance_of(object: &Value) -> Option<Instance> {
    if object.pointer("/metadata/deletionTimestamp").is_some() {
        return None;
    }
    Some(Instance {
        name: meta(object, "name")?.to_string(),
        kind: object
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("Machine")
            .to_string(),
        launched: created(object)?,
    })
}

impl<'a> Index<'a> {
    fn new(inputs: &Inputs<'a>) -> Self {
        let by_kind = |objects: &'a [Value]| {
            objects
                .iter()
                .filter_map(|o| {
                    Some((
                        key(
                            o.get("kind")?.as_str()?,
                            meta(o, "namespace").unwrap_or(""),
                            meta(o, "name")?,
                        ),
                        o,
                    ))
                })
                .collect::<HashMap<_, _>>()
        };
        let mut machines: HashMap<(String, String), Vec<Instance>> = HashMap::new();
        for m in inputs.machines {
            if let (Some(pool), Some(i)) = (label(m, POOL_NAME_LABEL), instance_of(m)) {
                machines
                    .entry((meta(m, "namespace").unwrap_or("").into(), pool.into()))
                    .or_default()
                    .push(i);
            }
        }
        let mut infra_instances: HashMap<(String, String), Vec<Instance>> = HashMap::new();
        for m in inputs.infra_instances {
            let Some(i) = instance_of(m) else { continue };
            let ns = meta(m, "namespace").unwrap_or("").to_string();
            let mut owners: Vec<String> = label(m, POOL_NAME_LABEL)
                .map(str::to_string)
                .into_iter()
                .collect();
            for o in m
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(name) = o.get("name").and_then(Value::as_str) {
                    if o.get("kind")
                        .and_then(Value::as_str)
                        .is_some_and(|k| k.ends_with("MachinePool"))
                    {
                        owners.push(name.to_string());
                    }
                }
            }
            owners.dedup();
            for owner in owners {
                infra_instances
                    .entry((ns.clone(), owner))
                    .or_default()
                    .push(i.clone());
            }
        }
        Index {
            configs: by_kind(inputs.configs),
            secrets: inputs
                .secrets
                .iter()
                .filter_map(|o| {
                    Some((
                        (
                            meta(o, "namespace").unwrap_or("").to_string(),
                            meta(o, "name")?.to_string(),
                        ),
                        o,
                    ))
                })
                .collect(),
            infra_pools: by_kind(inputs.infra_pools),
            machines,
            infra_instances,
        }
    }
}

/// One `managedFields` entry.
#[derive(Clone, Debug)]
struct Entry {
    manager: String,
    operation: String,
    time: Option<i64>,
    fields: Value,
}

fn entries(object: &Value) -> Vec<Entry> {
    object
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|e| {
            e.get("subresource")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty()
        })
        .map(|e| Entry {
            manager: e
                .get("manager")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            operation: e
                .get("operation")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            time: e.get("time").and_then(Value::as_str).and_then(time::parse),
            fields: e.get("fieldsV1").cloned().unwrap_or(Value::Null),
        })
        .collect()
}

/// The leaf paths of a fieldsV1 set under `top` (`f:spec`), as `spec.files[path=/x].content`.
pub fn leaf_paths(fields: &Value, top: &str) -> Vec<String> {
    fn walk(node: &Value, path: String, out: &mut Vec<String>) {
        let Some(map) = node.as_object() else {
            out.push(path);
            return;
        };
        let children: Vec<_> = map.iter().filter(|(k, _)| k.as_str() != ".").collect();
        if children.is_empty() {
            out.push(path);
            return;
        }
        for (k, v) in children {
            let step = if let Some(f) = k.strip_prefix("f:") {
                format!(".{f}")
            } else if let Some(keyed) = k.strip_prefix("k:") {
                let item: Value = serde_json::from_str(keyed).unwrap_or(Value::Null);
                let inner = item
                    .as_object()
                    .map(|o| {
                        o.iter()
                            .map(|(k, v)| {
                                format!(
                                    "{k}={}",
                                    v.as_str().map_or_else(|| v.to_string(), str::to_string)
                                )
                            })
                            .collect::<Vec<_>>()
                            .join(",")
                    })
                    .unwrap_or_else(|| keyed.to_string());
                format!("[{inner}]")
            } else if let Some(v) = k.strip_prefix("v:") {
                format!("[={v}]")
            } else if let Some(i) = k.strip_prefix("i:") {
                format!("[{i}]")
            } else {
                format!(".{k}")
            };
            walk(v, format!("{path}{step}"), out);
        }
    }
    let mut out = Vec::new();
    if let Some(node) = fields.get(format!("f:{top}")) {
        walk(node, top.to_string(), &mut out);
    }
    out
}

fn owns_spec(e: &Entry) -> bool {
    e.fields.get("f:spec").is_some()
}

fn owns_data(e: &Entry) -> bool {
    e.fields.get("f:data").is_some() || e.fields.get("f:stringData").is_some()
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The config kind's kubectl resource: `kubeadmconfigs.bootstrap.cluster.x-k8s.io`.
pub fn resource(kind: &str, group: &str) -> String {
    if group.is_empty() {
        format!("{}s", kind.to_lowercase())
    } else {
        format!("{}s.{group}", kind.to_lowercase())
    }
}

/// A fresh name for the same spec (drift's fix, `rotate --reissue`): the policy's
/// `<base>-<8 hex>` scheme, the hex an FNV-1a hash of "reissue", the current name and the time
/// `now` (seconds); never the current name (on a clash the hash takes a counter too).
pub fn reissue_name(current: &str, now: i64) -> String {
    let name = |salt: u32| {
        let mut text = format!("reissue\0{current}\0{now}");
        if salt > 0 {
            text.push_str(&format!("\0{salt}"));
        }
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for b in text.bytes() {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        capi_bootstrap_rollout_policy::fingerprint::suggested_name(current, &format!("{hash:016x}"))
    };
    fresh_name(current, name)
}

/// The first of `candidates(0)`, `candidates(1)`, ... that is not `current`.
pub(crate) fn fresh_name(current: &str, candidates: impl Fn(u32) -> String) -> String {
    (0..)
        .map(candidates)
        .find(|n| n != current)
        .unwrap_or_default()
}

pub fn analyze(inputs: &Inputs) -> Report {
    let index = Index::new(inputs);
    let mut pools: Vec<PoolReport> = inputs
        .pools
        .iter()
        .filter_map(|pool| analyze_pool(inputs, &index, pool))
        .collect();
    pools.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
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
        });
    }
}

fn unknown_pool(base: PoolReport, reason: String) -> Option<PoolReport> {
    Some(PoolReport {
        verdict: Verdict::Unknown,
        confidence: Confidence {
            level: Level::Unknown,
            reasons: vec![reason],
        },
        ..base
    })
}

fn analyze_pool(inputs: &Inputs, index: &Index, pool: &Value) -> Option<PoolReport> {
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
        namespace: ns.clone(),
        name: name.clone(),
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

    if deleting {
        return unknown_pool(report, "the pool is being deleted".into());
    }
    if let Some(infra) = infra.as_ref().filter(|i| !i.reads) {
        report.confidence.reasons.push(format!(
            "{} never reads bootstrap data: its instances boot without it",
            infra.kind
        ));
        return Some(report);
    }
    let Some(config) = index.configs.get(&key(&kind, &ns, &config_name)).copied() else {
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

    let mut j = Judgement {
        stale: BTreeMap::new(),
        every_future: false,
        levels: Vec::new(),
        causes: Vec::new(),
        reissue: false,
        roll: false,
        wait: Vec::new(),
    };
    let config_entries = entries(config);
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

    // The last spec change by a person or the topology controller after the data Secret was
    // created (edits before it are in it).
    let edit = config_entries
        .iter()
        .filter(|e| {
            owns_spec(e)
                && !CONTROLLER_MANAGERS.contains(&e.manager.as_str())
                && e.manager != ANCIENT_CHANGES
                && e.manager != CLUSTERCTL
                && !records::controller_filled(&kind, &leaf_paths(&e.fields, "spec"))
        })
        .filter(|e| e.time.is_some_and(|t| t > secret_created))
        .max_by_key(|e| e.time);
    let infra_label = infra
        .as_ref()
        .map(|i| i.kind.clone())
        .or_else(|| report.infra_kind.clone())
        .unwrap_or_else(|| "its infrastructure".into());

    if let Some(edit) = edit {
        let at = edit.time.unwrap_or_default();
        let in_secret = content_written >= at;
        let topology_patch = edit.manager == TOPOLOGY_MANAGER;
        let mut summary = format!(
            "{} of {kind} {config_name} by {} ({}) at {}",
            if topology_patch {
                "topology patch"
            } else {
                "in-place edit"
            },
            edit.manager,
            edit.operation,
            time::format(at)
        );
        let paths = leaf_paths(&edit.fields, "spec");
        // Instances launched before the edit never got it.
        for i in instances
            .iter()
            .filter(|i| i.launched < at && i.launched >= secret_created)
        {
            j.mark(i, StaleBecause::Edit, true);
        }
        let token_discovery = config
            .pointer("/spec/joinConfiguration/discovery/bootstrapToken")
            .is_some()
            && config
                .pointer("/spec/joinConfiguration/discovery/file")
                .is_none();
        let node_refs = pool
            .pointer("/status/nodeRefs")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty());
        let mut rerendered = in_secret;
        if in_secret {
            summary.push_str(&format!(
                "; in the data Secret since {} at the latest",
                time::format(content_written)
            ));
            // Launched between the edit and the write that carried it: old data or new.
            let window_end = match bootstrap.map(|b| b.rendering) {
                Some(Rendering::AtTokenRotation) if token_discovery => {
                    content_written.min(at + TOKEN_ROTATION_BOUND)
                }
                _ => content_written,
            };
            let window: Vec<&Instance> = instances
                .iter()
                .filter(|i| i.launched >= at && i.launched < window_end)
                .collect();
            for i in &window {
                j.mark(i, StaleBecause::RenderWindow, false);
            }
            if !window.is_empty() {
                j.levels.push((
                    Level::Bounded,
                    format!(
                        "{} launched between the edit ({}) and the data Secret's write (by {}): each has the old data or the new",
                        plural(window.len(), "instance", "instances"),
                        time::format(at),
                        time::format(window_end)
                    ),
                ));
            }
        } else {
            summary.push_str(&format!(
                "; not in the data Secret (last written {})",
                time::format(content_written)
            ));
            for i in &instances {
                if i.launched >= at {
                    j.mark(i, StaleBecause::DataWithoutEdit, true);
                }
            }
            match bootstrap {
                Some(Bootstrap {
                    rendering: Rendering::Once,
                    provider,
                }) => {
                    j.every_future = true;
                    j.levels.push((
                        Level::Exact,
                        format!("{kind} ({provider}) renders its data Secret once: the edit reaches no instance, not even new ones, until a rotation"),
                    ));
                }
                Some(Bootstrap {
                    rendering: Rendering::AtTokenRotation,
                    ..
                }) => {
                    if !(node_refs && token_discovery) {
                        j.every_future = true;
                        j.levels.push((
                            Level::Exact,
                            format!(
                                "CABPK re-renders a MachinePool's data Secret only at a token rotation, while the pool has nodeRefs and uses token discovery; this pool {}: no instance, now or future, gets the edit until a rotation",
                                if !token_discovery { "uses file discovery" } else { "has no nodeRefs" }
                            ),
                        ));
                    } else if now < at + TOKEN_ROTATION_BOUND {
                        rerendered = true;
                        j.levels.push((
                            Level::Bounded,
                            format!(
                                "CABPK writes the edit into the data Secret at its next token rotation, by {} (10-12.5 min after the edit); instances launched until then take the old data too",
                                time::format(at + TOKEN_ROTATION_BOUND)
                            ),
                        ));
                    } else {
                        j.every_future = true;
                        j.levels.push((
                            Level::Unknown,
                            format!(
                                "CABPK should have re-rendered the data Secret by {} and has not: is its controller running?",
                                time::format(at + TOKEN_ROTATION_BOUND)
                            ),
                        ));
                    }
                }
                Some(Bootstrap {
                    rendering: Rendering::EveryReconcile,
                    ..
                }) => {
                    if now < at + RECONCILE_BOUND {
                        rerendered = true;
                        j.levels.push((
                            Level::Bounded,
                            format!(
                                "{kind} writes the edit into the data Secret at its next reconcile, by about {}",
                                time::format(at + RECONCILE_BOUND)
                            ),
                        ));
                    } else {
                        // No write: the rendered bytes did not change, or nothing reconciles.
                        for i in &instances {
                            if let Some(s) = j.stale.get_mut(&i.name) {
                                s.certain = false;
                            }
                        }
                        j.levels.push((
                            Level::Unknown,
                            format!(
                                "{kind} re-renders on every reconcile and writes only changed bytes: no write since the edit means it changed nothing in the data (a field the provider ignores) or its controller is not reconciling"
                            ),
                        ));
                    }
                }
                None => {
                    j.every_future = true;
                    j.levels.push((
                        Level::Unknown,
                        format!("{kind}'s bootstrap provider is not in the records: when it renders an edit is not known"),
                    ));
                }
            }
        }
        let edit_stale = !j.stale.is_empty() || j.every_future;
        if edit_stale {
            let refreshes = infra
                .as_ref()
                .is_some_and(|i| i.on_content_change == Effect::ReplacesExisting);
            if refreshes && rerendered {
                j.wait.push(format!(
                    "# {infra_label} replaces every instance once the data Secret changes: wait for it (kubectl get {} -n {ns})",
                    infra_label.to_lowercase()
                ));
            } else {
                j.reissue = true;
            }
            if !rerendered {
                // Nothing will put the edit into the data: only a rotation does.
                j.reissue = true;
            }
        }
        j.causes.push(Cause {
            kind: if topology_patch {
                CauseKind::TopologyPatch
            } else {
                CauseKind::InPlaceEdit
            },
            manager: Some(edit.manager.clone()),
            operation: Some(edit.operation.clone()),
            time: edit.time,
            paths_are_applied_set: edit.operation == "Apply",
            paths,
            in_data_secret: Some(in_secret),
            replaced_by_provider: false,
            summary,
        });
    }

    // A rotation the infrastructure did not roll: instances older than the data Secret.
    let before: Vec<&Instance> = instances
        .iter()
        .filter(|i| i.launched < secret_created)
        .collect();
    if !before.is_empty() {
        for i in &before {
            j.mark(i, StaleBecause::Rotation, true);
        }
        let effect = infra.as_ref().map(|i| i.on_rotation);
        let replaced = effect == Some(Effect::ReplacesExisting);
        let mut summary = format!(
            "rotation to {config_name} (data Secret {secret_name} created {}): {} launched before it",
            time::format(secret_created),
            plural(before.len(), "instance", "instances")
        );
        match effect {
            Some(Effect::ReplacesExisting) => {
                summary.push_str(&format!(
                    "; {infra_label} replaces them itself (instance refresh)"
                ));
                j.wait.push(format!(
                    "# {infra_label} replaces them itself (an instance refresh): wait, and watch kubectl get {} {} -n {ns}",
                    infra_label.to_lowercase(),
                    infra_ref.as_ref().map(|r| r.2.as_str()).unwrap_or(&name)
                ));
            }
            Some(_) => {
                summary.push_str(&format!(
                    "; {infra_label} replaces no existing instance on a rotation"
                ));
                j.roll = true;
            }
            None => {
                summary.push_str(&format!(
                    "; what {infra_label} does on a rotation is not in the records"
                ));
                j.levels.push((Level::Unknown, format!("{infra_label} is not in the infrastructure records: whether it replaces instances itself is not known")));
                j.roll = true;
            }
        }
        j.causes.push(Cause {
            kind: CauseKind::RotationNotRolled,
            manager: None,
            operation: None,
            time: Some(secret_created),
            paths: Vec::new(),
            paths_are_applied_set: false,
            in_data_secret: None,
            replaced_by_provider: replaced,
            summary,
        });
    }
    if j.reissue
        && infra
            .as_ref()
            .is_some_and(|i| i.on_rotation == Effect::NewInstancesOnly)
    {
        j.roll = true;
    }

    // No instance ages.
    if instances.is_empty() {
        report.instances.source = None;
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

    // The verdict.
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
        report.fix = fix_lines(inputs, &report, j.reissue, j.roll, &j.wait);
    }
    Some(report)
}

fn fix_lines(
    inputs: &Inputs,
    report: &PoolReport,
    reissue: bool,
    roll: bool,
    wait: &[String],
) -> Vec<String> {
    let (ns, name, flags) = (&report.namespace, &report.name, &inputs.cluster_flags);
    if let Some(topology) = &report.topology {
        let cluster = topology.cluster.as_deref().unwrap_or("<cluster>");
        return vec![
            format!(
                "# a ClusterClass pool: rotate nothing by hand (it stops the topology controller for the whole Cluster). Add a MachinePool topology (the same class, a new name) to Cluster {cluster}'s spec.topology.workers.machinePools, move the workloads, then remove {} (docs/clusterclass.md):",
                topology.pool.as_deref().map_or_else(|| "the old entry".to_string(), |p| format!("the entry {p}"))
            ),
            format!("kubectl edit clusters.cluster.x-k8s.io {cluster} -n {ns}{flags}"),
        ];
    }
    let mut lines = Vec::new();
    if reissue {
        if inputs.reissue_flag {
            lines.push(format!(
                "capi-rollout-check rotate machinepool/{name} -n {ns} --reissue{flags}"
            ));
        } else {
            let resource = resource(&report.config.kind, &report.config.group);
            let old = &report.config.name;
            let new = reissue_name(old, inputs.now);
            let mut strip = String::from(
                "del(.metadata.uid, .metadata.resourceVersion, .metadata.creationTimestamp, .metadata.generation, .metadata.managedFields, .metadata.ownerReferences, .status",
            );
            if report.config.kind == "KubeadmConfig" {
                strip.push_str(", .spec.joinConfiguration.discovery.bootstrapToken.token");
            }
            lines.push(format!(
                "kubectl get {resource} {old} -n {ns}{flags} -o json | jq '{strip}) | .metadata.name = \"{new}\"' | kubectl create -f - -n {ns}{flags}"
            ));
            let path = "/spec/template/spec/bootstrap/configRef/name";
            lines.push(format!(
                "kubectl patch machinepools.cluster.x-k8s.io {name} -n {ns}{flags} --type json -p '[{{\"op\":\"test\",\"path\":\"{path}\",\"value\":\"{old}\"}},{{\"op\":\"replace\",\"path\":\"{path}\",\"value\":\"{new}\"}}]'"
            ));
        }
    }
    lines.extend(wait.iter().cloned());
    if roll {
        if reissue {
            lines.push(format!("# once CAPI has copied the new dataSecretName into the pool ({}: existing instances keep their data):", report.infra_kind.as_deref().unwrap_or("the infrastructure")));
        }
        match report.infra.as_ref() {
            Some(infra) if infra.deletes_machines => {
                lines.push(format!("capi-rollout-check roll machinepool/{name} -n {ns}{flags}"))
            }
            Some(infra) if infra.replacement_disabled_by.is_some() => lines.push(format!(
                "# {} has {}: true, so it replaces no instance on a rotation: start an instance refresh of its Auto Scaling group, or unset it before the rotation",
                infra.kind,
                infra.replacement_disabled_by.unwrap_or_default()
            )),
            Some(infra) => lines.push(format!(
                "# {}: no MachinePool Machine to delete for it; by hand: {}",
                infra.kind,
                infra.manual.unwrap_or("replace the instances from the provider's side")
            )),
            None => lines.push(format!(
                "# {} is not in the infrastructure records: replace the instances launched before the data Secret as its provider allows",
                report.infra_kind.as_deref().unwrap_or("the infrastructure")
            )),
        }
    }
    lines
}
