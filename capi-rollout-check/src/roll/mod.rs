//! `capi-rollout-check roll`: put a MachinePool's current bootstrap data on its existing
//! instances where the infrastructure provider does not (CAPZ, CAPD): delete the MachinePool
//! Machines launched before the pool's data Secret, a few at a time, and let the provider
//! scale back up with the current data.
//!
//! Safety: RBAC is checked before the first delete; before each delete the pool keeps at least
//! replicas minus maxUnavailable Ready Machines; after each delete it waits for the
//! replacement to be Ready. Nothing is remembered between runs: each step is recomputed from
//! the cluster, so a run stopped by a timeout or Ctrl-C is resumed by running it again.

#![allow(clippy::result_large_err)]

pub mod plan;
pub mod pool;
pub mod report;

use std::fmt;
use std::io::Write;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::rotate::cluster::{Cluster, ClusterError};
use crate::rotate::plan::{key_of, ConfigRef};
use plan::{fresh_ready, next, plural, ready_count, Budget, Instance, MaxUnavailable, Next};
use pool::{PoolInfra, Route, MACHINES, SECRETS};

pub const POOLS: &str = "machinepools.cluster.x-k8s.io";

/// Exit codes of `roll`.
pub const EXIT_BY_HAND: u8 = 1;
pub const EXIT_ERROR: u8 = 2;
pub const EXIT_TIMED_OUT: u8 = 3;
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
    /// A step's timeout passed: what was done, and how to go on.
    TimedOut(String),
    /// Ctrl-C: what was done, and how to go on.
    Interrupted(String),
}

impl RollError {
    pub fn exit_code(&self) -> u8 {
        match self {
            RollError::Input(_) | RollError::Cluster(_) => EXIT_ERROR,
            RollError::TimedOut(_) => EXIT_TIMED_OUT,
            RollError::Interrupted(_) => EXIT_INTERRUPTED,
        }
    }
}

impl fmt::Display for RollError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RollError::Cluster(e) => e.fmt(f),
            RollError::Input(m) | RollError::TimedOut(m) | RollError::Interrupted(m) => {
                f.write_str(m)
            }
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
    let usage = || RollError::Input(format!("{arg:?}: name the pool as machinepool/NAME"));
    let (kind, name) = arg.split_once('/').ok_or_else(usage)?;
    let kind = kind.strip_suffix(".cluster.x-k8s.io").unwrap_or(kind);
    let kind = kind.to_lowercase();
    if !["machinepool", "machinepools", "mp"].contains(&kind.as_str()) || name.is_empty() {
        return Err(usage());
    }
    Ok(name)
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
        let resource = crate::rotate::resource_of(&config.kind, &config.group, None);
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

/// `kubectl auth can-i` for every verb roll uses, before the first write.
pub fn check_rbac(cluster: &dyn Cluster, namespace: &str) -> Result<(), RollError> {
    for (verb, resource) in [("list", MACHINES), ("get", SECRETS), ("delete", MACHINES)] {
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

/// The budget, and how to say it: `maxUnavailable 1`, `maxUnavailable 25% of 4 = 1`.
fn budget(infra: &PoolInfra, replicas: u32) -> Result<(Budget, String), RollError> {
    let max = MaxUnavailable::parse(infra.field(MAX_UNAVAILABLE))
        .map_err(|e| RollError::Input(format!("{} {MAX_UNAVAILABLE}: {e}", infra.name())))?;
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
    Ok((budget, said))
}

/// Replaces the stale Machines of the pool `request` names. Writes what it does to `out`.
pub fn roll(
    cluster: &dyn Cluster,
    request: &Request,
    out: &mut dyn Write,
) -> Result<Rolled, RollError> {
    let pool = read_pool(cluster, request)?;
    let key = key_of(&pool);
    let Some(infra) = pool::read(cluster, &pool, &key.namespace) else {
        return Err(RollError::Input(format!(
            "{key} has no spec.template.spec.infrastructureRef: roll cannot tell how to replace its instances"
        )));
    };
    if infra.route() != Route::DeleteMachines {
        return Ok(not_by_deleting(&infra, out));
    }
    check_rbac(cluster, &key.namespace)?;
    let (secret, created) = data_secret(cluster, &pool)?;
    let replicas = pool::replicas(&pool);
    let (budget, said) = budget(&infra, replicas)?;
    let machines = pool::instances(cluster, &key.namespace, &key.name)?;
    let _ = writeln!(
        out,
        "{key}: infrastructure {}; data Secret {secret}, created {created}",
        infra.named()
    );
    let _ = writeln!(out, "{key}: {replicas} replicas, {said}: {budget}");
    let stale = plan::stale(&machines, &created);
    let leaving = matches!(next(&machines, &created, budget), Next::Leaving(_));
    if stale.is_empty() && !leaving {
        let _ = writeln!(
            out,
            "{key}: nothing to replace: every Machine was launched after data Secret {secret}"
        );
        return Ok(Rolled::NothingToDo);
    }
    if !stale.is_empty() {
        let _ = writeln!(
            out,
            "{key}: {} of {} Machines were launched before data Secret {secret}; in this order:",
            stale.len(),
            machines.len()
        );
    }
    for (i, m) in stale.iter().enumerate() {
        let state = if m.ready { "Ready" } else { "not Ready" };
        let _ = writeln!(
            out,
            "  {}. Machine {}/{} (launched {}, {state})",
            i + 1,
            key.namespace,
            m.name,
            m.created
        );
    }
    if request.dry_run {
        let _ = writeln!(out, "(dry run) nothing was deleted");
        return Ok(Rolled::DryRun);
    }
    let target = Target {
        namespace: key.namespace.clone(),
        pool: key.name.clone(),
        secret,
        created,
        budget,
    };
    steps(cluster, request, &target, out)
}

/// What `roll` prints, and returns, on an infrastructure where deleting Machines is not the way.
fn not_by_deleting(infra: &PoolInfra, out: &mut dyn Write) -> Rolled {
    let named = infra.named();
    let (line, rolled) = match infra.route() {
        Route::Provider { disabled_by } => (
            format!(
                "{named} replaces the instances itself on a rotation (an instance refresh){}: roll deletes nothing",
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
        Route::DeleteMachines => unreachable!("handled by roll"),
    };
    let _ = writeln!(out, "{line}");
    rolled
}

/// The pool being rolled and its limits.
struct Target {
    namespace: String,
    pool: String,
    secret: String,
    created: String,
    budget: Budget,
}

/// How a wait ended.
enum Waited<T> {
    Found(T),
    TimedOut,
    Interrupted,
}

/// Polls `check` until it answers, `request.timeout` passes (in time, or in polls: a fake
/// cluster does not sleep) or the person interrupts.
fn wait<T>(
    cluster: &dyn Cluster,
    request: &Request,
    mut check: impl FnMut() -> Result<Option<T>, ClusterError>,
) -> Result<Waited<T>, ClusterError> {
    let start = Instant::now();
    let interval = request.interval.max(Duration::from_millis(1));
    let polls = request.timeout.as_millis() / interval.as_millis();
    for poll in 0.. {
        if (request.interrupted)() {
            return Ok(Waited::Interrupted);
        }
        if let Some(found) = check()? {
            return Ok(Waited::Found(found));
        }
        if poll >= polls || start.elapsed() >= request.timeout {
            return Ok(Waited::TimedOut);
        }
        cluster.pause(interval);
    }
    unreachable!("the loop returns")
}

/// Where a stopped run leaves the pool, and how to go on.
fn stopped(target: &Target, deleted: usize, why: String, interrupted: bool) -> RollError {
    let message = format!(
        "{why}: {deleted} Machine{} deleted so far; roll kept at least {} Ready; re-run the same \
         command to go on: capi-rollout-check roll machinepool/{} -n {}",
        plural(deleted),
        target.budget.floor,
        target.pool,
        target.namespace
    );
    if interrupted {
        RollError::Interrupted(message)
    } else {
        RollError::TimedOut(message)
    }
}

/// The steps: delete what the budget allows, wait for the replacements, again, until no stale
/// Machine is left.
fn steps(
    cluster: &dyn Cluster,
    request: &Request,
    target: &Target,
    out: &mut dyn Write,
) -> Result<Rolled, RollError> {
    let (ns, created) = (&target.namespace, &target.created);
    let read = || pool::instances(cluster, ns, &target.pool);
    let mut deleted = 0;
    let mut step = 0;
    loop {
        if (request.interrupted)() {
            return Err(stopped(target, deleted, "interrupted".into(), true));
        }
        let machines = read()?;
        let batch = match next(&machines, created, target.budget) {
            Next::Done => {
                let _ = writeln!(
                    out,
                    "MachinePool {ns}/{}: done: {deleted} Machine{} replaced; every Machine was launched after data Secret {}",
                    target.pool,
                    plural(deleted),
                    target.secret
                );
                return Ok(Rolled::Replaced(deleted));
            }
            Next::Leaving(n) => {
                let _ = writeln!(
                    out,
                    "waiting: {n} Machine{} launched before data Secret {} still being deleted",
                    plural(n as usize),
                    target.secret
                );
                let why = format!(
                    "timed out after {}s waiting for Machines being deleted",
                    request.timeout.as_secs()
                );
                wait_until(cluster, request, target, deleted, why, |next| {
                    !matches!(next, Next::Leaving(_))
                })?;
                continue;
            }
            Next::Blocked { ready, needed } => {
                let _ = writeln!(
                    out,
                    "waiting: {ready} of {} Machines Ready, {needed} needed before the next delete",
                    target.budget.replicas
                );
                let why = format!(
                    "timed out after {}s waiting for {needed} Ready Machines",
                    request.timeout.as_secs()
                );
                wait_until(cluster, request, target, deleted, why, |next| {
                    !matches!(next, Next::Blocked { .. })
                })?;
                continue;
            }
            Next::Delete(batch) => batch,
        };
        step += 1;
        deleted = delete_batch(
            cluster,
            request,
            target,
            &machines,
            &batch,
            (step, deleted),
            out,
        )?;
        await_replacements(
            cluster, request, target, &machines, &batch, step, deleted, out,
        )?;
    }
}

/// Waits until the next step, recomputed from the cluster, is one `ready` accepts.
fn wait_until(
    cluster: &dyn Cluster,
    request: &Request,
    target: &Target,
    deleted: usize,
    why: String,
    ready: impl Fn(&Next) -> bool,
) -> Result<(), RollError> {
    let waited = wait(cluster, request, || {
        let machines = pool::instances(cluster, &target.namespace, &target.pool)?;
        Ok(ready(&next(&machines, &target.created, target.budget)).then_some(()))
    })?;
    match waited {
        Waited::Found(()) => Ok(()),
        Waited::TimedOut => Err(stopped(target, deleted, why, false)),
        Waited::Interrupted => Err(stopped(target, deleted, "interrupted".into(), true)),
    }
}

/// Deletes the batch, one Machine after the other (none after an interruption): the Machines
/// deleted so far, `deleted` before it.
fn delete_batch(
    cluster: &dyn Cluster,
    request: &Request,
    target: &Target,
    machines: &[Instance],
    batch: &[String],
    (step, deleted): (usize, usize),
    out: &mut dyn Write,
) -> Result<usize, RollError> {
    let ns = &target.namespace;
    let mut done = deleted;
    for name in batch {
        if (request.interrupted)() {
            return Err(stopped(target, done, "interrupted".into(), true));
        }
        cluster.delete(MACHINES, ns, name)?;
        done += 1;
        let launched = machines
            .iter()
            .find(|m| &m.name == name)
            .map_or("", |m| m.created.as_str());
        let _ = writeln!(
            out,
            "step {step}: deleted Machine {ns}/{name} (launched {launched})"
        );
    }
    Ok(done)
}

/// Waits until the batch's Machines are gone and as many new Ready Machines have joined.
#[allow(clippy::too_many_arguments)]
fn await_replacements(
    cluster: &dyn Cluster,
    request: &Request,
    target: &Target,
    before: &[Instance],
    batch: &[String],
    step: usize,
    deleted: usize,
    out: &mut dyn Write,
) -> Result<(), RollError> {
    let (ns, created) = (&target.namespace, &target.created);
    let fresh_before = fresh_ready(before, created);
    let known: Vec<&str> = before
        .iter()
        .filter(|m| m.ready)
        .map(|m| m.name.as_str())
        .collect();
    let waited = wait(cluster, request, || {
        let machines = pool::instances(cluster, ns, &target.pool)?;
        Ok(plan::replaced(&machines, batch, created, fresh_before).then_some(machines))
    })?;
    let machines = match waited {
        Waited::Found(m) => m,
        Waited::TimedOut => {
            let why = format!(
                "timed out after {}s waiting for the replacement of {}",
                request.timeout.as_secs(),
                batch.join(", ")
            );
            return Err(stopped(target, deleted, why, false));
        }
        Waited::Interrupted => return Err(stopped(target, deleted, "interrupted".into(), true)),
    };
    let ready = ready_count(&machines);
    for m in machines
        .iter()
        .filter(|m| m.ready && !m.stale(created) && !known.contains(&m.name.as_str()))
    {
        let _ = writeln!(
            out,
            "step {step}: Machine {ns}/{} is Ready (launched {}): {ready} of {} Machines Ready",
            m.name, m.created, target.budget.replicas
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests;
