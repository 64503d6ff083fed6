//! The replacement of a MachinePool's instances, planned without touching anything: from the
//! pool's MachinePool Machines, the creation time of the pool's current bootstrap data Secret
//! and the pool's replicas and maxUnavailable, which Machines are stale (launched before the
//! Secret), in which order they go, how many at a time, and the number of Ready Machines the
//! pool never goes below. Nothing here is remembered between runs: every step is recomputed
//! from what the cluster shows, so a re-run after an interruption goes on where it stopped.

use std::fmt;

use serde_json::Value;

/// One MachinePool Machine, as far as the replacement cares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instance {
    pub name: String,
    /// `metadata.creationTimestamp`: the instance's launch (RFC 3339, UTC, as the API server
    /// writes it, so that the text orders as the time does).
    pub created: String,
    /// A nodeRef and the Ready condition True.
    pub ready: bool,
    /// A deletionTimestamp: on its way out, not Ready, not deleted again.
    pub deleting: bool,
    /// The deletionTimestamp and the finalizers that hold it: what to name when it stays.
    pub deleting_since: String,
    pub finalizers: Vec<String>,
}

impl Instance {
    /// Reads a CAPI `Machine` (v1beta1 or v1beta2).
    pub fn of(machine: &Value) -> Instance {
        let text = |p: &str| {
            machine
                .pointer(p)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let node = machine
            .pointer("/status/nodeRef/name")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty());
        let ready_condition = machine
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        let deleting = machine
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|v| !v.is_null());
        let finalizers = machine
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect();
        Instance {
            name: text("/metadata/name"),
            created: text("/metadata/creationTimestamp"),
            ready: node && ready_condition && !deleting,
            deleting,
            deleting_since: text("/metadata/deletionTimestamp"),
            finalizers,
        }
    }

    /// Launched before the data Secret was created: it booted with older bootstrap data.
    pub fn stale(&self, secret_created: &str) -> bool {
        self.created.as_str() < secret_created
    }
}

/// `spec.strategy.rollingUpdate.maxUnavailable` as the infrastructure object writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MaxUnavailable {
    Count(u32),
    Percent(u32),
}

impl MaxUnavailable {
    /// Reads an int-or-string: `2`, `"2"` or `"25%"`; absent: 1.
    pub fn parse(value: Option<&Value>) -> Result<MaxUnavailable, String> {
        let bad = |v: &Value| format!("maxUnavailable {v}: not a count or a percent (1, \"25%\")");
        match value {
            None | Some(Value::Null) => Ok(MaxUnavailable::Count(1)),
            Some(v @ Value::Number(n)) => n
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .map(MaxUnavailable::Count)
                .ok_or_else(|| bad(v)),
            Some(v @ Value::String(s)) => {
                let (digits, percent) = match s.strip_suffix('%') {
                    Some(d) => (d, true),
                    None => (s.as_str(), false),
                };
                let n: u32 = digits.trim().parse().map_err(|_| bad(v))?;
                if percent && n > 100 {
                    return Err(bad(v));
                }
                Ok(if percent {
                    MaxUnavailable::Percent(n)
                } else {
                    MaxUnavailable::Count(n)
                })
            }
            Some(v) => Err(bad(v)),
        }
    }
}

/// How far the pool may go down: at most `max_unavailable` Machines deleted in a step, and
/// never fewer than `floor` Ready Machines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    pub replicas: u32,
    pub max_unavailable: u32,
    pub floor: u32,
}

impl Budget {
    /// A percent is of the replicas, rounded down, as Kubernetes rounds maxUnavailable. At
    /// least 1: the replacement deletes before the provider creates (it does not surge), so
    /// with 0 it still takes one instance down at a time.
    pub fn new(replicas: u32, max: MaxUnavailable) -> Budget {
        let n = match max {
            MaxUnavailable::Count(n) => n,
            MaxUnavailable::Percent(p) => (u64::from(replicas) * u64::from(p) / 100) as u32,
        };
        let max_unavailable = n.max(1);
        Budget {
            replicas,
            max_unavailable,
            floor: replicas.saturating_sub(max_unavailable),
        }
    }
}

impl fmt::Display for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "deletes up to {} Machine{} at a time, never below {} Ready",
            self.max_unavailable,
            plural(self.max_unavailable as usize),
            self.floor
        )
    }
}

pub fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The stale Machines in the order they go: those not Ready first (they are down already, so
/// deleting them costs no Ready Machine), then the oldest first, then by name.
pub fn stale<'a>(instances: &'a [Instance], secret_created: &str) -> Vec<&'a Instance> {
    let mut stale: Vec<&Instance> = instances
        .iter()
        .filter(|i| !i.deleting && i.stale(secret_created))
        .collect();
    stale.sort_by(|a, b| (a.ready, &a.created, &a.name).cmp(&(b.ready, &b.created, &b.name)));
    stale
}

pub fn ready_count(instances: &[Instance]) -> u32 {
    instances.iter().filter(|i| i.ready).count() as u32
}

/// What to do next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Next {
    /// No stale Machine is left.
    Done,
    /// Only stale Machines already being deleted are left (by an earlier run, or someone
    /// else): this many.
    Leaving(u32),
    /// Delete these Machines now, in this order.
    Delete(Vec<String>),
    /// A stale Machine is left, but deleting it would take the pool below the floor.
    Blocked { ready: u32, needed: u32 },
}

/// The next step: as many stale Machines as the budget allows, in order. A Ready Machine is
/// taken only while the Ready ones left stay at or above the floor.
pub fn next(instances: &[Instance], secret_created: &str, budget: Budget) -> Next {
    let stale = stale(instances, secret_created);
    if stale.is_empty() {
        let leaving = instances
            .iter()
            .filter(|i| i.deleting && i.stale(secret_created))
            .count() as u32;
        return if leaving == 0 {
            Next::Done
        } else {
            Next::Leaving(leaving)
        };
    }
    let ready = ready_count(instances);
    let mut may_lose = ready.saturating_sub(budget.floor);
    let mut batch = Vec::new();
    for instance in stale {
        if batch.len() as u32 == budget.max_unavailable {
            break;
        }
        if instance.ready {
            if may_lose == 0 {
                break;
            }
            may_lose -= 1;
        }
        batch.push(instance.name.clone());
    }
    if batch.is_empty() {
        return Next::Blocked {
            ready,
            needed: budget.floor + 1,
        };
    }
    Next::Delete(batch)
}

/// Whether the step that deleted `deleted` is over: those Machines are gone, and the pool has
/// as many Ready Machines as before the step, or as its replicas now when it was scaled down
/// meanwhile (CAPI then makes fewer replacements, or none).
pub fn step_over(
    instances: &[Instance],
    deleted: &[String],
    ready_before: u32,
    replicas: u32,
) -> bool {
    let gone = !instances.iter().any(|i| deleted.contains(&i.name));
    gone && ready_count(instances) >= ready_before.min(replicas)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::json;

    const SECRET: &str = "2026-12-06T02:30:00Z";

    /// `name:minute:state`, state R (Ready), N (not Ready) or D (being deleted); a minute under
    /// 30 is before the Secret.
    fn pool(spec: &str) -> Vec<Instance> {
        spec.split_whitespace()
            .map(|m| {
                let parts: Vec<&str> = m.split(':').collect();
                Instance {
                    name: parts[0].into(),
                    created: format!("2026-12-06T02:{:0>2}:00Z", parts[1]),
                    ready: parts[2] == "R",
                    deleting: parts[2] == "D",
                    deleting_since: String::new(),
                    finalizers: vec![],
                }
            })
            .collect()
    }

    fn delete(names: &[&str]) -> Next {
        Next::Delete(names.iter().map(|n| n.to_string()).collect())
    }

    #[rstest]
    #[case::one_at_a_time_oldest_first("c:12:R a:10:R b:11:R", 3, MaxUnavailable::Count(1), delete(&["a"]))]
    #[case::same_time_by_name("b:10:R a:10:R", 2, MaxUnavailable::Count(1), delete(&["a"]))]
    #[case::up_to_max_unavailable("a:10:R b:11:R c:12:R d:13:R", 4, MaxUnavailable::Count(2), delete(&["a", "b"]))]
    #[case::percent_rounds_down("a:10:R b:11:R c:12:R d:13:R", 4, MaxUnavailable::Percent(60), delete(&["a", "b"]))]
    #[case::percent_at_least_one("a:10:R b:11:R c:12:R", 3, MaxUnavailable::Percent(10), delete(&["a"]))]
    #[case::zero_is_one("a:10:R b:11:R", 2, MaxUnavailable::Count(0), delete(&["a"]))]
    #[case::only_the_stale("a:10:R new:40:R b:11:R", 3, MaxUnavailable::Count(5), delete(&["a", "b"]))]
    #[case::not_ready_stale_goes_first("a:10:R b:11:N c:12:R", 3, MaxUnavailable::Count(1), delete(&["b"]))]
    #[case::nothing_to_do("a:31:R b:45:R", 2, MaxUnavailable::Count(1), Next::Done)]
    #[case::the_last_one_still_leaving(
        "a:10:D b:45:R",
        2,
        MaxUnavailable::Count(1),
        Next::Leaving(1)
    )]
    #[case::a_fresh_one_leaving_is_not_waited_for(
        "a:40:D b:45:R",
        2,
        MaxUnavailable::Count(1),
        Next::Done
    )]
    #[case::an_empty_pool("", 0, MaxUnavailable::Count(1), Next::Done)]
    #[case::launched_with_the_secret_is_fresh("a:30:R", 1, MaxUnavailable::Count(1), Next::Done)]
    #[case::a_machine_not_ready_blocks("a:10:R b:11:R new:40:N", 3, MaxUnavailable::Count(1), Next::Blocked { ready: 2, needed: 3 })]
    #[case::a_deleting_machine_blocks("a:10:R b:11:R c:12:D", 3, MaxUnavailable::Count(1), Next::Blocked { ready: 2, needed: 3 })]
    #[case::the_budget_left_after_one_down("a:10:R b:11:R c:12:R new:40:N", 4, MaxUnavailable::Count(2), delete(&["a"]))]
    #[case::more_ready_than_replicas("a:10:R b:11:R new:40:R", 2, MaxUnavailable::Count(1), delete(&["a"]))]
    fn the_next_step(
        #[case] machines: &str,
        #[case] replicas: u32,
        #[case] max: MaxUnavailable,
        #[case] expected: Next,
    ) {
        let budget = Budget::new(replicas, max);
        assert_eq!(next(&pool(machines), SECRET, budget), expected);
    }

    #[rstest]
    #[case::default(3, MaxUnavailable::Count(1), 1, 2)]
    #[case::count(5, MaxUnavailable::Count(2), 2, 3)]
    #[case::percent(4, MaxUnavailable::Percent(25), 1, 3)]
    #[case::percent_down(10, MaxUnavailable::Percent(33), 3, 7)]
    #[case::zero(3, MaxUnavailable::Count(0), 1, 2)]
    #[case::all(3, MaxUnavailable::Percent(100), 3, 0)]
    #[case::more_than_replicas(2, MaxUnavailable::Count(5), 5, 0)]
    fn budgets(
        #[case] replicas: u32,
        #[case] max: MaxUnavailable,
        #[case] max_unavailable: u32,
        #[case] floor: u32,
    ) {
        let b = Budget::new(replicas, max);
        assert_eq!((b.max_unavailable, b.floor), (max_unavailable, floor));
    }

    #[rstest]
    #[case::absent(None, Ok(MaxUnavailable::Count(1)))]
    #[case::int(Some(json!(2)), Ok(MaxUnavailable::Count(2)))]
    #[case::int_string(Some(json!("3")), Ok(MaxUnavailable::Count(3)))]
    #[case::percent(Some(json!("25%")), Ok(MaxUnavailable::Percent(25)))]
    #[case::zero(Some(json!(0)), Ok(MaxUnavailable::Count(0)))]
    #[case::negative(Some(json!(-1)), Err("maxUnavailable -1: not a count or a percent (1, \"25%\")"))]
    #[case::too_many_percent(Some(json!("150%")), Err("maxUnavailable \"150%\": not a count or a percent (1, \"25%\")"))]
    #[case::words(Some(json!("half")), Err("maxUnavailable \"half\": not a count or a percent (1, \"25%\")"))]
    #[case::fraction(Some(json!(1.5)), Err("maxUnavailable 1.5: not a count or a percent (1, \"25%\")"))]
    fn max_unavailable(
        #[case] value: Option<Value>,
        #[case] expected: Result<MaxUnavailable, &str>,
    ) {
        assert_eq!(
            MaxUnavailable::parse(value.as_ref()),
            expected.map_err(str::to_string)
        );
    }

    /// Stopped after each step and re-run: every run recomputes what is left from the cluster
    /// alone, and the whole goes through every stale Machine once, never below the floor.
    #[rstest]
    #[case::one_at_a_time(3, MaxUnavailable::Count(1), "a b c")]
    #[case::two_at_a_time(3, MaxUnavailable::Count(2), "a,b c")]
    fn interrupted_and_resumed(
        #[case] replicas: u32,
        #[case] max: MaxUnavailable,
        #[case] steps: &str,
    ) {
        let budget = Budget::new(replicas, max);
        let mut machines = pool("a:10:R b:11:R c:12:R");
        let mut launched = 40;
        for step in steps.split(' ') {
            let Next::Delete(batch) = next(&machines, SECRET, budget) else {
                panic!("expected a delete, machines {machines:?}");
            };
            assert_eq!(batch.join(","), step);
            let before = ready_count(&machines);
            machines.retain(|m| !batch.contains(&m.name));
            assert!(ready_count(&machines) >= budget.floor);
            // Interrupted here: the replacements come up without us; a re-run sees them
            // not Ready first, which blocks the next step.
            for _ in &batch {
                launched += 1;
                machines.extend(pool(&format!("n{launched}:{launched}:N")));
            }
            assert!(!step_over(&machines, &batch, before, replicas));
            let left = machines.iter().any(|m| m.stale(SECRET));
            let blocked = matches!(next(&machines, SECRET, budget), Next::Blocked { .. });
            assert_eq!(blocked, left, "{machines:?}");
            for m in machines.iter_mut() {
                m.ready = true;
            }
            assert!(step_over(&machines, &batch, before, replicas));
        }
        assert_eq!(next(&machines, SECRET, budget), Next::Done);
    }

    /// The end of a step as the pool's replicas move under it.
    #[rstest]
    #[case::replaced("n1:40:R b:11:R c:12:R", 3, 3, true)]
    #[case::the_deleted_one_still_there("a:10:D n1:40:R b:11:R c:12:R", 3, 3, false)]
    #[case::its_replacement_not_ready("n1:40:N b:11:R c:12:R", 3, 3, false)]
    #[case::scaled_down_meanwhile_no_replacement_needed("b:11:R c:12:R", 3, 2, true)]
    #[case::scaled_up_meanwhile_back_to_before_is_enough(
        "n1:40:R b:11:R c:12:R n2:41:N",
        3,
        4,
        true
    )]
    #[case::another_machine_lost_meanwhile("n1:40:R b:11:R c:12:N", 3, 3, false)]
    fn the_end_of_a_step(
        #[case] machines: &str,
        #[case] ready_before: u32,
        #[case] replicas: u32,
        #[case] over: bool,
    ) {
        assert_eq!(
            step_over(&pool(machines), &["a".to_string()], ready_before, replicas),
            over
        );
    }

    #[rstest]
    #[case::ready(json!({"metadata": {"name": "m", "creationTimestamp": "t"}, "status": {"nodeRef": {"name": "n"}, "conditions": [{"type": "Ready", "status": "True"}]}}), true, false)]
    #[case::no_node(json!({"metadata": {"name": "m", "creationTimestamp": "t"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}), false, false)]
    #[case::condition_false(json!({"metadata": {"name": "m", "creationTimestamp": "t"}, "status": {"nodeRef": {"name": "n"}, "conditions": [{"type": "Ready", "status": "False"}]}}), false, false)]
    #[case::deleting(json!({"metadata": {"name": "m", "creationTimestamp": "t", "deletionTimestamp": "u"}, "status": {"nodeRef": {"name": "n"}, "conditions": [{"type": "Ready", "status": "True"}]}}), false, true)]
    fn machines(#[case] machine: Value, #[case] ready: bool, #[case] deleting: bool) {
        let i = Instance::of(&machine);
        assert_eq!(
            (i.ready, i.deleting, i.name.as_str()),
            (ready, deleting, "m")
        );
    }
}
