//! What `rotate` says once CAPI has copied the new dataSecretName into a MachinePool: what the
//! pool's infrastructure does with it, read from the policy's record of the kind, and what is
//! left to the person. For CAPA's AWSMachinePool it follows the instance refresh.

use std::io::Write;
use std::time::{Duration, Instant};

use serde_json::Value;

use capi_rollout_check::drift::time;

use super::plan::{plural, Instance};
use super::pool::{self, PoolInfra, Route};
use crate::cluster::Cluster;
use crate::manifests::key_of;

/// What comes after the report.
pub enum After {
    /// Nothing: the report said it all.
    Said,
    /// Stale instances that `roll` replaces (rotate --replace-instances runs it).
    Roll,
    /// CAPA replaces the instances with an instance refresh: follow it.
    Refresh(Box<PoolInfra>),
}

/// How many existing instances predate the data Secret, and, when it is not counted from
/// MachinePool Machines, why.
fn stale_count(cluster: &dyn Cluster, pool: &Value, secret: &str) -> (usize, Option<String>) {
    let key = key_of(pool);
    let machines = pool::instances(cluster, &key.namespace, &key.name);
    let replicas = pool::replicas(pool) as usize;
    let machines: Vec<Instance> = match machines {
        Ok(m) if !m.is_empty() => m,
        Ok(_) => return (replicas, Some("no MachinePool Machines".into())),
        Err(e) => return (replicas, Some(format!("cannot list Machines: {e}"))),
    };
    match pool::secret_created(cluster, &key.namespace, secret) {
        Ok(Some(created)) => (super::plan::stale(&machines, &created).len(), None),
        Ok(None) => (replicas, Some(format!("Secret {secret} not found"))),
        Err(e) => (replicas, Some(format!("cannot read Secret {secret}: {e}"))),
    }
}

/// `3 existing instances keep the old bootstrap data; new instances take the new data`.
fn keep_phrase(count: usize, why: Option<&str>) -> String {
    if count == 0 {
        return "no existing instance predates the new data".into();
    }
    let (s, verb) = if count == 1 {
        ("", "keeps")
    } else {
        ("s", "keep")
    };
    let counted = why.map_or(String::new(), |w| {
        format!(" (counted from spec.replicas: {w})")
    });
    format!("{count} existing instance{s} {verb} the old bootstrap data; new instances take the new data{counted}")
}

/// The provider replaces the instances itself: what it does, and, for CAPA's AWSMachinePool,
/// the instance refresh to follow.
fn provider_replaces(
    infra: PoolInfra,
    disabled_by: Option<&'static str>,
    out: &mut dyn Write,
) -> After {
    let named = infra.named();
    let aws = infra.reference.kind == "AWSMachinePool";
    let off = disabled_by.map_or(String::new(), |p| format!(" ({p}: true turns it off)"));
    let _ = writeln!(
        out,
        "{named} replaces the existing instances: {}{off}",
        infra.replaces_them()
    );
    if !aws || infra.object.is_none() {
        return After::Said;
    }
    After::Refresh(Box::new(infra))
}

/// Writes what the pool's infrastructure does with the new data Secret `secret`.
/// `replacing`: rotate runs `roll` next, so the command to run is not printed.
pub fn after_rotation(
    cluster: &dyn Cluster,
    pool: &Value,
    secret: &str,
    replacing: bool,
    out: &mut dyn Write,
) -> After {
    let key = key_of(pool);
    let Some(infra) = pool::read(cluster, pool, &key.namespace) else {
        let _ = writeln!(
            out,
            "{key} has no spec.template.spec.infrastructureRef: capi-rollout-check cannot tell \
             whether existing instances are replaced; new instances take the new data"
        );
        return After::Said;
    };
    let named = infra.named();
    let route = infra.route();
    let (qualifier, by_hand) = match &route {
        Route::Provider { disabled_by } => return provider_replaces(infra, *disabled_by, out),
        Route::NotRead { unless: None } => {
            let _ = writeln!(
                out,
                "{named} never reads bootstrap data: the rotation changes no instance"
            );
            return After::Said;
        }
        Route::NotRead {
            unless: Some(field),
        } => {
            let _ = writeln!(
                out,
                "{named} reads bootstrap data only with {field}, which is not set: the rotation changes no instance"
            );
            return After::Said;
        }
        Route::Unread { depends_on, why } => {
            let _ = writeln!(out, "{}", infra.unread_line(depends_on, why));
            return After::Said;
        }
        Route::Unknown => {
            let _ = writeln!(
                out,
                "{}: capi-rollout-check does not know this infrastructure kind ({}): it cannot \
                 tell whether existing instances are replaced; new instances take the new data",
                infra.name(),
                infra.reference.group
            );
            return After::Said;
        }
        Route::ProviderDisabled { by } => (
            format!(" ({by} is true)"),
            format!(
                "replace them by hand: start an instance refresh of its Auto Scaling group \
                 (aws autoscaling start-instance-refresh --auto-scaling-group-name {}), or unset \
                 {by} before the next rotation",
                infra.reference.name
            ),
        ),
        Route::Manual { instructions } => (
            format!(
                " on a rotation{}",
                infra
                    .record
                    .and_then(|r| r.inferred_from)
                    .map_or(String::new(), |f| format!(" (inferred from {f})"))
            ),
            format!("replace them by hand: {instructions}"),
        ),
        Route::DeleteMachines => (
            " on a rotation".into(),
            format!(
                "replace them: capi-rollout-check roll machinepool/{} -n {}",
                key.name, key.namespace
            ),
        ),
    };
    let (count, why) = stale_count(cluster, pool, secret);
    let _ = writeln!(
        out,
        "{named} replaces no existing instance{qualifier}: {}",
        keep_phrase(count, why.as_deref())
    );
    if count == 0 {
        return After::Said;
    }
    if route == Route::DeleteMachines && replacing {
        return After::Roll;
    }
    let _ = writeln!(out, "{by_hand}");
    After::Said
}

/// CAPA's condition, True once it has started the instance refresh after a new launch
/// template version, False when starting it failed.
const REFRESH_CONDITION: &str = "PostLaunchTemplateUpdateOperationSuccess";

fn provider_ids(object: &Value) -> Vec<String> {
    object
        .pointer("/spec/providerIDList")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

fn condition<'a>(object: &'a Value, kind: &str) -> Option<&'a Value> {
    object
        .pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c["type"] == kind)
}

/// A condition set at or after `since` (Unix seconds): one CAPA wrote for this rotation. A
/// condition without a readable lastTransitionTime is not counted either: it cannot be told
/// from one left by an earlier rotation.
fn set_since(condition: &Value, since: i64) -> bool {
    condition["lastTransitionTime"]
        .as_str()
        .and_then(time::parse)
        .is_some_and(|t| t >= since)
}

/// Follows an AWSMachinePool's instance refresh until none of the instances it had when the
/// refresh began is left in `spec.providerIDList`, or `timeout`. CAPA reports no progress of
/// the refresh itself (AWS does); the instances it lists are the visible part. `since` is the
/// rotation's start by the API server's clock (the new config's creationTimestamp): CAPA's
/// condition counts only if it changed at or after it. True when it ended.
pub fn follow_refresh(
    cluster: &dyn Cluster,
    infra: &PoolInfra,
    since: &str,
    (timeout, interval): (Duration, Duration),
    out: &mut dyn Write,
) -> bool {
    let since_text = since;
    let since = time::parse(since).unwrap_or(i64::MAX);
    let name = infra.name();
    let read = || {
        cluster
            .get(
                &infra.reference.resource(),
                Some(&infra.namespace),
                &infra.reference.name,
            )
            .ok()
            .flatten()
    };
    let before = infra.object.as_ref().map(provider_ids).unwrap_or_default();
    if before.is_empty() {
        let _ = writeln!(
            out,
            "{name}: instance refresh: no instance listed in spec.providerIDList to replace"
        );
        return true;
    }
    let (start, polls) = (
        Instant::now(),
        timeout.as_millis() / interval.as_millis().max(1),
    );
    let mut started = false;
    let mut left = before.len();
    let mut older = None;
    for poll in 0.. {
        if let Some(object) = read() {
            let all = condition(&object, REFRESH_CONDITION);
            let c = all.filter(|c| set_since(c, since));
            if c.is_none() {
                older = all.cloned();
            }
            if c.is_some_and(|c| c["status"] == "False") {
                let message = c.and_then(|c| c["message"].as_str()).unwrap_or("");
                let _ = writeln!(out, "{name}: CAPA could not start the instance refresh ({REFRESH_CONDITION} False): {message}");
                return false;
            }
            if !started && c.is_some_and(|c| c["status"] == "True") {
                started = true;
                let _ = writeln!(out, "{name}: instance refresh in progress");
            }
            let now = provider_ids(&object);
            left = before.iter().filter(|id| now.contains(id)).count();
            if left == 0 && !now.is_empty() {
                let n = before.len();
                let _ = writeln!(out, "{name}: instance refresh done: none of the {n} instance{} it had before is left", plural(n));
                return true;
            }
        }
        if poll >= polls || start.elapsed() >= timeout {
            break;
        }
        cluster.pause(interval);
    }
    let _ = writeln!(
        out,
        "{name}: the instance refresh has not ended within {}s ({} of {} instances replaced); CAPA \
         goes on with it (aws autoscaling describe-instance-refreshes --auto-scaling-group-name {})",
        timeout.as_secs(),
        before.len() - left,
        before.len(),
        infra.reference.name
    );
    if let Some(c) = older.filter(|_| !started) {
        let _ = writeln!(
            out,
            "{name}: {REFRESH_CONDITION} is {} since {}, before this rotation ({since_text}): \
             CAPA has not reported on this rotation's refresh",
            c["status"].as_str().unwrap_or("unknown"),
            c["lastTransitionTime"]
                .as_str()
                .unwrap_or("an unknown time"),
        );
    }
    false
}
