//! After the writes: waiting until CAPI has taken the new config up, then saying what the
//! pool's infrastructure does with it (and, where asked, replacing the instances).

use std::io::Write;
use std::time::Duration;

use capi_bootstrap_rollout_policy::capi::kinds::is_machine_pool;
use serde_json::Value;

use super::plan::{key_of, ConfigRef};
use super::{Done, Request, RotateError};
use crate::cluster::{poll, Cluster};
use crate::manifests::Key;
use crate::roll::report::{after_rotation, follow_refresh, After};
use crate::roll::{self, pool};
use capi_rollout_check::drift::analysis::{strategy, WorkerKind};

const INTERVAL: Duration = Duration::from_secs(1);

/// Waits until CAPI has taken the new config up: a MachinePool's dataSecretName is the new
/// config's; a MachineDeployment has a MachineSet on the new template. A MachineSet does not
/// replace its Machines on a template change: nothing to wait for.
pub(super) fn taken_up(
    cluster: &dyn Cluster,
    request: &Request,
    consumer: &Value,
    kind: WorkerKind,
    (new, config_resource): (&Key, &str),
    out: &mut dyn Write,
) -> Result<Done, RotateError> {
    let key = key_of(consumer);
    if request.timeout.is_zero() {
        return Ok(Done::Rotated);
    }
    if is_machine_pool(&key.group, &key.kind) {
        return pool_taken_up(
            cluster,
            request,
            consumer,
            kind,
            (new, config_resource),
            out,
        );
    }
    if kind == WorkerKind::MachineDeployment {
        return deployment_taken_up(cluster, request, &key, new, out);
    }
    let _ = writeln!(
        out,
        "{key}: a MachineSet replaces no Machine on a template change; new Machines use {}. Delete the older ones one at a time, once each replacement is Ready (capi-rollout-check drift machineset/{} -n {} names them)",
        new.name, key.name, key.namespace
    );
    Ok(Done::Rotated)
}

fn pool_taken_up(
    cluster: &dyn Cluster,
    request: &Request,
    consumer: &Value,
    kind: WorkerKind,
    (new, config_resource): (&Key, &str),
    out: &mut dyn Write,
) -> Result<Done, RotateError> {
    let key = key_of(consumer);
    let old_secret = pool::data_secret_name(consumer).unwrap_or("").to_string();
    let found = poll(cluster, request.timeout, INTERVAL, || {
        let Some(config) = cluster.get(config_resource, Some(&key.namespace), &new.name)? else {
            return Ok(None);
        };
        let Some(secret) = config
            .pointer("/status/dataSecretName")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        else {
            return Ok(None);
        };
        let pool = cluster.get(kind.resource(), Some(&key.namespace), &key.name)?;
        let copied = pool.as_ref().and_then(pool::data_secret_name);
        // When the rotation began, by the API server's clock.
        let began = config
            .pointer("/metadata/creationTimestamp")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        Ok((copied == Some(secret) && secret != old_secret)
            .then(|| (secret.to_string(), pool.unwrap_or(Value::Null), began)))
    })?;
    let Some((secret, pool, began)) = found else {
        let _ = writeln!(out, "{key}: CAPI has not copied {}'s dataSecretName into the pool within {}s; the rotation is in place (kubectl describe {} {} -n {})",
            new.name, request.timeout.as_secs(), kind.resource(), key.name, key.namespace);
        return Ok(Done::NotYetRolled);
    };
    let _ = writeln!(
        out,
        "{key}: CAPI copied dataSecretName {secret} into the pool"
    );
    match after_rotation(cluster, &pool, &secret, request.replace_instances, out) {
        After::Said => Ok(Done::Rotated),
        After::Refresh(infra) => {
            let ended = follow_refresh(
                cluster,
                &infra,
                &began,
                (request.timeout, INTERVAL * 5),
                out,
            );
            Ok(if ended {
                Done::Rotated
            } else {
                Done::NotYetRolled
            })
        }
        After::Roll => {
            let name = format!("machinepool/{}", key.name);
            let roll_request = roll::Request {
                pool: &name,
                namespace: Some(&key.namespace),
                dry_run: false,
                timeout: request.timeout,
                interval: INTERVAL * 2,
                interrupted: request.interrupted,
                take_over: false,
            };
            roll::roll(cluster, &roll_request, out).map_err(RotateError::Roll)?;
            Ok(Done::Rotated)
        }
    }
}

const SETS: &str = "machinesets.cluster.x-k8s.io";

fn count(object: &Value, pointer: &str) -> u64 {
    object.pointer(pointer).and_then(Value::as_u64).unwrap_or(0)
}

/// A MachineDeployment's roll-out as its MachineSets show it: (Ready on the new template,
/// Machines left on older MachineSets).
fn roll_out(sets: &[Value], new: &Key) -> (u64, u64) {
    let (on_new, older): (Vec<&Value>, Vec<&Value>) = sets
        .iter()
        .partition(|s| ConfigRef::of(s).is_some_and(|r| r.name == new.name));
    let ready = on_new
        .iter()
        .map(|s| count(s, "/status/readyReplicas"))
        .sum();
    let left = older.iter().map(|s| count(s, "/status/replicas")).sum();
    (ready, left)
}

/// Waits for CAPI's MachineSet on the new template; names the roll-out it starts (the
/// MachineDeployment's strategy) and, with `--wait`, follows it until every Machine is on the
/// new template and Ready and the older MachineSets have none.
fn deployment_taken_up(
    cluster: &dyn Cluster,
    request: &Request,
    key: &Key,
    new: &Key,
    out: &mut dyn Write,
) -> Result<Done, RotateError> {
    let timeout = request.timeout;
    let selector = format!("cluster.x-k8s.io/deployment-name={}", key.name);
    let found = poll(cluster, timeout, INTERVAL, || {
        let sets = cluster.list(SETS, &key.namespace, &selector)?;
        Ok(sets
            .into_iter()
            .find(|s| ConfigRef::of(s).is_some_and(|r| r.name == new.name))
            .map(|s| key_of(&s).name))
    })?;
    let Some(set) = found else {
        let _ = writeln!(
            out,
            "{key}: no MachineSet on {} within {}s; the rotation is in place",
            new.name,
            timeout.as_secs()
        );
        return Ok(Done::NotYetRolled);
    };
    let deployment = cluster
        .get(
            "machinedeployments.cluster.x-k8s.io",
            Some(&key.namespace),
            &key.name,
        )?
        .unwrap_or(Value::Null);
    let _ = writeln!(
        out,
        "{key}: CAPI made MachineSet {set} on {}: it rolls the MachineDeployment out ({}), replacing every Machine",
        new.name,
        strategy(&deployment)
    );
    if !request.wait {
        let _ = writeln!(
            out,
            "{key}: watch it with kubectl get machinedeployments.cluster.x-k8s.io {} -n {} -w (or rotate with --wait)",
            key.name, key.namespace
        );
        return Ok(Done::Rotated);
    }
    let wanted = count(&deployment, "/spec/replicas");
    let mut said = None;
    let done = poll(cluster, timeout, INTERVAL * 2, || {
        let sets = cluster.list(SETS, &key.namespace, &selector)?;
        let (ready, left) = roll_out(&sets, new);
        if said != Some((ready, left)) {
            let _ = writeln!(
                out,
                "{key}: {ready}/{wanted} Ready on {}, {left} left on older MachineSets",
                new.name
            );
            said = Some((ready, left));
        }
        Ok((ready >= wanted && left == 0).then_some(()))
    })?;
    Ok(match done {
        Some(()) => {
            let _ = writeln!(out, "{key}: rolled out: every Machine is on {}", new.name);
            Done::Rotated
        }
        None => {
            let _ = writeln!(
                out,
                "{key}: the roll-out had not ended within {}s; it goes on (kubectl get machinedeployments.cluster.x-k8s.io {} -n {} -w)",
                timeout.as_secs(),
                key.name,
                key.namespace
            );
            Done::NotYetRolled
        }
    })
}
