//! Each drift kind, confidence, provider rendering and infrastructure effect: the verdict,
//! the stale instances and the causes.

use super::*;

#[rstest]
// A pool made once and never edited: CABPK's token writes change the Secret, not the spec.
#[case::clean(
    World::pool(&kubeadm_docker(), 0, vec![entry("manager", "Update", 290, token())], 1, 290).machines(&[2, 3, 4]),
    "current", "exact", "0/3", &[], &[])]
// CABPK's token and discovery writes under the binary's own name (controller-runtime's field
// manager, `capi-kubeadm-bootstrap-manager` in the cluster test): the controller's fill, no edit.
#[case::clean_controller_under_its_binary_name(
    World::pool(&kubeadm_docker(), 0, vec![entry("capi-kubeadm-bootstrap-manager", "Update", 290, discovery())], 1, 290).machines(&[2, 3, 4]),
    "current", "exact", "0/3", &[], &[])]
// ... and beside a person's edit, the edit is still found.
#[case::edit_beside_controller_under_its_binary_name(
    World::pool(&kubeadm_docker(), 0, vec![entry("kubectl-edit", "Update", 200, files_content()),
                                           entry("capi-kubeadm-bootstrap-manager", "Update", 290, discovery())], 1, 290)
        .machines(&[2, 250]),
    "stale", "exact", "1/2", &["in-place-edit"], &[REISSUE, ROLL])]
// CAPD replaces nothing on a rotation: the Machines older than the new Secret keep the old data.
#[case::rotation_not_rolled_no_roll_infra(
    World::pool(&Pool::new("KubeadmConfig", "AzureMachinePool"), 100, vec![], 101, 290).machines(&[2, 3, 102]),
    "stale", "exact", "2/3", &["rotation-not-rolled"], &[ROLL])]
// CAPA's AWSMachinePool replaces them itself (an instance refresh): wait, no roll.
#[case::rotation_provider_replaces(
    World::pool(&Pool::new("KubeadmConfig", "AWSMachinePool"), 100, vec![], 101, 290).machines(&[2, 102]),
    "stale", "exact", "1/2", &["rotation-not-rolled"], &[WAIT, "(an instance refresh)"])]
// An EKS node group with a launch template: EKS updates the managed node group, no Auto
// Scaling instance refresh.
#[case::rotation_eks_node_group_update(
    World::pool(&Pool::new("EKSConfig", "AWSManagedMachinePool"), 100, vec![], 101, 290).machines(&[2, 102])
        .with(|w| w.infra_pools[0]["spec"] = json!({"awsLaunchTemplate": {"name": "lt"}})),
    "stale", "exact", "1/2", &["rotation-not-rolled"], &[WAIT, "(an EKS managed node group update)"])]
// ... unless its refresh is turned off: then it is a no-roll infrastructure.
#[case::rotation_refresh_disabled(
    World::pool(&Pool::new("KubeadmConfig", "AWSMachinePool"), 100, vec![], 101, 290).machines(&[2, 102])
        .with(|w| w.infra_pools[0]["spec"] = json!({"refreshPreferences": {"disable": true}})),
    "stale", "exact", "1/2", &["rotation-not-rolled"], &["# AWSMachinePool has spec.refreshPreferences.disable: true, so it replaces no instance on a rotation"])]
// CABPK: an edit already in the Secret; the Machine launched before it never got it, the one
// launched between the edit and the write might have, the one after has it.
#[case::edit_in_secret_render_window(
    World::pool(&kubeadm_docker(), 0, vec![entry("kubectl-edit", "Update", 200, files_content())], 1, 290)
        .machines(&[2, 205, 250]),
    "stale", "bounded", "2/3", &["in-place-edit"], &[REISSUE, ROLL])]
#[case::edit_in_secret_exact(
    World::pool(&kubeadm_docker(), 0, vec![entry("kubectl-edit", "Update", 200, files_content())], 1, 290)
        .machines(&[2, 250]),
    "stale", "exact", "1/2", &["in-place-edit"], &[REISSUE, ROLL])]
// CABPK: the edit is two minutes old; the next token rotation puts it into the Secret.
#[case::edit_pending_token_rotation(
    World::pool(&kubeadm_docker(), 0, vec![entry("kubectl-patch", "Update", 298, files_content())], 1, 290)
        .machines(&[2, 250]),
    "stale", "bounded", "2/2", &["in-place-edit"], &[REISSUE, ROLL])]
// CABPK re-renders only while the pool has nodeRefs: no instance, now or future, gets it.
#[case::edit_pending_no_node_refs(
    World::pool(&Pool { node_refs: false, ..kubeadm_docker() }, 0,
        vec![entry("kubectl-patch", "Update", 298, files_content())], 1, 1).machines(&[2]),
    "stale", "exact", "all 1+new", &["in-place-edit"], &[REISSUE, ROLL])]
// ... and only with token discovery.
#[case::edit_pending_file_discovery(
    World::pool(&kubeadm_docker(), 0, vec![entry("kubectl-patch", "Update", 298, files_content())], 1, 1)
        .machines(&[2])
        .with(|w| w.configs[0]["spec"]["joinConfiguration"]["discovery"] = json!({"file": {"kubeConfigPath": "/k"}})),
    "stale", "exact", "all 1+new", &["in-place-edit"], &[REISSUE, ROLL])]
// CABPK should have written it 12.5 minutes after the edit and has not.
#[case::edit_pending_too_long(
    World::pool(&kubeadm_docker(), 0, vec![entry("kubectl-patch", "Update", 200, files_content())], 1, 190)
        .machines(&[2]),
    "stale", "unknown", "all 1+new", &["in-place-edit"], &[REISSUE, ROLL])]
// RKE2 renders once: every instance, now and future, runs the old data.
#[case::once_rendering(
    World::pool(&Pool::new("RKE2Config", "DockerMachinePool"), 0, vec![entry("kubectl-edit", "Update", 200, spec_files())], 1, 1)
        .machines(&[2, 250]),
    "stale", "exact", "all 2+new", &["in-place-edit"], &[REISSUE, ROLL])]
// EKSConfig writes an edit at its next reconcile; CAPA's AWSMachinePool refreshes on a new
// Secret name, so the fix is a reissue and no roll.
#[case::every_reconcile_in_secret(
    World::pool(&Pool::new("EKSConfig", "AWSMachinePool"), 0, vec![entry("kubectl-edit", "Update", 200, spec_files())], 1, 201)
        .machines(&[2, 250]),
    "stale", "exact", "1/2", &["in-place-edit"], &[REISSUE])]
#[case::every_reconcile_pending(
    World::pool(&Pool::new("EKSConfig", "AWSMachinePool"), 0, vec![entry("kubectl-edit", "Update", 298, spec_files())], 1, 100)
        .machines(&[2, 250]),
    "stale", "bounded", "2/2", &["in-place-edit"], &[REISSUE])]
// No write long after the edit: a field EKSConfig ignores, or its controller stopped.
#[case::every_reconcile_no_write(
    World::pool(&Pool::new("EKSConfig", "AWSMachinePool"), 0, vec![entry("kubectl-edit", "Update", 200, spec_files())], 1, 100)
        .machines(&[2, 250]),
    "unknown", "unknown", "2/2", &["in-place-edit"], &[REISSUE])]
// EKS managed node groups with a launch template roll on a content change: wait.
#[case::content_change_replaces(
    World::pool(&Pool::new("EKSConfig", "AWSManagedMachinePool"), 0, vec![entry("kubectl-edit", "Update", 200, spec_files())], 1, 201)
        .machines(&[2, 250])
        .with(|w| w.infra_pools[0]["spec"] = json!({"awsLaunchTemplate": {"name": "lt"}})),
    "stale", "exact", "1/2", &["in-place-edit"], &[WAIT])]
// ... without one they never read bootstrap data.
#[case::never_read(
    World::pool(&Pool::new("EKSConfig", "AWSManagedMachinePool"), 0, vec![entry("kubectl-edit", "Update", 200, spec_files())], 1, 201)
        .machines(&[2, 250]),
    "current", "exact", "0/2", &[], &[])]
#[case::ancient_changes(
    World::pool(&kubeadm_docker(), 0, vec![entry("ancient-changes", "Update", 200, spec_files())], 1, 290).machines(&[2]),
    "unknown", "unknown", "0/1", &[], &[])]
#[case::moved_by_clusterctl(
    World::pool(&kubeadm_docker(), 0, vec![entry("clusterctl", "Update", 1, spec_files())], 1, 290).machines(&[2]),
    "unknown", "unknown", "0/1", &[], &[])]
// No Machines (CAPA without MachinePoolMachines) after a rotation: which instances are old?
#[case::no_instances_after_rotation(
    World::pool(&Pool::new("KubeadmConfig", "AWSMachinePool"), 100, vec![], 101, 290),
    "unknown", "unknown", "0/3", &[], &[])]
#[case::no_instances_once_rendering(
    World::pool(&Pool::new("RKE2Config", "AWSMachinePool"), 0, vec![entry("kubectl-edit", "Update", 200, spec_files())], 1, 1),
    "stale", "exact", "all 3+new", &["in-place-edit"], &[REISSUE])]
#[case::no_instances_no_replicas(
    World::pool(&Pool { replicas: 0, ..Pool::new("KubeadmConfig", "AWSMachinePool") }, 100, vec![], 101, 290),
    "current", "exact", "0/0", &[], &[])]
#[case::no_instances_nothing_happened(
    World::pool(&Pool::new("KubeadmConfig", "AWSMachinePool"), 0, vec![], 1, 290),
    "current", "exact", "0/3", &[], &[])]
// The topology controller's patch of a ClusterClass pool: the remedy is a new pool topology.
#[case::cluster_class_pool(
    World::pool(&Pool { topology: true, ..kubeadm_docker() }, 0, vec![entry("capi-topology", "Apply", 200, spec_files())], 1, 290)
        .machines(&[2, 250]),
    "stale", "exact", "1/2", &["topology-patch"], &["docs/clusterclass.md", "kubectl edit clusters.cluster.x-k8s.io c1 -n fleet"])]
#[case::unknown_bootstrap_provider(
    World::pool(&Pool::new("ExampleConfig", "DockerMachinePool"), 0, vec![entry("kubectl-edit", "Update", 200, spec_files())], 1, 1)
        .machines(&[2]),
    "stale", "unknown", "all 1+new", &["in-place-edit"], &[REISSUE, ROLL])]
#[case::unknown_infrastructure(
    World::pool(&Pool::new("KubeadmConfig", "ExampleMachinePool"), 100, vec![], 101, 290).machines(&[2, 102]),
    "stale", "unknown", "1/2", &["rotation-not-rolled"], &["# ExampleMachinePool is not in the infrastructure records"])]
// CAPOCI has MachinePool Machines, but deleting one leaves its instance running: by hand.
#[case::machines_that_do_not_replace(
    World::pool(&Pool::new("KubeadmConfig", "OCIMachinePool"), 100, vec![], 101, 290).machines(&[2, 102]),
    "stale", "exact", "1/2", &["rotation-not-rolled"], &["# OCIMachinePool: no MachinePool Machine to delete for it; by hand: drain the nodes, then detach"])]
// CAPG makes no MachinePool Machines: the record's instructions, by hand.
#[case::manual_replacement(
    World::pool(&Pool::new("RKE2Config", "GCPMachinePool"), 0, vec![entry("kubectl-edit", "Update", 200, spec_files())], 1, 1),
    "stale", "exact", "all 3+new", &["in-place-edit"], &[REISSUE, "# GCPMachinePool: no MachinePool Machine to delete for it; by hand: drain the nodes"])]
#[case::config_not_found(
    World::pool(&kubeadm_docker(), 0, vec![], 1, 290).machines(&[2]).with(|w| w.configs.clear()),
    "unknown", "unknown", "0/1", &[], &[])]
// The pool was repointed and CAPI has not copied the new config's data Secret yet: the new
// config's creation is no edit of the old data.
#[case::rotation_in_progress(
    World::pool(&kubeadm_docker(), 100, vec![], 1, 290).machines(&[2])
        .with(|w| w.configs[0]["status"] = json!({})),
    "unknown", "unknown", "0/1", &[], &[])]
#[case::rotation_not_taken_up(
    World::pool(&kubeadm_docker(), 100, vec![], 1, 290).machines(&[2])
        .with(|w| w.configs[0]["status"]["dataSecretName"] = json!("pool-1-b")),
    "unknown", "unknown", "0/1", &[], &[])]
#[case::being_deleted(
    World::pool(&kubeadm_docker(), 100, vec![], 101, 290).machines(&[2])
        .with(|w| w.pools[0]["metadata"]["deletionTimestamp"] = json!(at(299))),
    "unknown", "unknown", "0/1", &[], &[])]
// CAPZ's own instances when there are no MachinePool Machines.
#[case::infra_instances_instead_of_machines(
    World::pool(&Pool::new("KubeadmConfig", "AzureMachinePool"), 100, vec![], 101, 290).with(|w| {
        for (n, m) in [2, 102].iter().enumerate() {
            w.infra_instances.push(json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureMachinePoolMachine",
                "metadata": {"name": format!("vm-{n}"), "namespace": "fleet", "creationTimestamp": at(*m),
                             "ownerReferences": [{"kind": "AzureMachinePool", "name": "pool-1"}]}}));
        }
    }),
    "stale", "exact", "1/2", &["rotation-not-rolled"], &[ROLL])]
fn verdicts(
    #[case] world: World,
    #[case] verdict: &str,
    #[case] level: &str,
    #[case] stale: &str,
    #[case] causes: &[&str],
    #[case] fix: &[&str],
) {
    let p = one(&world);
    let shown = format!("{p:#?}");
    assert_eq!(p.verdict.name(), verdict, "{shown}");
    assert_eq!(p.confidence.level.name(), level, "{shown}");
    assert_eq!(render::stale_column(&p), stale, "{shown}");
    assert_eq!(
        p.causes.iter().map(|c| c.kind.name()).collect::<Vec<_>>(),
        causes,
        "{shown}"
    );
    for part in fix {
        assert!(
            p.fix.iter().any(|l| l.contains(part)),
            "fix has no {part:?}: {:#?}",
            p.fix
        );
    }
    if fix.is_empty() {
        assert!(p.fix.is_empty(), "{:#?}", p.fix);
    }
    if !fix.contains(&ROLL) {
        assert!(!p.fix.iter().any(|l| l.contains(ROLL)), "{:#?}", p.fix);
    }
    if !fix.contains(&REISSUE) {
        assert!(!p.fix.iter().any(|l| l.contains(REISSUE)), "{:#?}", p.fix);
    }
}

#[test]
fn an_update_managers_changed_paths_and_whether_the_secret_has_them() {
    let p = one(&World::pool(
        &kubeadm_docker(),
        0,
        vec![entry("kubectl-edit", "Update", 200, files_content())],
        1,
        290,
    )
    .machines(&[2, 250]));
    let cause = &p.causes[0];
    assert_eq!(cause.manager.as_deref(), Some("kubectl-edit"));
    assert_eq!(cause.operation.as_deref(), Some("Update"));
    assert_eq!(cause.time, Some(T0 + 200 * 60));
    assert_eq!(cause.paths, ["spec.files[path=/etc/motd].content"]);
    assert_eq!(cause.paths_are, super::super::analysis::PathsAre::Owned);
    assert_eq!(cause.in_data_secret, Some(true));
    assert_eq!(p.instances.stale.len(), 1);
    assert_eq!(p.instances.stale[0].name, "pool-1-m0");
}

#[test]
fn the_render_window_instance_is_named_as_uncertain() {
    let p = one(&World::pool(
        &kubeadm_docker(),
        0,
        vec![entry("kubectl-edit", "Update", 200, files_content())],
        1,
        290,
    )
    .machines(&[2, 205, 250]));
    let window: Vec<_> = p
        .instances
        .stale
        .iter()
        .map(|s| (s.name.as_str(), s.because.name(), s.certain))
        .collect();
    assert_eq!(
        window,
        [
            ("pool-1-m0", "launched-before-edit", true),
            ("pool-1-m1", "launched-while-rendering", false)
        ]
    );
    assert!(
        p.confidence.reasons[0].contains("between the edit"),
        "{:?}",
        p.confidence
    );
    // A launch after CABPK's longest wait (12.5 min) is not in the window, even when the
    // Secret's last write (a later token rotation) is later still.
    let late = one(&World::pool(
        &kubeadm_docker(),
        0,
        vec![entry("kubectl-edit", "Update", 200, files_content())],
        1,
        290,
    )
    .machines(&[2, 213]));
    assert_eq!(late.confidence.level.name(), "exact");
}

#[test]
fn pools_without_a_config_ref_are_not_listed_and_the_order_is_stable() {
    let mut world = World::pool(&kubeadm_docker(), 0, vec![], 1, 290).machines(&[2]);
    let mut other = world.pools[0].clone();
    other["metadata"]["name"] = json!("pool-0");
    let mut no_ref = world.pools[0].clone();
    no_ref["metadata"]["name"] = json!("pool-x");
    no_ref["spec"]["template"]["spec"]["bootstrap"] = json!({"dataSecretName": "raw"});
    world.pools.push(no_ref);
    world.pools.insert(0, other);
    let names: Vec<String> = world.report().pools.into_iter().map(|p| p.name).collect();
    assert_eq!(names, ["pool-0", "pool-1"]);
}

#[test]
fn a_label_change_by_a_controller_or_a_status_write_is_no_edit() {
    let status = json!({"manager": "kubectl-edit", "operation": "Update", "subresource": "status", "time": at(200),
                        "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:ready": {}}}});
    let label = entry(
        "kubectl-label",
        "Update",
        200,
        json!({"f:metadata": {"f:labels": {"f:x": {}}}}),
    );
    let p = one(&World::pool(&kubeadm_docker(), 0, vec![status, label], 1, 290).machines(&[2]));
    assert_eq!(p.verdict, Verdict::Current, "{p:#?}");
}

#[test]
fn a_render_once_edit_names_why_each_instance_is_stale() {
    let p = one(&World::pool(
        &Pool::new("RKE2Config", "DockerMachinePool"),
        0,
        vec![entry("kubectl-edit", "Update", 200, spec_files())],
        1,
        1,
    )
    .machines(&[2, 250]));
    let why: Vec<_> = p
        .instances
        .stale
        .iter()
        .map(|s| (s.name.as_str(), s.because.name(), s.certain))
        .collect();
    assert_eq!(
        why,
        [
            ("pool-1-m0", "launched-before-edit", true),
            ("pool-1-m1", "launched-from-data-without-edit", true)
        ]
    );
    assert!(p.instances.every_future);
    assert_eq!(p.causes[0].in_data_secret, Some(false));
}
