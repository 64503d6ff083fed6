//! `rotate --reissue`: a MachinePool's config, or a MachineDeployment's or MachineSet's
//! template, rotated to a fresh name with the same spec. CAPI renders bootstrap data only for a
//! config it has not rendered yet, and rolls a MachineDeployment out only when its `configRef`
//! names another template, so an edit that reached no instance (`drift`'s stale objects)
//! reaches them only through a new name; with the spec unchanged the policy has no rotation
//! name to suggest, so the name is [`reissue_name`]'s: the policy's `<base>-<8 hex>` scheme,
//! never the current name.

use capi_bootstrap_rollout_policy::settings::Settings;
use capi_rollout_check::drift::analysis::reissue_name;
use serde_json::Value;

use super::plan::{key_of, person_owned, Plan};
use crate::manifests::Key;

/// The reissue of `current`, the config `consumers` use: its person-owned part (what `--edit`
/// opens) under the name [`reissue_name`] gives it at time `now` (seconds since the epoch).
pub fn plan(settings: &Settings, consumers: &[&Value], current: &Value, now: i64) -> Plan {
    let old = key_of(current);
    let new = Key {
        name: reissue_name(&old.name, now),
        ..old.clone()
    };
    let mut new_object = person_owned(settings, current);
    new_object["metadata"]["name"] = Value::String(new.name.clone());
    Plan {
        old,
        new,
        new_object,
        consumers: consumers.iter().map(|c| key_of(c)).collect(),
        changed: Vec::new(),
        refusal: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check;
    use crate::manifests::ManifestSet;
    use crate::rotate::plan::{rejections, repointed};
    use serde_json::json;

    fn pool() -> Value {
        json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
            "metadata": {"name": "pool-1", "namespace": "fleet", "uid": "p"},
            "spec": {"clusterName": "c1", "template": {"spec": {"clusterName": "c1", "bootstrap": {
                "configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": "pool-1-a-0123abcd"},
                "dataSecretName": "pool-1-a-0123abcd"}}}}})
    }

    fn current() -> Value {
        json!({"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfig",
            "metadata": {"name": "pool-1-a-0123abcd", "namespace": "fleet", "uid": "c", "resourceVersion": "7",
                "labels": {"cluster.x-k8s.io/cluster-name": "c1", "topology.cluster.x-k8s.io/owned": ""},
                "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool", "name": "pool-1", "uid": "p", "controller": true}]},
            "spec": {"files": [{"path": "/etc/sysctl.d/90-fleet.conf", "content": "a\n"}],
                "joinConfiguration": {"discovery": {"bootstrapToken": {"token": "abcdef.0123456789abcdef"}}}},
            "status": {"dataSecretName": "pool-1-a-0123abcd", "ready": true}})
    }

    #[test]
    fn the_same_spec_under_a_fresh_name() {
        let plan = plan(&Settings::default(), &[&pool()], &current(), 1_796_000_000);
        assert_eq!(
            plan.new.name,
            reissue_name("pool-1-a-0123abcd", 1_796_000_000)
        );
        assert_ne!(plan.new.name, plan.old.name);
        assert!(plan.new.name.starts_with("pool-1-a-"), "{}", plan.new.name);
        assert_eq!(plan.new.name.len(), "pool-1-a-0123abcd".len());
        assert_eq!(
            plan.new_object,
            json!({"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfig",
                "metadata": {"name": plan.new.name, "namespace": "fleet",
                    "labels": {"cluster.x-k8s.io/cluster-name": "c1"}},
                "spec": {"files": [{"path": "/etc/sysctl.d/90-fleet.conf", "content": "a\n"}],
                    "joinConfiguration": {"discovery": {"bootstrapToken": {}}}}})
        );
    }

    /// The policy (its engine, context-aware, the cluster served from the objects) admits the
    /// reissue: the new config's CREATE and the pool's repoint, the repoint with the warning
    /// that the content is the same.
    #[test]
    fn the_policy_admits_it_with_its_same_content_warning() {
        let settings = Settings::default();
        let (pool, current) = (pool(), current());
        let plan = plan(&settings, &[&pool], &current, 0);
        assert_eq!(
            rejections(&settings, &[&pool], &current, &plan),
            Vec::<String>::new()
        );
        let (mut base, mut head) = (ManifestSet::default(), ManifestSet::default());
        for (set, pool) in [
            (&mut base, pool.clone()),
            (&mut head, repointed(&pool, &plan.new.name)),
        ] {
            set.add_object(pool, "cluster").unwrap();
            set.add_object(current.clone(), "cluster").unwrap();
        }
        head.add_object(plan.new_object.clone(), "cluster").unwrap();
        let mut settings = settings;
        settings.context_aware = true;
        let report = check::check(&settings, &base, &head);
        let repoint = report
            .outcomes
            .iter()
            .find(|o| o.key.kind == "MachinePool")
            .expect("the repoint is judged");
        assert!(repoint.verdict.allowed, "{:?}", repoint.verdict);
        let same = format!(
            "{} has the same content as pool-1-a-0123abcd: a rotation for nothing",
            plan.new.name
        );
        assert!(
            repoint.verdict.warnings.iter().any(|w| w.contains(&same)),
            "{:?}",
            repoint.verdict.warnings
        );
    }

    /// A MachineDeployment's template reissued: the policy admits the new template and the
    /// repoint (a template rotation), with nothing refused.
    #[test]
    fn the_policy_admits_a_templates_reissue() {
        let settings = Settings::default();
        let md = json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
            "metadata": {"name": "md-1", "namespace": "fleet", "uid": "md"},
            "spec": {"clusterName": "c1", "template": {"spec": {"clusterName": "c1", "bootstrap": {
                "configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfigTemplate", "name": "md-1-t"}}}}}});
        let template = json!({"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfigTemplate",
            "metadata": {"name": "md-1-t", "namespace": "fleet", "uid": "t", "resourceVersion": "3"},
            "spec": {"template": {"spec": {"files": [{"path": "/etc/sysctl.d/90-fleet.conf", "content": "a\n"}]}}}});
        let plan = plan(&settings, &[&md], &template, 1_796_000_000);
        assert_eq!(plan.new.kind, "KubeadmConfigTemplate");
        assert_ne!(plan.new.name, "md-1-t");
        assert_eq!(plan.new_object["spec"], template["spec"]);
        assert_eq!(
            rejections(&settings, &[&md], &template, &plan),
            Vec::<String>::new()
        );
    }
}
