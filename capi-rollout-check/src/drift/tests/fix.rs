//! The fix lines (`rotate --reissue`, then `roll` where it applies) and the reissue's fresh name.

use super::*;

#[test]
fn the_reissue_name_is_fresh_in_the_policys_scheme() {
    let new = crate::drift::analysis::reissue_name("pool-1-a", T0 + NOW * 60);
    assert_ne!(new, "pool-1-a");
    assert!(
        new.starts_with("pool-1-a-") && new.len() == "pool-1-a-".len() + 8,
        "{new}"
    );
    // A config already carrying a suffix gets another one, not a longer name.
    // A hash that happens to give the current name's suffix back is passed over.
    let clash = |salt: u32| format!("pool-1-a-{salt:08x}");
    assert_eq!(
        crate::drift::analysis::fresh_name("pool-1-a-00000000", clash),
        "pool-1-a-00000001"
    );
    assert!(crate::drift::analysis::reissue_name("pool-1-a-0123abcd", 0).starts_with("pool-1-a-"));
    assert_eq!(
        crate::drift::analysis::reissue_name("pool-1-a-0123abcd", 0).len(),
        "pool-1-a-0123abcd".len()
    );
}

#[test]
fn with_rotate_reissue_the_fix_is_one_rotate_line() {
    let world = World::pool(
        &Pool::new("RKE2Config", "DockerMachinePool"),
        0,
        vec![entry("kubectl-edit", "Update", 200, spec_files())],
        1,
        1,
    )
    .machines(&[2]);
    let report = world.report_with(" --context prod");
    assert_eq!(
        report.pools[0].fix,
        [
            "capi-rollout-check rotate machinepool/pool-1 -n fleet --reissue --context prod",
            "# once CAPI has copied the new dataSecretName into the pool (DockerMachinePool: existing instances keep their data):",
            "capi-rollout-check roll machinepool/pool-1 -n fleet --context prod",
        ]
    );
}
