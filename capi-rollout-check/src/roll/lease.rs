//! One `roll` per pool: a `coordination.k8s.io/v1` Lease in the pool's namespace, held as
//! Kubernetes' own leader election holds one. It is created atomically (a second create of the
//! name fails), names its holder (`user@host pid N`), is renewed as the roll goes on with a
//! JSON patch that tests the holder first, and is deleted when the roll stops for any reason it
//! can catch. A Lease not renewed for longer than its duration was left by a roll that could
//! not release it (killed, or the API server out of reach when it stopped): it is taken over
//! only when the person asks for it (`--take-over`), atomically again.
//!
//! The Lease holds off other `roll`s only. Actors that do not know it (the cluster autoscaler,
//! a MachineHealthCheck, a person with kubectl) are bounded by the re-read before each delete.

use std::cell::Cell;

use capi_rollout_check::drift::time;
use serde_json::{json, Value};

use super::RollError;
use crate::cluster::{Cluster, ClusterError, DryRun, Fault};

pub const LEASES: &str = "leases.coordination.k8s.io";
/// How long a Lease holds without a renewal.
pub const DURATION_SECONDS: i64 = 60;
/// A renewal is due once a third of the duration has passed since the last one.
const RENEW_AFTER_MICROS: i64 = DURATION_SECONDS * 1_000_000 / 3;
const PREFIX: &str = "capi-rollout-check-roll-";
const MANAGED_BY: &str = "app.kubernetes.io/managed-by";

/// The Lease's name for a pool: `capi-rollout-check-roll-<pool>`, shortened with a hash of
/// the pool's name where that would pass the 253 characters of a name.
pub fn name(pool: &str) -> String {
    let full = format!("{PREFIX}{pool}");
    if full.len() <= 253 {
        return full;
    }
    // FNV-1a: the same name for the same pool on every machine.
    let hash = pool.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let keep = pool.get(..253 - PREFIX.len() - 17).unwrap_or(pool);
    format!("{PREFIX}{}-{hash:016x}", keep.trim_end_matches(['.', '-']))
}

/// Who runs this roll: `user@host pid N`.
pub fn identity() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(account);
    format!("{user}@{} pid {}", host(), std::process::id())
}

/// The account this process runs as, where no USER says it (a CronJob, a CI runner).
fn account() -> String {
    #[cfg(unix)]
    {
        // SAFETY: getpwuid returns a pointer into static storage or null; the name is copied
        // out at once, on this thread.
        unsafe {
            let uid = libc::getuid();
            let entry = libc::getpwuid(uid);
            if !entry.is_null() && !(*entry).pw_name.is_null() {
                return std::ffi::CStr::from_ptr((*entry).pw_name)
                    .to_string_lossy()
                    .into_owned();
            }
            return format!("uid {uid}");
        }
    }
    #[allow(unreachable_code)]
    "unknown-user".into()
}

fn host() -> String {
    #[cfg(unix)]
    {
        let mut buffer = [0u8; 256];
        // SAFETY: the buffer's length is passed; gethostname writes at most that many bytes.
        let r = unsafe { libc::gethostname(buffer.as_mut_ptr().cast(), buffer.len()) };
        if r == 0 {
            let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
            if end > 0 {
                return String::from_utf8_lossy(&buffer[..end]).into_owned();
            }
        }
    }
    std::env::var("HOSTNAME").unwrap_or_else(|_| "unknown-host".into())
}

/// A MicroTime as the API server writes it: `2026-12-06T03:00:00.000000Z`.
pub fn micro_time(micros: i64) -> String {
    let text = time::format(micros.div_euclid(1_000_000));
    format!(
        "{}.{:06}Z",
        text.trim_end_matches('Z'),
        micros.rem_euclid(1_000_000)
    )
}

fn parse_micro_time(text: &str) -> Option<i64> {
    let seconds = time::parse(text)?;
    let fraction = text
        .split_once('.')
        .map(|(_, f)| f.trim_end_matches(|c: char| !c.is_ascii_digit()))
        .unwrap_or("");
    let micros: String = fraction.chars().chain("000000".chars()).take(6).collect();
    Some(seconds * 1_000_000 + micros.parse::<i64>().unwrap_or(0))
}

/// What a Lease says of its holder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    pub identity: String,
    /// `spec.acquireTime`, microseconds.
    pub acquired: Option<i64>,
    /// `spec.renewTime` (else the acquireTime), microseconds.
    pub renewed: Option<i64>,
    pub duration: i64,
    pub transitions: i64,
    /// The texts as read, for the takeover's test.
    renew_text: Option<String>,
}

impl Holder {
    pub fn of(lease: &Value) -> Holder {
        let text = |key: &str| {
            lease
                .pointer(&format!("/spec/{key}"))
                .and_then(Value::as_str)
        };
        let number = |key: &str| {
            lease
                .pointer(&format!("/spec/{key}"))
                .and_then(Value::as_i64)
        };
        let acquired = text("acquireTime").and_then(parse_micro_time);
        Holder {
            identity: text("holderIdentity").unwrap_or("").to_string(),
            acquired,
            renewed: text("renewTime").and_then(parse_micro_time).or(acquired),
            duration: number("leaseDurationSeconds").unwrap_or(DURATION_SECONDS),
            transitions: number("leaseTransitions").unwrap_or(0),
            renew_text: text("renewTime").map(str::to_string),
        }
    }

    /// Not renewed for longer than its duration (or never renewed, or holding no one).
    pub fn lapsed(&self, now: i64) -> bool {
        self.identity.is_empty()
            || self
                .renewed
                .is_none_or(|r| now - r > self.duration * 1_000_000)
    }

    /// `alice@laptop pid 4242 took it 3m05s ago, last renewed 12s ago`.
    pub fn describe(&self, now: i64) -> String {
        let ago = |t: Option<i64>| {
            t.map_or("at an unknown time".into(), |t| {
                format!("{} ago", time::span((now - t) / 1_000_000))
            })
        };
        let who = if self.identity.is_empty() {
            "no one"
        } else {
            &self.identity
        };
        format!(
            "{who} took it {}, last renewed {}",
            ago(self.acquired),
            ago(self.renewed)
        )
    }
}

/// The Lease this roll holds.
#[derive(Debug)]
pub struct Lease {
    pub namespace: String,
    pub name: String,
    pub pool: String,
    pub identity: String,
    renewed: Cell<i64>,
}

/// `Lease fleet/capi-rollout-check-roll-pool-1`.
fn shown(namespace: &str, name: &str) -> String {
    format!("Lease {namespace}/{name}")
}

/// Takes the pool's Lease for `identity`. Another holder: refused at once
/// ([`RollError::Held`]), unless its Lease lapsed and `take_over` is set.
pub fn acquire(
    cluster: &dyn Cluster,
    namespace: &str,
    pool: &str,
    identity: &str,
    take_over: bool,
) -> Result<Lease, RollError> {
    let name = name(pool);
    let now = cluster.now_micros();
    let lease = Lease {
        namespace: namespace.to_string(),
        name: name.clone(),
        pool: pool.to_string(),
        identity: identity.to_string(),
        renewed: Cell::new(now),
    };
    let object = json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace, "labels": {MANAGED_BY: "capi-rollout-check"}},
        "spec": {
            "holderIdentity": identity,
            "leaseDurationSeconds": DURATION_SECONDS,
            "acquireTime": micro_time(now),
            "renewTime": micro_time(now),
            "leaseTransitions": 0,
        },
    });
    // Created between a failed create and the read, or deleted between them: one more try.
    for _ in 0..2 {
        match cluster.create(&object, DryRun::None) {
            Ok(_) => return Ok(lease),
            Err(e) if e.fault() == Fault::AlreadyExists => {}
            Err(e) => return Err(e.into()),
        }
        let Some(existing) = cluster.get(LEASES, Some(namespace), &name)? else {
            continue;
        };
        let holder = Holder::of(&existing);
        if !holder.lapsed(now) {
            return Err(lease.held(&holder, now, take_over));
        }
        if !take_over {
            return Err(lease.held(&holder, now, false));
        }
        return lease.take_over(cluster, &holder, now).map(|()| lease);
    }
    Err(RollError::Held(format!(
        "{}: created and deleted by someone else while roll tried to take it; run the command again",
        shown(namespace, &name)
    )))
}

impl Lease {
    pub fn shown(&self) -> String {
        shown(&self.namespace, &self.name)
    }

    /// The refusal when another roll holds the pool.
    fn held(&self, holder: &Holder, now: i64, take_over: bool) -> RollError {
        let lapsed = holder.lapsed(now);
        let what = format!(
            "MachinePool {}/{} is being rolled by another roll: {} ({}; its duration is {}s)",
            self.namespace,
            self.pool,
            self.shown(),
            holder.describe(now),
            holder.duration
        );
        let next = if !lapsed {
            format!(
                "wait for it to end (kubectl get {LEASES} {} -n {} -w)",
                self.name, self.namespace
            )
        } else if take_over {
            "it lapsed, but another roll took it first; run the command again".to_string()
        } else {
            format!(
                "it lapsed: a roll that stopped without releasing it (killed, or the API server out \
                 of reach). If that roll is no longer running, take it over: capi-rollout-check \
                 roll machinepool/{} -n {} --take-over",
                self.pool, self.namespace
            )
        };
        RollError::Held(format!("{what}; {next}"))
    }

    /// Takes a lapsed Lease: only if it still names the holder and renewal read.
    fn take_over(&self, cluster: &dyn Cluster, holder: &Holder, now: i64) -> Result<(), RollError> {
        let mut patch =
            vec![json!({"op": "test", "path": "/spec/holderIdentity", "value": holder.identity})];
        if let Some(renewed) = &holder.renew_text {
            patch.push(json!({"op": "test", "path": "/spec/renewTime", "value": renewed}));
        }
        patch.extend([
            json!({"op": "add", "path": "/spec/holderIdentity", "value": self.identity}),
            json!({"op": "add", "path": "/spec/acquireTime", "value": micro_time(now)}),
            json!({"op": "add", "path": "/spec/renewTime", "value": micro_time(now)}),
            json!({"op": "add", "path": "/spec/leaseDurationSeconds", "value": DURATION_SECONDS}),
            json!({"op": "add", "path": "/spec/leaseTransitions", "value": holder.transitions + 1}),
        ]);
        match cluster.patch(
            LEASES,
            &self.namespace,
            &self.name,
            &Value::Array(patch),
            DryRun::None,
        ) {
            Ok(_) => Ok(()),
            Err(e) if e.fault() == Fault::Transient => Err(e.into()),
            Err(_) => {
                let now_holder = cluster
                    .get(LEASES, Some(&self.namespace), &self.name)?
                    .map(|l| Holder::of(&l));
                Err(match now_holder {
                    Some(h) => self.held(&h, cluster.now_micros(), true),
                    None => RollError::Held(format!(
                        "{}: deleted by someone else while roll took it over; run the command again",
                        self.shown()
                    )),
                })
            }
        }
    }

    /// Renews the Lease if a renewal is due (always with `now_too`): a JSON patch that tests
    /// it still names this roll first. A Lease another roll took over: [`RollError::Held`].
    pub fn renew(&self, cluster: &dyn Cluster, now_too: bool) -> Result<(), RollError> {
        let now = cluster.now_micros();
        if !now_too && now - self.renewed.get() < RENEW_AFTER_MICROS {
            return Ok(());
        }
        let patch = json!([
            {"op": "test", "path": "/spec/holderIdentity", "value": self.identity},
            {"op": "add", "path": "/spec/renewTime", "value": micro_time(now)},
        ]);
        match cluster.patch(LEASES, &self.namespace, &self.name, &patch, DryRun::None) {
            Ok(_) => {
                self.renewed.set(now);
                Ok(())
            }
            Err(e) if e.fault() == Fault::Transient => Err(e.into()),
            Err(e) => {
                let lease = cluster.get(LEASES, Some(&self.namespace), &self.name)?;
                let holder = lease.as_ref().map(Holder::of);
                match holder {
                    Some(h) if h.identity == self.identity => Err(e.into()),
                    Some(h) => Err(RollError::Held(format!(
                        "{} was taken over: {}; this roll stops",
                        self.shown(),
                        h.describe(now)
                    ))),
                    None => Err(RollError::Held(format!(
                        "{} was deleted by someone else; this roll stops",
                        self.shown()
                    ))),
                }
            }
        }
    }

    /// Deletes the Lease if it still names this roll. `Err`: why it is left (it lapses
    /// [`DURATION_SECONDS`] after its last renewal).
    pub fn release(&self, cluster: &dyn Cluster) -> Result<(), ClusterError> {
        let Some(lease) = cluster.get(LEASES, Some(&self.namespace), &self.name)? else {
            return Ok(());
        };
        if Holder::of(&lease).identity != self.identity {
            return Ok(());
        }
        match cluster.delete(LEASES, &self.namespace, &self.name) {
            Err(e) if e.fault() != Fault::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// When the Lease lapses, if it is left: its last renewal plus its duration.
    pub fn lapses_at(&self) -> String {
        time::format(self.renewed.get() / 1_000_000 + DURATION_SECONDS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    const T0: i64 = 1_796_526_000_000_000; // 2026-12-06T03:00:00Z

    fn lease(holder: &str, renewed: &str) -> Value {
        json!({"spec": {"holderIdentity": holder, "leaseDurationSeconds": 60,
            "acquireTime": "2026-12-06T02:55:00.000000Z", "renewTime": renewed, "leaseTransitions": 2}})
    }

    #[test]
    fn times_read_back_as_written() {
        assert_eq!(micro_time(T0 + 1_500), "2026-12-06T03:00:00.001500Z");
        assert_eq!(parse_micro_time(&micro_time(T0 + 1_500)), Some(T0 + 1_500));
        assert_eq!(parse_micro_time("2026-12-06T03:00:00Z"), Some(T0));
    }

    #[rstest]
    #[case::renewed_just_now(lease("a@h pid 1", "2026-12-06T02:59:59.000000Z"), false)]
    #[case::renewed_at_its_duration(lease("a@h pid 1", "2026-12-06T02:59:00.000000Z"), false)]
    #[case::a_microsecond_past_it(lease("a@h pid 1", "2026-12-06T02:58:59.999999Z"), true)]
    #[case::no_holder(lease("", "2026-12-06T02:59:59.000000Z"), true)]
    #[case::never_renewed_acquired_long_ago(json!({"spec": {"holderIdentity": "a", "acquireTime": "2026-12-06T02:00:00.000000Z"}}), true)]
    #[case::no_times(json!({"spec": {"holderIdentity": "a"}}), true)]
    fn lapses(#[case] lease: Value, #[case] lapsed: bool) {
        assert_eq!(Holder::of(&lease).lapsed(T0), lapsed);
    }

    #[test]
    fn the_identity_names_user_host_and_process() {
        let id = identity();
        assert!(
            id.ends_with(&format!(" pid {}", std::process::id())),
            "{id}"
        );
        let (user, host) = id.split_once('@').unwrap();
        assert!(!user.is_empty() && !host.starts_with(' '), "{id}");
    }

    #[test]
    fn a_holder_described() {
        let h = Holder::of(&lease("alice@laptop pid 42", "2026-12-06T02:59:48.000000Z"));
        assert_eq!(
            h.describe(T0),
            "alice@laptop pid 42 took it 5m00s ago, last renewed 12s ago"
        );
        assert_eq!(h.transitions, 2);
    }

    #[rstest]
    #[case::short("pool-1", "capi-rollout-check-roll-pool-1")]
    #[case::at_the_limit(&"p".repeat(229), &format!("{PREFIX}{}", "p".repeat(229)))]
    fn names(#[case] pool: &str, #[case] expected: &str) {
        assert_eq!(name(pool), expected);
    }

    #[test]
    fn a_long_name_is_shortened_the_same_way_each_time() {
        let pool = "p".repeat(253);
        let n = name(&pool);
        assert_eq!(n.len(), 253, "{n}");
        assert_eq!(n, name(&pool));
        assert_ne!(n, name(&format!("{}q", "p".repeat(252))));
    }
}
