//! What keeps a roll safe on a pool others act on too: the Lease (one roll per pool), the
//! read before each delete and the budget from the replicas as they are, faults, and what a
//! stopped roll says. Each case checks the floor held by roll's own deletes.

use std::cell::Cell;

use rstest::rstest;
use serde_json::{json, Value};

use super::{deletes, fleet, pool, request, run};
use crate::cluster::ClusterError;
use crate::fake::{Fake, LEASES, MACHINES, NOW, POOLS};
use crate::roll::lease::{self, micro_time};
use crate::roll::{RollError, Rolled, EXIT_ERROR, EXIT_HELD, EXIT_TIMED_OUT};

const LEASE: &str = "capi-rollout-check-roll-pool-1";

/// Three stale Ready Machines, 3 replicas, maxUnavailable 1: a floor of 2.
fn three() -> Fake {
    fleet(3, json!(null), "m-a:10:R m-b:11:R m-c:12:R")
}

/// Every Ready count roll's deletes left is at least `floor`.
fn floor_held(fake: &Fake, floor: u32) {
    let after = fake.ready_after_delete.borrow();
    assert!(
        after.iter().all(|&r| r >= floor),
        "Ready after each delete: {after:?}, floor {floor}"
    );
}

fn leases(fake: &Fake) -> Vec<String> {
    fake.lease_writes
        .borrow()
        .iter()
        .map(|w| w.replace(&format!(" {LEASE}"), ""))
        .collect()
}

fn refused(what: &str) -> ClusterError {
    ClusterError::Failed {
        command: format!("{what} ..."),
        message: "The connection to the server 127.0.0.1:6443 was refused - did you specify the right host or port?".into(),
    }
}

/// Another roll's Lease, acquired `acquired` and last renewed `renewed` seconds before now.
fn held_by(fake: &Fake, holder: &str, acquired: i64, renewed: i64) {
    fake.put(
        LEASES,
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": LEASE, "namespace": "fleet"},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 60,
                "acquireTime": micro_time(NOW - acquired * 1_000_000),
                "renewTime": micro_time(NOW - renewed * 1_000_000), "leaseTransitions": 0}}),
    );
}

fn do_at(fake: &Fake, look: usize, action: impl Fn(&Fake) + 'static) {
    fake.at_look.borrow_mut().push((look, Box::new(action)));
}

#[test]
fn a_roll_holds_the_lease_from_before_its_plan_to_its_end() {
    let fake = three();
    let (result, out) = run(&fake, &request(false, &|| false));
    assert_eq!(result.unwrap(), Rolled::Replaced(3), "{out}");
    let writes = leases(&fake);
    assert_eq!(writes.first().map(String::as_str), Some("lease create"));
    assert_eq!(writes.last().map(String::as_str), Some("lease release"));
    // Renewed just before each of the three deletes, at least.
    assert!(
        writes.iter().filter(|w| *w == "lease renew").count() >= 3,
        "{writes:?}"
    );
    assert!(fake.object(LEASES, LEASE).is_none());
    floor_held(&fake, 2);
}

#[test]
fn a_dry_run_takes_no_lease() {
    let fake = three();
    held_by(&fake, "bob@ops pid 7", 300, 12);
    let (result, _) = run(&fake, &request(true, &|| false));
    assert_eq!(result.unwrap(), Rolled::DryRun);
    assert!(leases(&fake).is_empty());
}

/// A second roll while the first holds the Lease: refused at once, naming the holder and the
/// Lease's age; nothing deleted, the Lease untouched.
#[rstest]
#[case::renewed(12, false,
    "MachinePool fleet/pool-1 is being rolled by another roll: Lease fleet/capi-rollout-check-roll-pool-1 (bob@ops pid 7 took it 5m00s ago, last renewed 12s ago; its duration is 60s); wait for it to end (kubectl get leases.coordination.k8s.io capi-rollout-check-roll-pool-1 -n fleet -w)")]
#[case::renewed_even_with_take_over(12, true,
    "MachinePool fleet/pool-1 is being rolled by another roll: Lease fleet/capi-rollout-check-roll-pool-1 (bob@ops pid 7 took it 5m00s ago, last renewed 12s ago; its duration is 60s); wait for it to end")]
#[case::lapsed_without_take_over(240, false,
    "MachinePool fleet/pool-1 is being rolled by another roll: Lease fleet/capi-rollout-check-roll-pool-1 (bob@ops pid 7 took it 5m00s ago, last renewed 4m00s ago; its duration is 60s); it lapsed: a roll that stopped without releasing it (killed, or the API server out of reach). If that roll is no longer running, take it over: capi-rollout-check roll machinepool/pool-1 -n fleet --take-over")]
fn a_second_roll_is_refused(#[case] renewed: i64, #[case] take_over: bool, #[case] message: &str) {
    let fake = three();
    held_by(&fake, "bob@ops pid 7", 300, renewed);
    let before = fake.object(LEASES, LEASE);
    let mut request = request(false, &|| false);
    request.take_over = take_over;
    let (result, out) = run(&fake, &request);
    let e = result.unwrap_err();
    assert_eq!(e.exit_code(), EXIT_HELD);
    assert!(e.to_string().starts_with(message), "{e}");
    assert!(deletes(&fake).is_empty());
    assert_eq!(fake.object(LEASES, LEASE), before);
    assert_eq!(out, "", "a refused roll prints no plan");
}

#[test]
fn a_lapsed_lease_taken_over_when_asked() {
    let fake = three();
    held_by(&fake, "bob@ops pid 7", 300, 240);
    let mut request = request(false, &|| false);
    request.take_over = true;
    let taken = std::rc::Rc::new(Cell::new(None));
    let seen = taken.clone();
    do_at(&fake, 2, move |f| seen.set(f.object(LEASES, LEASE)));
    let (result, out) = run(&fake, &request);
    assert_eq!(result.unwrap(), Rolled::Replaced(3), "{out}");
    let lease = taken.take().expect("the Lease during the roll");
    assert_eq!(lease["spec"]["holderIdentity"], json!(lease::identity()));
    assert_eq!(lease["spec"]["leaseTransitions"], json!(1));
    let writes = leases(&fake);
    assert_eq!(writes[..2], ["lease create", "lease take over"]);
    assert_eq!(writes.last().unwrap(), "lease release");
}

#[test]
fn a_lease_taken_over_mid_roll_stops_it_with_nothing_more_deleted() {
    let fake = three();
    // During the wait for m-a's replacement, another roll (with --take-over) takes the Lease.
    do_at(&fake, 4, |f| held_by(f, "carol@ops pid 9", 0, 0));
    let (result, out) = run(&fake, &request(false, &|| false));
    let e = result.unwrap_err();
    assert_eq!(e.exit_code(), EXIT_HELD, "{out}");
    assert!(
        e.to_string().starts_with(
            "Lease fleet/capi-rollout-check-roll-pool-1 was taken over: carol@ops pid 9 took it"
        ),
        "{e}"
    );
    assert!(
        e.to_string()
            .ends_with("; this roll stops: 1 Machine deleted so far by this roll"),
        "{e}"
    );
    assert_eq!(deletes(&fake), ["delete m-a"]);
    assert_eq!(
        fake.object(LEASES, LEASE).unwrap()["spec"]["holderIdentity"],
        json!("carol@ops pid 9"),
        "not released: it is carol's"
    );
}

/// The Lease goes whatever ends the roll.
#[rstest]
#[case::timed_out(EXIT_TIMED_OUT)]
#[case::refused_delete(EXIT_ERROR)]
fn released_on_every_stop(#[case] code: u8) {
    let mut fake = three();
    if code == EXIT_TIMED_OUT {
        fake.never_ready = true;
    } else {
        fake.fail_next.borrow_mut().push((
            "delete",
            ClusterError::Failed {
                command: "delete".into(),
                message: "admission webhook \"deny.example.com\" denied the request: frozen".into(),
            },
        ));
    }
    let (result, out) = run(&fake, &request(false, &|| false));
    assert_eq!(result.unwrap_err().exit_code(), code, "{out}");
    assert_eq!(leases(&fake).last().unwrap(), "lease release");
    assert!(fake.object(LEASES, LEASE).is_none());
}

#[test]
fn a_lease_it_cannot_release_is_said_with_the_way_on() {
    let fake = three();
    let once = Cell::new(false);
    let stop = || {
        if !once.get() && !fake.writes.borrow().is_empty() {
            once.set(true);
            // The API server goes away as the person presses Ctrl-C.
            fake.fail_next.borrow_mut().push(("get", refused("get")));
        }
        once.get()
    };
    let (result, out) = run(&fake, &request(false, &stop));
    let e = result.unwrap_err();
    assert_eq!(e.exit_code(), 130, "{out}");
    assert!(e.to_string().contains("; Lease fleet/capi-rollout-check-roll-pool-1 is left (kubectl get ...: The connection to the server 127.0.0.1:6443 was refused - did you specify the right host or port?): it lapses at 2026-12-06T03:11:"), "{e}");
    assert!(
        e.to_string().ends_with(
            "(60s after its last renewal); then the next roll takes it with --take-over"
        ),
        "{e}"
    );
}

/// Someone deletes a Ready Machine after roll decided on m-a and before its delete: the read
/// just before the delete sees it, and roll decides again; it waits for the pool to be whole.
#[test]
fn a_machine_deleted_by_someone_else_between_the_decision_and_the_delete() {
    let fake = three();
    // Look 2 is the decision's read, look 3 the read just before the delete.
    do_at(&fake, 3, |f| f.mark_deleting("m-c"));
    let (result, out) = run(&fake, &request(false, &|| false));
    assert_eq!(result.unwrap(), Rolled::Replaced(2), "{out}");
    assert!(out.contains("MachinePool fleet/pool-1 changed since roll decided to delete Machine m-a (Ready 3 -> 2): deciding again\n"), "{out}");
    assert_eq!(
        deletes(&fake),
        ["delete m-a", "delete m-b"],
        "m-c, being deleted, is never deleted again"
    );
    floor_held(&fake, 2);
}

/// Another actor takes the pool below its floor: roll says so, deletes nothing until the pool
/// is back above it.
#[test]
fn the_pool_taken_below_its_floor_by_someone_else() {
    let fake = three();
    do_at(&fake, 2, |f| {
        f.mark_deleting("m-b");
        f.mark_deleting("m-c");
    });
    let (result, out) = run(&fake, &request(false, &|| false));
    assert_eq!(result.unwrap(), Rolled::Replaced(1), "{out}");
    assert!(out.contains("below the floor: 1 of 3 Machines Ready, floor 2: not by roll (a Machine deleted or not Ready by someone else); waiting for 3 Ready before the next delete\n"), "{out}");
    assert_eq!(deletes(&fake), ["delete m-a"]);
    floor_held(&fake, 2);
}

/// The autoscaler (or a person) changes replicas mid-roll: the budget follows at once.
#[rstest]
#[case::scaled_down_while_waiting_for_a_replacement(4, 4, 3, 2, "MachinePool fleet/pool-1: replicas now 3 (were 4): maxUnavailable 1: deletes up to 1 Machine at a time, never below 2 Ready\n")]
#[case::scaled_up_before_the_first_delete(3, 2, 4, 3, "MachinePool fleet/pool-1: replicas now 4 (were 3): maxUnavailable 1: deletes up to 1 Machine at a time, never below 3 Ready\nMachinePool fleet/pool-1 changed since roll decided to delete Machine m-a (Ready 3 -> 4, replicas 3 -> 4): deciding again\nstep 1: deleted Machine fleet/m-a")]
fn replicas_changed_mid_roll(
    #[case] replicas: u32,
    #[case] look: usize,
    #[case] to: u32,
    #[case] floor: u32,
    #[case] said: &str,
) {
    let machines = ["m-a:10:R", "m-b:11:R", "m-c:12:R", "m-d:13:R"][..replicas as usize].join(" ");
    let fake = fleet(replicas, json!(null), &machines);
    do_at(&fake, look, move |f| f.scale(to));
    let (result, out) = run(&fake, &request(false, &|| false));
    assert_eq!(
        result.unwrap(),
        Rolled::Replaced(replicas as usize),
        "{out}"
    );
    assert!(out.contains(said), "{out}");
    floor_held(&fake, floor);
    let after: Vec<Value> = fake.list_now(MACHINES);
    assert_eq!(after.len(), to as usize, "{after:?}");
}

/// Transient API errors are retried within the step's timeout; the roll goes on.
#[test]
fn transient_errors_are_retried() {
    let fake = three();
    do_at(&fake, 2, |f| {
        f.fail_next.borrow_mut().extend([
            ("list", refused("get machines")),
            ("delete", ClusterError::Failed { command: "delete".into(), message: "Error from server (TooManyRequests): the server has received too many requests".into() }),
            ("patch", ClusterError::Failed { command: "patch".into(), message: "Error from server (InternalError): etcdserver: leader changed".into() }),
            ("get", ClusterError::Failed { command: "get".into(), message: "Error from server (ServiceUnavailable): the server is currently unable to handle the request".into() }),
        ]);
    });
    let (result, out) = run(&fake, &request(false, &|| false));
    assert_eq!(result.unwrap(), Rolled::Replaced(3), "{out}");
    assert!(out.contains("retrying: kubectl "), "{out}");
    // The throttled delete of m-a was sent again, and went through once.
    assert_eq!(deletes(&fake), ["delete m-a", "delete m-b", "delete m-c"]);
    floor_held(&fake, 2);
}

#[test]
fn an_api_server_out_of_reach_for_longer_than_the_timeout() {
    let fake = three();
    do_at(&fake, 2, |f| {
        f.fail_next
            .borrow_mut()
            .extend((0..100).map(|_| ("get", refused("get"))));
    });
    let (result, out) = run(&fake, &request(false, &|| false));
    let e = result.unwrap_err();
    assert_eq!(e.exit_code(), EXIT_TIMED_OUT, "{out}");
    assert!(e.to_string().starts_with("the API server did not answer for 60s (kubectl get ...: The connection to the server 127.0.0.1:6443 was refused"), "{e}");
    assert!(deletes(&fake).is_empty());
}

/// A permanent error stops the roll with nothing more deleted, and says how to go on.
#[test]
fn a_refused_delete_stops_the_roll() {
    let fake = three();
    do_at(&fake, 4, |f| {
        f.fail_next.borrow_mut().push((
            "delete",
            ClusterError::Forbidden {
                verb: "delete".into(),
                resource: MACHINES.into(),
                namespace: "fleet".into(),
                message: "machines.cluster.x-k8s.io \"m-b\" is forbidden".into(),
            },
        ));
    });
    let (result, out) = run(&fake, &request(false, &|| false));
    let e = result.unwrap_err();
    assert_eq!(e.exit_code(), EXIT_ERROR, "{out}");
    assert_eq!(e.to_string(), "RBAC: you may not delete machines.cluster.x-k8s.io in namespace fleet; nothing was changed (machines.cluster.x-k8s.io \"m-b\" is forbidden): 1 Machine deleted so far; roll kept at least 2 Ready by its own deletes; re-run the same command to go on: capi-rollout-check roll machinepool/pool-1 -n fleet");
    assert_eq!(deletes(&fake), ["delete m-a"]);
}

#[test]
fn a_machine_stuck_deleting_is_named() {
    let mut fake = three();
    fake.stuck = vec!["m-a"];
    let (result, out) = run(&fake, &request(false, &|| false));
    let e = result.unwrap_err();
    assert_eq!(e.exit_code(), EXIT_TIMED_OUT, "{out}");
    assert!(e.to_string().starts_with("timed out after 60s waiting for the replacement of m-a; Machine fleet/m-a is still being deleted (since 2026-12-06T03:20:00Z; finalizers: machine.cluster.x-k8s.io): a drain or a finalizer holds it (kubectl describe machines.cluster.x-k8s.io m-a -n fleet): 1 Machine deleted so far"), "{e}");
}

/// A replacement the provider holds not Ready: the roll stops after its timeout with nothing
/// more deleted; once it is Ready, the printed command finishes the roll.
#[test]
fn a_replacement_never_ready_then_the_printed_command() {
    let mut fake = three();
    fake.never_ready = true;
    let (result, out) = run(&fake, &request(false, &|| false));
    let e = result.unwrap_err();
    assert_eq!(e.exit_code(), EXIT_TIMED_OUT, "{out}");
    let message = e.to_string();
    assert!(message.starts_with("timed out after 60s waiting for the replacement of m-a; Machine fleet/new-1 (launched 2026-12-06T03:00:01Z) is not Ready: 1 Machine deleted so far; roll kept at least 2 Ready by its own deletes; re-run the same command to go on: capi-rollout-check roll machinepool/pool-1 -n fleet"), "{message}");
    assert_eq!(deletes(&fake), ["delete m-a"]);
    fake.never_ready = false;
    let command = message.rsplit("to go on: ").next().unwrap();
    assert_eq!(
        command,
        "capi-rollout-check roll machinepool/pool-1 -n fleet"
    );
    let (result, out) = run(&fake, &request(false, &|| false));
    assert_eq!(result.unwrap(), Rolled::Replaced(2), "{out}");
    floor_held(&fake, 2);
}

#[test]
fn a_newer_rotation_mid_roll_stops_it() {
    let fake = three();
    do_at(&fake, 4, |f| {
        let mut p = f.object(POOLS, "pool-1").unwrap();
        p["spec"]["template"]["spec"]["bootstrap"]["dataSecretName"] = json!("pool-1-c");
        f.put(POOLS, p);
    });
    let (result, out) = run(&fake, &request(false, &|| false));
    let e = result.unwrap_err();
    assert_eq!(e.exit_code(), EXIT_ERROR, "{out}");
    assert!(e.to_string().starts_with("MachinePool fleet/pool-1's dataSecretName changed from pool-1-b to pool-1-c: a newer rotation; run roll again for its data: 1 Machine deleted so far"), "{e}");
}

/// Before anything is written: no kubectl, a cluster that does not answer, the Lease's RBAC.
#[rstest]
#[case::unreachable(vec![("get", refused("get"))], vec![],
    "the cluster did not answer: kubectl get ...: The connection to the server 127.0.0.1:6443 was refused - did you specify the right host or port?; nothing was written")]
#[case::no_lease_rbac(vec![], vec![("create", LEASES)],
    "RBAC: you may not create leases.coordination.k8s.io in namespace fleet; nothing was changed")]
#[case::no_lease_patch(vec![], vec![("patch", LEASES)],
    "RBAC: you may not patch leases.coordination.k8s.io in namespace fleet; nothing was changed")]
fn refused_before_any_write(
    #[case] fail: Vec<(&'static str, ClusterError)>,
    #[case] denied: Vec<(&'static str, &'static str)>,
    #[case] message: &str,
) {
    let fake = Fake { denied, ..three() };
    fake.fail_next.borrow_mut().extend(fail);
    let (result, _) = run(&fake, &request(false, &|| false));
    let e = result.unwrap_err();
    assert_eq!(e.exit_code(), EXIT_ERROR);
    assert!(e.to_string().starts_with(message), "{e}");
    assert!(deletes(&fake).is_empty() && leases(&fake).is_empty());
}

#[test]
fn an_eks_pool_it_cannot_read_is_not_guessed() {
    let fake = Fake {
        denied: vec![(
            "get",
            "awsmanagedmachinepools.infrastructure.cluster.x-k8s.io",
        )],
        ..three()
    };
    fake.put(POOLS, pool("AWSManagedMachinePool", 3));
    let (result, out) = run(&fake, &request(false, &|| false));
    let e = result.unwrap_err();
    assert!(matches!(e, RollError::Input(_)));
    assert_eq!(e.to_string(), "AWSManagedMachinePool fleet/pool-1 (CAPA): cannot read it (RBAC: forbidden; it needs: kubectl auth can-i get awsmanagedmachinepools.infrastructure.cluster.x-k8s.io -n fleet), so capi-rollout-check cannot tell what happens to the existing instances: if it has spec.awsLaunchTemplate, CAPA replaces every instance on a rotation (an EKS managed node group update); if not, it never reads bootstrap data and a rotation changes no instance; roll deletes nothing");
    assert_eq!(out, "");
    assert!(deletes(&fake).is_empty());
}

#[test]
fn the_pool_deleted_mid_roll_stops_it_after_three_reads() {
    let fake = three();
    do_at(&fake, 4, |f| {
        f.objects.borrow_mut().remove(&(
            POOLS.to_string(),
            "fleet".to_string(),
            "pool-1".to_string(),
        ));
    });
    let (result, out) = run(&fake, &request(false, &|| false));
    let e = result.unwrap_err();
    assert_eq!(e.exit_code(), EXIT_ERROR, "{out}");
    assert!(
        e.to_string()
            .starts_with("MachinePool fleet/pool-1 was deleted: 1 Machine deleted so far"),
        "{e}"
    );
    assert_eq!(deletes(&fake), ["delete m-a"]);
}

#[test]
fn a_lease_deleted_by_someone_else_mid_roll_stops_it() {
    let fake = three();
    do_at(&fake, 4, |f| {
        f.objects.borrow_mut().remove(&(
            LEASES.to_string(),
            "fleet".to_string(),
            LEASE.to_string(),
        ));
    });
    let (result, out) = run(&fake, &request(false, &|| false));
    let e = result.unwrap_err();
    assert_eq!(e.exit_code(), EXIT_HELD, "{out}");
    assert_eq!(e.to_string(), "Lease fleet/capi-rollout-check-roll-pool-1 was deleted by someone else; this roll stops: 1 Machine deleted so far by this roll");
    assert_eq!(deletes(&fake), ["delete m-a"]);
}

/// Two `--take-over`s of one lapsed Lease: the one whose patch finds the Lease changed since
/// its read (its JSON patch's test fails) is refused.
#[test]
fn a_take_over_that_loses_the_race() {
    let fake = three();
    held_by(&fake, "bob@ops pid 7", 300, 240);
    fake.fail_next.borrow_mut().push(("patch", ClusterError::Failed {
        command: "patch".into(),
        message: "The request is invalid: the server rejected our request due to an error in our request".into(),
    }));
    let mut request = request(false, &|| false);
    request.take_over = true;
    let (result, _) = run(&fake, &request);
    let e = result.unwrap_err();
    assert_eq!(e.exit_code(), EXIT_HELD);
    assert!(
        e.to_string()
            .ends_with("it lapsed, but another roll took it first; run the command again"),
        "{e}"
    );
    assert!(deletes(&fake).is_empty());
}
