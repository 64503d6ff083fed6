//! The steps of a roll, once it holds the pool's Lease: read the pool, decide, read it again
//! just before each delete and delete only if the decision still holds, wait for the
//! replacements; again until no stale Machine is left.
//!
//! Every decision is taken on what the cluster shows at that moment: the budget (the floor,
//! how many a step deletes, the replacements a step waits for) comes from the pool's
//! `replicas` as read then, so a scale-down or a scale-up in the middle of a roll (the cluster
//! autoscaler, a person) changes it at once; a Machine deleted or not Ready for any reason
//! counts against it; a Machine being deleted is never deleted again.

use std::collections::BTreeSet;
use std::io::Write;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::lease::Lease;
use super::plan::{self, next, plural, ready_count, Budget, Instance, MaxUnavailable, Next};
use super::pool::{self, MACHINES};
use super::{budget, RollError, Rolled, POOLS};
use crate::cluster::{Cluster, Fault};

/// The pool being rolled: what stays the same for the whole roll.
pub struct Target {
    pub namespace: String,
    pub pool: String,
    /// The pool's data Secret, and its creationTimestamp: a Machine launched before it is stale.
    pub secret: String,
    pub created: String,
    pub max: MaxUnavailable,
    /// `AzureMachinePool fleet/pool-1 (CAPZ)`.
    pub infra: String,
    /// Why the infrastructure object could not be read (its maxUnavailable taken as 1).
    pub unread: Option<String>,
}

/// What the plan found.
pub enum Planned {
    /// No stale Machine: nothing to replace.
    Nothing,
    /// Stale Machines in a pool of this many replicas.
    Steps { replicas: u32 },
}

/// The pool as read at one moment.
struct View {
    replicas: u32,
    budget: Budget,
    said: String,
    machines: Vec<Instance>,
}

impl Target {
    fn key(&self) -> String {
        format!("MachinePool {}/{}", self.namespace, self.pool)
    }

    /// `capi-rollout-check roll machinepool/pool-1 -n fleet`.
    fn command(&self) -> String {
        format!(
            "capi-rollout-check roll machinepool/{} -n {}",
            self.pool, self.namespace
        )
    }

    /// Reads the pool (or takes `pool`, just read) and its Machines. A pool deleted, being
    /// deleted or rotated again since the roll began stops it.
    fn look(&self, cluster: &dyn Cluster, pool: Option<&Value>) -> Result<View, RollError> {
        let mut read = None;
        let pool = match pool {
            Some(p) => p,
            None => {
                // Read as gone three times over a few seconds before it is taken as deleted: an
                // API server starting up answers "not found" for a custom resource a moment.
                for attempt in 0..3 {
                    read = cluster.get(POOLS, Some(&self.namespace), &self.pool)?;
                    if read.is_some() {
                        break;
                    }
                    if attempt < 2 {
                        cluster.pause(Duration::from_secs(2));
                    }
                }
                read.as_ref()
                    .ok_or_else(|| RollError::Stopped(format!("{} was deleted", self.key())))?
            }
        };
        if pool
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|v| !v.is_null())
        {
            return Err(RollError::Stopped(format!(
                "{} is being deleted",
                self.key()
            )));
        }
        let secret = pool::data_secret_name(pool).unwrap_or("");
        if secret != self.secret {
            return Err(RollError::Stopped(format!(
                "{}'s dataSecretName changed from {} to {secret}: a newer rotation; run roll again \
                 for its data",
                self.key(),
                self.secret
            )));
        }
        let replicas = pool::replicas(pool);
        let (budget, mut said) = budget(self.max, replicas);
        if let Some(why) = &self.unread {
            said = format!("{said} ({} unread: {why})", self.infra);
        }
        Ok(View {
            replicas,
            budget,
            said,
            machines: pool::instances(cluster, &self.namespace, &self.pool)?,
        })
    }

    /// Prints what the roll will do, from `pool` as just read.
    pub fn plan(
        &self,
        cluster: &dyn Cluster,
        pool: &Value,
        out: &mut dyn Write,
    ) -> Result<Planned, RollError> {
        let view = self.look(cluster, Some(pool))?;
        let key = self.key();
        let _ = writeln!(
            out,
            "{key}: infrastructure {}; data Secret {}, created {}",
            self.infra, self.secret, self.created
        );
        let _ = writeln!(
            out,
            "{key}: {} replicas, {}: {}",
            view.replicas, view.said, view.budget
        );
        let stale = plan::stale(&view.machines, &self.created);
        let leaving = matches!(
            next(&view.machines, &self.created, view.budget),
            Next::Leaving(_)
        );
        if stale.is_empty() && !leaving {
            let _ = writeln!(
                out,
                "{key}: nothing to replace: every Machine was launched after data Secret {}",
                self.secret
            );
            return Ok(Planned::Nothing);
        }
        if !stale.is_empty() {
            let _ = writeln!(
                out,
                "{key}: {} of {} Machines were launched before data Secret {}; in this order:",
                stale.len(),
                view.machines.len(),
                self.secret
            );
        }
        for (i, m) in stale.iter().enumerate() {
            let state = if m.ready { "Ready" } else { "not Ready" };
            let _ = writeln!(
                out,
                "  {}. Machine {}/{} (launched {}, {state})",
                i + 1,
                self.namespace,
                m.name,
                m.created
            );
        }
        Ok(Planned::Steps {
            replicas: view.replicas,
        })
    }
}

/// Runs the steps until no stale Machine is left, from a pool of `replicas` as planned.
pub fn run(
    cluster: &dyn Cluster,
    request: &super::Request,
    (target, replicas): (&Target, u32),
    lease: &Lease,
    out: &mut dyn Write,
) -> Result<Rolled, RollError> {
    let mut run = Run {
        cluster,
        request,
        target,
        lease,
        out,
        deleted: 0,
        step: 0,
        mine: BTreeSet::new(),
        replicas,
        retrying: false,
    };
    run.go().map_err(|e| run.stopped(e))
}

struct Run<'a> {
    cluster: &'a dyn Cluster,
    request: &'a super::Request<'a>,
    target: &'a Target,
    lease: &'a Lease,
    out: &'a mut dyn Write,
    /// How many Machines this run deleted, and which: each once, never again.
    deleted: usize,
    step: usize,
    mine: BTreeSet<String>,
    /// The replicas at the last read: a change is said once.
    replicas: u32,
    /// A transient error is being retried: said once.
    retrying: bool,
}

/// How a wait ended.
enum Waited {
    Found(View),
    TimedOut(View),
}

impl Run<'_> {
    fn go(&mut self) -> Result<Rolled, RollError> {
        loop {
            self.check_interrupted()?;
            let view = self.fresh()?;
            match next(&view.machines, &self.target.created, view.budget) {
                Next::Done => {
                    let _ = writeln!(
                        self.out,
                        "{}: done: {} Machine{} replaced; every Machine was launched after data Secret {}",
                        self.target.key(),
                        self.deleted,
                        plural(self.deleted),
                        self.target.secret
                    );
                    return Ok(Rolled::Replaced(self.deleted));
                }
                Next::Leaving(n) => {
                    let _ = writeln!(
                        self.out,
                        "waiting: {n} Machine{} launched before data Secret {} still being deleted",
                        plural(n as usize),
                        self.target.secret
                    );
                    let created = self.target.created.clone();
                    if let Waited::TimedOut(view) = self.wait(|v| {
                        !matches!(next(&v.machines, &created, v.budget), Next::Leaving(_))
                    })? {
                        let stuck = self.stuck(&view, None);
                        return Err(
                            self.timed_out(format!("waiting for Machines being deleted{stuck}"))
                        );
                    }
                }
                Next::Blocked { ready, needed } => {
                    self.say_blocked(&view, ready, needed);
                    let created = self.target.created.clone();
                    if let Waited::TimedOut(_) = self.wait(|v| {
                        !matches!(next(&v.machines, &created, v.budget), Next::Blocked { .. })
                    })? {
                        return Err(self.timed_out(format!("waiting for {needed} Ready Machines")));
                    }
                }
                Next::Delete(_) => self.one_step(view)?,
            }
        }
    }

    fn say_blocked(&mut self, view: &View, ready: u32, needed: u32) {
        let line = if ready < view.budget.floor {
            format!(
                "below the floor: {ready} of {} Machines Ready, floor {}: not by roll (a Machine \
                 deleted or not Ready by someone else); waiting for {needed} Ready before the next delete",
                view.replicas, view.budget.floor
            )
        } else {
            format!(
                "waiting: {ready} of {} Machines Ready, {needed} needed before the next delete",
                view.replicas
            )
        };
        let _ = writeln!(self.out, "{line}");
    }

    /// One step: up to the budget's maxUnavailable deletes, each confirmed by a read just
    /// before it, then the wait for the replacements.
    fn one_step(&mut self, first: View) -> Result<(), RollError> {
        let ready_before = ready_count(&first.machines);
        let known: Vec<String> = first
            .machines
            .iter()
            .filter(|m| m.ready)
            .map(|m| m.name.clone())
            .collect();
        let started = Instant::now();
        let mut decided = first;
        let mut batch: Vec<String> = Vec::new();
        let mut changes = 0;
        while batch.len() < decided.budget.max_unavailable as usize {
            let Next::Delete(candidates) =
                next(&decided.machines, &self.target.created, decided.budget)
            else {
                break;
            };
            let Some(name) = candidates.into_iter().find(|n| !self.mine.contains(n)) else {
                break;
            };
            // Just before the delete: the Lease still this roll's, the pool read again.
            self.check_interrupted()?;
            self.retry(|r| r.lease.renew(r.cluster, true))?;
            let fresh = self.fresh()?;
            if let Some(change) = changed(&decided, &fresh, &name) {
                let _ = writeln!(
                    self.out,
                    "{} changed since roll decided to delete Machine {} ({change}): deciding again",
                    self.target.key(),
                    name
                );
                decided = fresh;
                changes += 1;
                if changes > 1 {
                    self.cluster.pause(self.request.interval);
                }
                if started.elapsed() >= self.request.timeout
                    || changes as u128
                        > self.request.timeout.as_millis()
                            / self.request.interval.as_millis().max(1)
                {
                    return Err(self.timed_out(
                        "waiting for the pool to hold still between two reads".to_string(),
                    ));
                }
                continue;
            }
            changes = 0;
            if batch.is_empty() {
                self.step += 1;
            }
            let launched = fresh
                .machines
                .iter()
                .find(|m| m.name == name)
                .map_or(String::new(), |m| m.created.clone());
            self.delete(&name)?;
            let _ = writeln!(
                self.out,
                "step {}: deleted Machine {}/{name} (launched {launched})",
                self.step, self.target.namespace
            );
            decided = fresh;
            if let Some(m) = decided.machines.iter_mut().find(|m| m.name == name) {
                m.ready = false;
                m.deleting = true;
            }
            batch.push(name);
        }
        if batch.is_empty() {
            // Decided again into a wait, or every candidate is one this roll deleted already:
            // the next look is an interval away, never a busy loop.
            self.cluster.pause(self.request.interval);
            return Ok(());
        }
        self.await_replacements(&batch, ready_before, &known)
    }

    /// Waits until the batch's Machines are gone and the pool has as many Ready Machines as
    /// before the step, or as its replicas now if it was scaled down meanwhile.
    fn await_replacements(
        &mut self,
        names: &[String],
        ready_before: u32,
        known: &[String],
    ) -> Result<(), RollError> {
        let over = |v: &View| plan::step_over(&v.machines, names, ready_before, v.replicas);
        let view = match self.wait(over)? {
            Waited::Found(view) => view,
            Waited::TimedOut(view) => {
                let stuck = self.stuck(&view, Some(names));
                let not_ready = self.not_ready(&view);
                return Err(self.timed_out(format!(
                    "waiting for the replacement of {}{stuck}{not_ready}",
                    names.join(", ")
                )));
            }
        };
        let ready = ready_count(&view.machines);
        for m in view
            .machines
            .iter()
            .filter(|m| m.ready && !m.stale(&self.target.created) && !known.contains(&m.name))
        {
            let _ = writeln!(
                self.out,
                "step {}: Machine {}/{} is Ready (launched {}): {ready} of {} Machines Ready",
                self.step, self.target.namespace, m.name, m.created, view.replicas
            );
        }
        Ok(())
    }

    /// `: Machine fleet/m-a is still being deleted (since ...; finalizers: ...): ...`, for the
    /// Machines of `among` (all when `None`) that are.
    fn stuck(&self, view: &View, among: Option<&[String]>) -> String {
        let ns = &self.target.namespace;
        view.machines
            .iter()
            .filter(|m| m.deleting && among.is_none_or(|a| a.contains(&m.name)))
            .map(|m| {
                format!(
                    "; Machine {ns}/{} is still being deleted (since {}; finalizers: {}): a drain \
                     or a finalizer holds it (kubectl describe {MACHINES} {} -n {ns})",
                    m.name,
                    m.deleting_since,
                    if m.finalizers.is_empty() {
                        "none".to_string()
                    } else {
                        m.finalizers.join(", ")
                    },
                    m.name
                )
            })
            .collect()
    }

    /// `; Machine fleet/new-1 (launched ...) is not Ready`, for the fresh Machines not Ready.
    fn not_ready(&self, view: &View) -> String {
        view.machines
            .iter()
            .filter(|m| !m.ready && !m.deleting && !m.stale(&self.target.created))
            .map(|m| {
                format!(
                    "; Machine {}/{} (launched {}) is not Ready",
                    self.target.namespace, m.name, m.created
                )
            })
            .collect()
    }

    /// Polls until `over` holds for the pool as read, or the timeout (in time, or in polls:
    /// a fake cluster does not sleep). The Lease is renewed as it goes.
    fn wait(&mut self, over: impl Fn(&View) -> bool) -> Result<Waited, RollError> {
        let start = Instant::now();
        let interval = self.request.interval.max(Duration::from_millis(1));
        let polls = self.request.timeout.as_millis() / interval.as_millis();
        for poll in 0.. {
            self.check_interrupted()?;
            self.retry(|r| r.lease.renew(r.cluster, false))?;
            let view = self.fresh()?;
            if over(&view) {
                return Ok(Waited::Found(view));
            }
            if poll >= polls || start.elapsed() >= self.request.timeout {
                return Ok(Waited::TimedOut(view));
            }
            self.cluster.pause(interval);
        }
        unreachable!("the loop returns")
    }

    /// The pool read now, retried through transient errors; a change of its replicas is said.
    fn fresh(&mut self) -> Result<View, RollError> {
        let view = self.retry(|r| r.target.look(r.cluster, None))?;
        let was = self.replicas;
        if was != view.replicas {
            let _ = writeln!(
                self.out,
                "{}: replicas now {} (were {was}): {}: {}",
                self.target.key(),
                view.replicas,
                view.said,
                view.budget
            );
        }
        self.replicas = view.replicas;
        Ok(view)
    }

    /// Deletes a Machine, retried through transient errors. Gone already: someone else
    /// deleted it, which the next read counts.
    fn delete(&mut self, name: &str) -> Result<(), RollError> {
        let namespace = self.target.namespace.clone();
        self.mine.insert(name.to_string());
        let result = self.retry(|r| {
            r.cluster
                .delete(MACHINES, &namespace, name)
                .map(|_| ())
                .map_err(RollError::from)
        });
        match result {
            Err(RollError::Cluster(e)) if e.fault() == Fault::NotFound => Ok(()),
            Err(e) => {
                self.mine.remove(name);
                Err(e)
            }
            Ok(()) => {
                self.deleted += 1;
                Ok(())
            }
        }
    }

    /// Calls `call` again while it fails with a transient error, backing off from half a
    /// second to eight, within the step's timeout.
    fn retry<T>(
        &mut self,
        mut call: impl FnMut(&Self) -> Result<T, RollError>,
    ) -> Result<T, RollError> {
        let start = Instant::now();
        let mut waited = Duration::ZERO;
        let mut backoff = Duration::from_millis(500);
        loop {
            match call(self) {
                Err(e) if e.transient() => {
                    if waited >= self.request.timeout || start.elapsed() >= self.request.timeout {
                        return Err(RollError::TimedOut(format!(
                            "the API server did not answer for {}s ({e})",
                            self.request.timeout.as_secs()
                        )));
                    }
                    if !self.retrying {
                        let _ = writeln!(self.out, "retrying: {e}");
                        self.retrying = true;
                    }
                    self.check_interrupted()?;
                    self.cluster.pause(backoff);
                    waited += backoff;
                    backoff = (backoff * 2).min(Duration::from_secs(8));
                }
                other => {
                    if other.is_ok() {
                        self.retrying = false;
                    }
                    return other;
                }
            }
        }
    }

    fn check_interrupted(&self) -> Result<(), RollError> {
        if (self.request.interrupted)() {
            return Err(RollError::Interrupted("interrupted".into()));
        }
        Ok(())
    }

    fn timed_out(&self, what: String) -> RollError {
        RollError::TimedOut(format!(
            "timed out after {}s {what}",
            self.request.timeout.as_secs()
        ))
    }

    /// Where a stopped run leaves the pool, and how to go on: the error with the count deleted
    /// so far and the command. Another roll's Lease is said as it is.
    fn stopped(&self, e: RollError) -> RollError {
        let so_far = |why: &dyn std::fmt::Display| {
            format!(
                "{why}: {} Machine{} deleted so far; roll kept at least {} Ready by its own deletes; re-run the \
                 same command to go on: {}",
                self.deleted,
                plural(self.deleted),
                self.floor_said(),
                self.target.command()
            )
        };
        match e {
            RollError::Held(m) => RollError::Held(format!(
                "{m}: {} Machine{} deleted so far by this roll",
                self.deleted,
                plural(self.deleted)
            )),
            RollError::Interrupted(m) => RollError::Interrupted(so_far(&m)),
            RollError::TimedOut(m) => RollError::TimedOut(so_far(&m)),
            RollError::Stopped(m) | RollError::Input(m) => RollError::Stopped(so_far(&m)),
            RollError::Cluster(c) => RollError::Stopped(so_far(&c)),
        }
    }

    /// The floor as last read.
    fn floor_said(&self) -> u32 {
        Budget::new(self.replicas, self.target.max).floor
    }
}

/// What changed between the read a delete was decided on and the one just before it, if
/// anything that decision rests on: the Machine, the Ready count, the replicas.
fn changed(decided: &View, fresh: &View, name: &str) -> Option<String> {
    let mut what = Vec::new();
    if !fresh.machines.iter().any(|m| m.name == name && !m.deleting) {
        what.push(format!("Machine {name} gone or being deleted"));
    }
    let (before, now) = (ready_count(&decided.machines), ready_count(&fresh.machines));
    if before != now {
        what.push(format!("Ready {before} -> {now}"));
    }
    if decided.replicas != fresh.replicas {
        what.push(format!(
            "replicas {} -> {}",
            decided.replicas, fresh.replicas
        ));
    }
    (!what.is_empty()).then(|| what.join(", "))
}
