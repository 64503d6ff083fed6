//! `capi-rollout-check roll`: put a MachinePool's current bootstrap data on its existing
//! instances where the infrastructure provider does not (CAPZ, CAPD): delete the MachinePool
//! Machines launched before the pool's data Secret, a few at a time, and let the provider
//! scale back up with the current data.
//!
//! Safety: RBAC is checked before the first write; one roll per pool (a Lease, lease.rs);
//! just before each delete the pool and its Machines are read again and the budget recomputed
//! from the pool's replicas as they are then, so the pool keeps at least replicas minus
//! maxUnavailable Ready Machines by roll's own deletes; after each step it waits for the
//! replacements to be Ready. Nothing is remembered between runs: each step is recomputed from
//! the cluster, so a run stopped by a timeout or Ctrl-C is resumed by running it again.

#![allow(clippy::result_large_err)]

pub mod lease;
pub mod plan;
pub mod pool;
pub mod report;
mod steps;

use std::fmt;
use std::io::Write;
use std::time::Duration;

use serde_json::Value;

use crate::cluster::{Cluster, ClusterError, Fault};
use crate::manifests::{key_of, ConfigRef};
use capi_rollout_check::drift::analysis::WorkerKind;
use lease::LEASES;
use plan::{Budget, MaxUnavailable};
use pool::{PoolInfra, Route, MACHINES, SECRETS};

pub const POOLS: &str = "machinepools.cluster.x-k8s.io";

/// Exit codes of `roll`.
pub const EXIT_BY_HAND: u8 = 1;
pub const EXIT_ERROR: u8 = 2;
pub const EXIT_TIMED_OUT: u8 = 3;
pub const EXIT_HELD: u8 = 4;
pub const EXIT_INTERRUPTED: u8 = 130;

/// Where maxUnavailable is read on the infrastructure object (CAPZ's AzureMachinePool).
const MAX_UNAVAILABLE: &str = "spec.strategy.rollingUpdate.maxUnavailable";

pub struct Request<'a> {
    /// `machinepool/NAME`.
    pub pool: &'a str,
    pub namespace: Option<&'a str>,
    pub dry_run: bool,
    /// How long each step may wait (for Ready Machines before a delete, for the replacement
    /// after it).
    pub timeout: Duration,
    /// Between polls.
    pub interval: Duration,
    /// Whether the person asked to stop (Ctrl-C).
    pub interrupted: &'a dyn Fn() -> bool,
    /// Take over the pool's Lease if it lapsed (a roll that stopped without releasing it).
    pub take_over: bool,
}

/// How a roll ended without an error.
#[derive(Debug, PartialEq, Eq)]
pub enum Rolled {
    /// Every stale Machine was replaced (this many).
    Replaced(usize),
    /// No Machine was launched before the data Secret.
    NothingToDo,
    DryRun,
    /// The provider replaces the instances itself, or never reads bootstrap data.
    NotNeeded,
    /// roll cannot do it on this infrastructure: the output says what to do.
    ByHand,
}

impl Rolled {
    pub fn exit_code(&self) -> u8 {
        match self {
            Rolled::ByHand => EXIT_BY_HAND,
            _ => 0,
        }
    }
}

#[derive(Debug)]
pub enum RollError {
    /// Unusable input or a state roll refuses to act in: nothing was deleted.
    Input(String),
    Cluster(ClusterError),
    /// An error the roll cannot go on from (a refused request, the pool gone): what was done,
    /// and how to go on.
    Stopped(String),
    /// A step's timeout passed: what was done, and how to go on.
    TimedOut(String),
    /// Another roll holds the pool's Lease (or took it over): who, since when.
    Held(String),
    /// Ctrl-C: what was done, and how to go on.
    Interrupted(String),
}

impl RollError {
    pub fn exit_code(&self) -> u8 {
        match self {
            RollError::Input(_) | RollError::Cluster(_) | RollError::Stopped(_) => EXIT_ERROR,
            RollError::TimedOut(_) => EXIT_TIMED_OUT,
            RollError::Held(_) => EXIT_HELD,
            RollError::Interrupted(_) => EXIT_INTERRUPTED,
        }
    }

    /// Worth another try: the API server busy or out of reach for a moment.
    fn transient(&self) -> bool {
        matches!(self, RollError::Cluster(e) if e.fault() == Fault::Transient)
    }
}

impl fmt::Display for RollError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RollError::Cluster(e) => e.fmt(f),
            RollError::Input(m)
            | RollError::Stopped(m)
            | RollError::TimedOut(m)
            | RollError::Held(m)
            | RollError::Interrupted(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for RollError {}

impl From<ClusterError> for RollError {
    fn from(e: ClusterError) -> Self {
        RollError::Cluster(e)
    }
}

/// `machinepool/pool-1` (`machinepools.cluster.x-k8s.io/pool-1`, `mp/pool-1`): the name.
fn pool_name(arg: &str) -> Result<&str, RollError> {
    match WorkerKind::of_arg(arg) {
        Some((WorkerKind::MachinePool, name)) => Ok(name),
        _ => Err(RollError::Input(format!(
            "{arg:?}: name the pool as machinepool/NAME"
        ))),
    }
}

/// Reads the pool: it exists and is not being deleted.
fn read_pool(cluster: &dyn Cluster, request: &Request) -> Result<Value, RollError> {
    let name = pool_name(request.pool)?;
    let where_ = request
        .namespace
        .map_or("the context's namespace".to_string(), |n| {
            format!("namespace {n}")
        });
    let pool = cluster
        .get(POOLS, request.namespace, name)?
        .ok_or_else(|| RollError::Input(format!("MachinePool {name} not found in {where_}")))?;
    if pool
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
    {
        return Err(RollError::Input(format!(
            "{} is being deleted (it has a deletionTimestamp): nothing to replace",
            key_of(&pool)
        )));
    }
    Ok(pool)
}

/// The pool's current data Secret and its creationTimestamp. Refuses while CAPI has not
/// copied the dataSecretName of the config the pool names: its instances would be replaced
/// with the older data.
fn data_secret(cluster: &dyn Cluster, pool: &Value) -> Result<(String, String), RollError> {
    let key = key_of(pool);
    let Some(secret) = pool::data_secret_name(pool) else {
        return Err(RollError::Input(format!(
            "{key} has no bootstrap dataSecretName yet (spec.template.spec.bootstrap.dataSecretName): \
             nothing to replace with; wait for CAPI to copy it"
        )));
    };
    if let Some(config) = ConfigRef::of(pool) {
        let resource = crate::cluster::resource_of(&config.kind, &config.group, None);
        let current = cluster.get(&resource, Some(&key.namespace), &config.name)?;
        let copied = current
            .as_ref()
            .and_then(|c| c.pointer("/status/dataSecretName"))
            .and_then(Value::as_str);
        if copied != Some(secret) {
            return Err(RollError::Input(format!(
                "{key}: CAPI has not copied {} {}'s dataSecretName into the pool yet (the pool has \
                 {secret}, the config {}): the replacements would boot with older data; \
                 re-run once it has (kubectl describe {POOLS} {} -n {})",
                config.kind,
                config.name,
                copied.unwrap_or("none"),
                key.name,
                key.namespace
            )));
        }
    }
    let created = pool::secret_created(cluster, &key.namespace, secret)?.ok_or_else(|| {
        RollError::Input(format!(
            "{key}: its data Secret {secret} does not exist in namespace {}",
            key.namespace
        ))
    })?;
    Ok((secret.to_string(), created))
}

/// `kubectl auth can-i` for every verb roll uses, before the first write: the Machines, the
/// data Secret, and the Lease that holds other rolls off.
pub fn check_rbac(cluster: &dyn Cluster, namespace: &str) -> Result<(), RollError> {
    for (verb, resource) in [
        ("list", MACHINES),
        ("get", SECRETS),
        ("delete", MACHINES),
        ("create", LEASES),
        ("get", LEASES),
        ("patch", LEASES),
        ("delete", LEASES),
    ] {
        if !cluster.can_i(verb, resource, namespace)? {
            return Err(ClusterError::Forbidden {
                verb: verb.into(),
                resource: resource.into(),
                namespace: namespace.into(),
                message: format!("kubectl auth can-i {verb} {resource} -n {namespace}: no"),
            }
            .into());
        }
    }
    Ok(())
}

/// The pool's maxUnavailable, as its infrastructure object writes it: absent (or the object
/// unread), 1.
fn max_unavailable(infra: &PoolInfra) -> Result<MaxUnavailable, RollError> {
    MaxUnavailable::parse(infra.field(MAX_UNAVAILABLE))
        .map_err(|e| RollError::Input(format!("{} {MAX_UNAVAILABLE}: {e}", infra.name())))
}

/// The budget for `replicas`, and how to say it: `maxUnavailable 1`, `maxUnavailable 25% of 4 = 1`.
fn budget(max: MaxUnavailable, replicas: u32) -> (Budget, String) {
    let budget = Budget::new(replicas, max);
    let said = match max {
        MaxUnavailable::Count(n) if n == budget.max_unavailable => format!("maxUnavailable {n}"),
        MaxUnavailable::Count(n) => format!(
            "maxUnavailable {n} (taken as {}: roll deletes before the provider creates)",
            budget.max_unavailable
        ),
        MaxUnavailable::Percent(p) => format!(
            "maxUnavailable {p}% of {replicas} = {}",
            budget.max_unavailable
        ),
    };
    (budget, said)
}

/// Before the first write, a cluster that does not answer is said as such.
fn before_writing(e: RollError) -> RollError {
    if e.transient() {
        return RollError::Input(format!(
            "the cluster did not answer: {e}; nothing was written"
        ));
    }
    e
}

/// Replaces the stale Machines of the pool `request` names. Writes what it does to `out`.
pub fn roll(
    cluster: &dyn Cluster,
    request: &Request,
    out: &mut dyn Write,
) -> Result<Rolled, RollError> {
    let pool = read_pool(cluster, request).map_err(before_writing)?;
    let key = key_of(&pool);
    let Some(infra) = pool::read(cluster, &pool, &key.namespace) else {
        return Err(RollError::Input(format!(
            "{key} has no spec.template.spec.infrastructureRef: roll cannot tell how to replace its instances"
        )));
    };
    match infra.route() {
        Route::DeleteMachines => {}
        Route::Unread { depends_on, why } => {
            return Err(RollError::Input(format!(
                "{}; roll deletes nothing",
                infra.unread_line(&depends_on, &why)
            )))
        }
        route => return Ok(not_by_deleting(&infra, route, out)),
    }
    check_rbac(cluster, &key.namespace).map_err(before_writing)?;
    let (secret, created) = data_secret(cluster, &pool).map_err(before_writing)?;
    let max = max_unavailable(&infra)?;
    let target = steps::Target {
        namespace: key.namespace.clone(),
        pool: key.name.clone(),
        secret,
        created,
        max,
        infra: infra.named(),
        unread: infra.unread.clone(),
    };
    if request.dry_run {
        return Ok(
            match target.plan(cluster, &pool, out).map_err(before_writing)? {
                steps::Planned::Nothing => Rolled::NothingToDo,
                steps::Planned::Steps { .. } => {
                    let _ = writeln!(out, "(dry run) nothing was deleted");
                    Rolled::DryRun
                }
            },
        );
    }
    let held = lease::acquire(
        cluster,
        &key.namespace,
        &key.name,
        &lease::identity(),
        request.take_over,
    )
    .map_err(before_writing)?;
    let rolled = target
        .plan(cluster, &pool, out)
        .map_err(before_writing)
        .and_then(|planned| match planned {
            steps::Planned::Nothing => Ok(Rolled::NothingToDo),
            steps::Planned::Steps { replicas } => {
                steps::run(cluster, request, (&target, replicas), &held, out)
            }
        });
    release(cluster, &held, rolled, out)
}

/// Releases the Lease whatever the roll's end; one that cannot be released is said, with when
/// it lapses and how the next roll takes it.
fn release(
    cluster: &dyn Cluster,
    held: &lease::Lease,
    rolled: Result<Rolled, RollError>,
    out: &mut dyn Write,
) -> Result<Rolled, RollError> {
    if matches!(rolled, Err(RollError::Held(_))) {
        // Taken over or deleted by someone else: not this roll's to release.
        return rolled;
    }
    let Err(e) = held.release(cluster) else {
        return rolled;
    };
    let left = format!(
        "{} is left ({e}): it lapses at {} (60s after its last renewal); then the next roll \
         takes it with --take-over",
        held.shown(),
        held.lapses_at()
    );
    match rolled {
        Ok(done) => {
            let _ = writeln!(out, "{left}");
            Ok(done)
        }
        Err(RollError::Stopped(m)) => Err(RollError::Stopped(format!("{m}; {left}"))),
        Err(RollError::TimedOut(m)) => Err(RollError::TimedOut(format!("{m}; {left}"))),
        Err(RollError::Interrupted(m)) => Err(RollError::Interrupted(format!("{m}; {left}"))),
        Err(RollError::Input(m)) => Err(RollError::Input(format!("{m}; {left}"))),
        Err(other) => Err(RollError::Stopped(format!("{other}; {left}"))),
    }
}

/// What `roll` prints, and returns, on an infrastructure where deleting Machines is not the way.
fn not_by_deleting(infra: &PoolInfra, route: Route, out: &mut dyn Write) -> Rolled {
    let named = infra.named();
    let (line, rolled) = match route {
        Route::Provider { disabled_by } => (
            format!(
                "{named} replaces the instances itself on a rotation ({}){}: roll deletes nothing",
                infra.replaces_them(),
                disabled_by.map_or(String::new(), |p| format!("; {p}: true turns that off"))
            ),
            Rolled::NotNeeded,
        ),
        Route::ProviderDisabled { by } => (
            format!(
                "{named} has {by}: true, so it replaces no instance on a rotation; roll cannot replace \
                 them from the management cluster: start an instance refresh of its Auto Scaling \
                 group, or unset {by} before the next rotation"
            ),
            Rolled::ByHand,
        ),
        Route::NotRead { .. } => (
            format!("{named} never reads bootstrap data: nothing to replace"),
            Rolled::NotNeeded,
        ),
        Route::Manual { instructions } => (
            format!("{named}: roll cannot replace its instances from the management cluster: {instructions}"),
            Rolled::ByHand,
        ),
        Route::Unknown => (
            format!(
                "{}: capi-rollout-check does not know this infrastructure kind ({}): roll cannot \
                 tell how to replace its instances",
                infra.name(),
                infra.reference.group
            ),
            Rolled::ByHand,
        ),
        Route::DeleteMachines | Route::Unread { .. } => unreachable!("handled by roll"),
    };
    let _ = writeln!(out, "{line}");
    rolled
}

#[cfg(test)]
mod tests;
