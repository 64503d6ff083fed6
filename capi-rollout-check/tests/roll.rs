//! `capi-rollout-check roll` as a person runs it: the binary, its arguments and exit codes,
//! and Ctrl-C, against a kubectl stand-in (a shell script answering from fixed JSON and
//! writing down every call) instead of a cluster.

#![cfg(unix)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

mod common;

const POOL: &str = r#"{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"MachinePool","metadata":{"name":"pool-1","namespace":"fleet"},"spec":{"replicas":2,"template":{"spec":{"bootstrap":{"dataSecretName":"pool-1-b","configRef":{"apiGroup":"bootstrap.cluster.x-k8s.io","kind":"KubeadmConfig","name":"pool-1-b"}},"infrastructureRef":{"apiGroup":"infrastructure.cluster.x-k8s.io","kind":"DockerMachinePool","name":"pool-1"}}}}}"#;
const CONFIG: &str = r#"{"kind":"KubeadmConfig","metadata":{"name":"pool-1-b","namespace":"fleet"},"status":{"dataSecretName":"pool-1-b"}}"#;
const SECRET: &str = r#"{"kind":"Secret","metadata":{"name":"pool-1-b","namespace":"fleet","creationTimestamp":"2026-12-06T03:00:00Z"}}"#;
/// m-a launched before the Secret and Ready; m-b after it and not Ready: with 2 replicas and
/// maxUnavailable 1, deleting m-a would leave no Ready Machine, so roll waits.
const MACHINES: &str = r#"{"items":[{"metadata":{"name":"m-a","creationTimestamp":"2026-12-06T02:00:00Z","labels":{"cluster.x-k8s.io/pool-name":"pool-1"}},"status":{"nodeRef":{"name":"n-a"},"conditions":[{"type":"Ready","status":"True"}]}},{"metadata":{"name":"m-b","creationTimestamp":"2026-12-06T03:10:00Z","labels":{"cluster.x-k8s.io/pool-name":"pool-1"}},"status":{}}]}"#;

/// A kubectl stand-in in `dir`: answers get/auth/list from the constants, keeps the Lease in
/// the file `lease` as the API server keeps it (a create of an existing one fails), writes each
/// call to `calls`; `on_list` runs when the Machines are listed.
fn kubectl(dir: &Path, can_delete: bool, on_list: &str) -> PathBuf {
    let _ = fs::remove_dir_all(dir);
    fs::create_dir_all(dir).unwrap();
    let calls = dir.join("calls");
    let lease = dir.join("lease");
    let script = format!(
        "#!/bin/sh\necho \"$*\" >> '{calls}'\ncase \"$*\" in\n\
         *'auth can-i delete machines'*) echo {delete}; [ {delete} = yes ];;\n\
         *'auth can-i'*) echo yes;;\n\
         'create -f -'*) if [ -e '{lease}' ]; then echo 'Error from server (AlreadyExists): error when creating \"STDIN\": leases.coordination.k8s.io \"capi-rollout-check-roll-pool-1\" already exists' >&2; exit 1; fi; cat > '{lease}';;\n\
         *'get leases'*) [ -e '{lease}' ] && cat '{lease}';;\n\
         *'patch leases'*) :;;\n\
         *'delete leases'*) rm '{lease}';;\n\
         *'get machinepools'*) echo '{POOL}';;\n\
         *'get dockermachinepools'*) echo '{{\"kind\":\"DockerMachinePool\",\"metadata\":{{\"name\":\"pool-1\"}},\"spec\":{{}}}}';;\n\
         *'get kubeadmconfigs'*) echo '{CONFIG}';;\n\
         *'get secrets'*) echo '{SECRET}';;\n\
         *'get machines'*) {on_list}; echo '{MACHINES}';;\n\
         *) echo \"unexpected: $*\" >&2; exit 1;;\nesac\n",
        calls = calls.display(),
        lease = lease.display(),
        delete = if can_delete { "yes" } else { "no" },
    );
    let path = dir.join("kubectl");
    fs::write(&path, script).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// `capi-rollout-check roll machinepool/pool-1 -n fleet --kubectl KUBECTL` and `extra`.
fn roll_pool_1(kubectl: &str, extra: &[&str]) -> common::Run {
    let mut args = vec![
        "roll",
        "machinepool/pool-1",
        "-n",
        "fleet",
        "--kubectl",
        kubectl,
    ];
    args.extend(extra);
    common::run(&args, None)
}

fn dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(name)
}

fn calls(dir: &Path) -> String {
    fs::read_to_string(dir.join("calls")).unwrap_or_default()
}

/// Whether the stand-in was asked to delete a Machine.
fn deleted(dir: &Path) -> bool {
    calls(dir).lines().any(|l| l.starts_with("delete machines"))
}

#[test]
fn the_plan_of_a_dry_run() {
    let dir = dir("roll-dry-run");
    let kubectl = kubectl(&dir, true, ":");
    let r = roll_pool_1(kubectl.to_str().unwrap(), &["--dry-run"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(
        r.stdout,
        "MachinePool fleet/pool-1: infrastructure DockerMachinePool fleet/pool-1 (CAPD); data Secret pool-1-b, created 2026-12-06T03:00:00Z\n\
MachinePool fleet/pool-1: 2 replicas, maxUnavailable 1: deletes up to 1 Machine at a time, never below 1 Ready\n\
MachinePool fleet/pool-1: 1 of 2 Machines were launched before data Secret pool-1-b; in this order:\n\
\x20 1. Machine fleet/m-a (launched 2026-12-06T02:00:00Z, Ready)\n\
(dry run) nothing was deleted\n"
    );
    assert!(!deleted(&dir), "{}", calls(&dir));
}

/// Ctrl-C while roll waits: SIGINT to roll itself (the stand-in kubectl sends it when the
/// Machines are listed), exit 130, what was done and how to go on, nothing deleted.
#[test]
fn ctrl_c_while_waiting() {
    let dir = dir("roll-ctrl-c");
    let kubectl = kubectl(&dir, true, "kill -INT $PPID");
    let r = roll_pool_1(kubectl.to_str().unwrap(), &["--timeout", "60s"]);
    assert_eq!(r.code, 130, "{}{}", r.stdout, r.stderr);
    assert_eq!(
        r.stderr,
        "capi-rollout-check roll: interrupted: 0 Machines deleted so far; roll kept at least 1 Ready by its own deletes; re-run the same command to go on: capi-rollout-check roll machinepool/pool-1 -n fleet\n"
    );
    assert!(!deleted(&dir), "{}", calls(&dir));
    assert!(
        calls(&dir)
            .contains("delete leases.coordination.k8s.io capi-rollout-check-roll-pool-1 -n fleet"),
        "{}",
        calls(&dir)
    );
    assert!(!dir.join("lease").exists(), "the Lease released on Ctrl-C");
}

/// A second roll of the pool while a first holds its Lease: refused at once, exit 4.
#[test]
fn a_second_roll_is_refused_at_once() {
    let dir = dir("roll-held");
    let kubectl = kubectl(&dir, true, ":");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let at = capi_rollout_check::drift::time::format(now - 5);
    fs::write(
        dir.join("lease"),
        format!(r#"{{"kind":"Lease","metadata":{{"name":"capi-rollout-check-roll-pool-1"}},"spec":{{"holderIdentity":"bob@ops pid 7","leaseDurationSeconds":60,"acquireTime":"{at}","renewTime":"{at}"}}}}"#),
    )
    .unwrap();
    let r = roll_pool_1(kubectl.to_str().unwrap(), &[]);
    assert_eq!(r.code, 4, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.starts_with("capi-rollout-check roll: MachinePool fleet/pool-1 is being rolled by another roll: Lease fleet/capi-rollout-check-roll-pool-1 (bob@ops pid 7 took it "), "{}", r.stderr);
    assert_eq!(r.stdout, "");
    assert!(!deleted(&dir), "{}", calls(&dir));
    assert!(dir.join("lease").exists(), "the other roll's Lease stays");
}

#[test]
fn no_kubectl_exits_2_before_anything() {
    let r = roll_pool_1("/nonexistent/kubectl", &[]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.starts_with("capi-rollout-check roll: kubectl get machinepools.cluster.x-k8s.io pool-1 -o json --ignore-not-found -n fleet: cannot run /nonexistent/kubectl: "), "{}", r.stderr);
    assert!(
        r.stderr.ends_with("(set --kubectl or KUBECTL)\n"),
        "{}",
        r.stderr
    );
}

#[test]
fn rbac_is_checked_before_any_delete() {
    let dir = dir("roll-rbac");
    let kubectl = kubectl(&dir, false, ":");
    let r = roll_pool_1(kubectl.to_str().unwrap(), &[]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert_eq!(
        r.stderr,
        "capi-rollout-check roll: RBAC: you may not delete machines.cluster.x-k8s.io in namespace fleet; nothing was changed (kubectl auth can-i delete machines.cluster.x-k8s.io -n fleet: no)\n"
    );
    assert!(!deleted(&dir), "{}", calls(&dir));
}

#[test]
fn bad_arguments() {
    for (args, message) in [
        (
            vec!["roll", "deployment/pool-1"],
            "capi-rollout-check roll: \"deployment/pool-1\": name the pool as machinepool/NAME\n",
        ),
        (
            vec!["roll", "pool-1"],
            "capi-rollout-check roll: \"pool-1\": name the pool as machinepool/NAME\n",
        ),
    ] {
        let r = common::run(&args, None);
        assert_eq!(r.code, 2, "{args:?}");
        assert_eq!(r.stderr, message);
    }
    let r = common::run(&["roll", "machinepool/pool-1", "--timeout", "soon"], None);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .contains("\"soon\": a duration is seconds, or a number with s or m"),
        "{}",
        r.stderr
    );
}
