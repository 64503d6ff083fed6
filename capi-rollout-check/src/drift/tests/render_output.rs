//! The report as JSON and as the table a person reads.

use super::*;

#[test]
fn json_of_a_rotation_not_rolled() {
    let world = World::pool(
        &Pool::new("KubeadmConfig", "AzureMachinePool"),
        100,
        vec![],
        101,
        290,
    )
    .machines(&[2, 102]);
    let value: Value = serde_json::from_str(&render::json(&world.report())).unwrap();
    assert_eq!(
        value,
        json!({
            "schema": "capi-rollout-check.drift/v2",
            "now": at(NOW),
            "summary": {"objects": 1, "current": 0, "stale": 1, "unknown": 0,
                        "kinds": {"MachinePool": 1, "MachineDeployment": 0, "MachineSet": 0}},
            "items": [{
                "kind": "MachinePool", "namespace": "fleet", "name": "pool-1", "verdict": "stale",
                "confidence": {"level": "exact", "reasons": [format!(
                    "Machine launch times compared with the data Secret's creation ({}) and last write ({}) and the config's last edit",
                    at(101), at(290))]},
                "bootstrap": {"group": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": "pool-1-a",
                              "provider": "kubeadm", "rendering": "AtTokenRotation"},
                "infrastructure": {"kind": "AzureMachinePool", "provider": "CAPZ", "readsBootstrapData": true,
                                   "onRotation": "NewInstancesOnly", "onContentChange": "NewInstancesOnly"},
                "dataSecret": {"name": "pool-1-a", "created": at(101), "contentWritten": at(290)},
                "instances": {"source": "Machine", "total": 2, "staleCount": 1, "everyInstanceNowAndFuture": false,
                              "stale": [{"name": "pool-1-m0", "launched": at(2), "because": "launched-before-data-secret", "certain": true, "paths": []}]},
                "causes": [{"kind": "rotation-not-rolled", "manager": null, "operation": null, "time": at(101),
                            "paths": [], "pathsAre": "owned-by-manager", "inDataSecret": null, "replacedByProvider": false,
                            "summary": format!("rotation to pool-1-a (data Secret pool-1-a created {}): 1 instance launched before it; AzureMachinePool replaces no existing instance on a rotation", at(101))}],
                "clusterClass": null,
                "fix": [ROLL]
            }]
        })
    );
}

#[test]
fn the_table_names_each_stale_instance_and_the_fix() {
    let world = World::pool(
        &Pool::new("KubeadmConfig", "AzureMachinePool"),
        100,
        vec![],
        101,
        290,
    )
    .machines(&[2, 102]);
    let text = render::table(&world.report());
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        [
            "NAMESPACE",
            "OBJECT",
            "CONFIG",
            "INFRASTRUCTURE",
            "VERDICT",
            "STALE",
            "CONFIDENCE",
            "CAUSE"
        ]
    );
    assert_eq!(
        lines[1].split_whitespace().collect::<Vec<_>>(),
        [
            "fleet",
            "machinepool/pool-1",
            "KubeadmConfig/pool-1-a",
            "AzureMachinePool",
            "stale",
            "1/2",
            "exact",
            "rotation-not-rolled"
        ]
    );
    assert!(
        text.contains(&format!(
            "  pool-1-m0 launched {} (launched-before-data-secret)\n",
            at(2)
        )),
        "{text}"
    );
    assert!(text.contains(&format!("  fix:\n    {ROLL}\n")), "{text}");
    assert!(
        text.ends_with("1 object (1 MachinePool): 0 current, 1 stale, 0 unknown\n"),
        "{text}"
    );
}
