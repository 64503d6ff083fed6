//! What the providers' defaulting webhooks do to every CREATE/UPDATE of their kinds, whoever
//! sends it, beyond the fill-once fields of their records ([`crate::capi::providers`]): a
//! validating policy sees each request after the mutating webhooks ran, so a defaulter's
//! rewrite may not count as an edit. Each spec is compared as the defaulter leaves it:
//! - CAPI v1.10's KubeadmConfig defaulter re-marshals `metav1.Duration`s (`5m` comes back
//!   `5m0s`): durations compare by value, read as Go's `time.ParseDuration` reads them;
//! - RKE2's defaulter drops keys of `agentConfig.additionalUserData.data` and re-emits the YAML
//!   of each value with gopkg.in/yaml.v3: values compare by the content yaml.v3 decodes.
//!
//! The Go semantics themselves are in [`crate::go_compat`].

use std::borrow::Cow;

use crate::capi::providers::{provider_of, Defaulter};
use crate::go_compat::{duration, yaml};
use crate::reader::node::{Node, Str};

/// The keys RKE2's defaulter deletes from `agentConfig.additionalUserData.data` on every write
/// (rancher/cluster-api-provider-rke2 bootstrap/api/v1beta2/rke2config_webhook.go,
/// `CorrectArbitraryData`; the controllers of v0.2-v0.20 deleted them too, in
/// bootstrap/internal/cloudinit/cloudinit.go `cleanupArbitraryData`): the bootstrap data
/// writes them itself.
pub(crate) const RKE2_DROPPED_USER_DATA_KEYS: [&str; 3] = ["write_files", "ntp", "runcmd"];
const USER_DATA: [&str; 3] = ["agentConfig", "additionalUserData", "data"];

/// The two config specs as RKE2's defaulter leaves them, for comparison: in
/// `agentConfig.additionalUserData.data` the dropped keys are gone and every value that is a
/// YAML map or list stands for its parsed content, since the defaulter re-emits each one
/// (gopkg.in/yaml.v3, its own indentation; v0.11-v0.19 controllers did the same). A person's
/// change of what a value says is still a change of `...data.<key>`. `spec` is a config's
/// `spec` or a template's `spec.template.spec`; other kinds, and RKE2 specs whose user data is
/// the same text on both sides, are returned as they are.
pub(crate) fn as_defaulted<'a, 'n>(
    config_kind: &str,
    old: Option<&'a Node<'n>>,
    new: Option<&'a Node<'n>>,
) -> (Option<Cow<'a, Node<'n>>>, Option<Cow<'a, Node<'n>>>) {
    let defaulter = provider_of(config_kind).map_or(Defaulter::None, |p| p.defaulter);
    if defaulter == Defaulter::KubeadmDurations {
        return kubeadm_durations_by_value(old, new);
    }
    let user_data = |spec: Option<&'a Node<'n>>| spec.and_then(|s| s.at(&USER_DATA));
    if defaulter != Defaulter::Rke2UserData || user_data(old) == user_data(new) {
        return (old.map(Cow::Borrowed), new.map(Cow::Borrowed));
    }
    let normalise = |spec: Option<&'a Node<'n>>| {
        spec.map(|spec| {
            let mut spec = spec.clone();
            if let Some(Node::Object(data)) = at_mut(&mut spec, &USER_DATA) {
                data.retain(|(key, _)| !RKE2_DROPPED_USER_DATA_KEYS.iter().any(|k| key.is(k)));
                for (_, value) in data.iter_mut() {
                    let parsed = value
                        .as_str()
                        .and_then(|text| yaml::parsed_yaml(&text.to_str()));
                    if let Some(parsed) = parsed {
                        *value = Node::String(Str::Plain(Cow::Owned(parsed)));
                    }
                }
            }
            Cow::Owned(spec)
        })
    };
    (normalise(old), normalise(new))
}

/// The v1beta1 `metav1.Duration` fields of a KubeadmConfig spec (or a template's
/// `spec.template.spec`), which CAPI v1.10's defaulter re-marshals on every write: a stored
/// `5m` comes back `5m0s` (seen in the cluster test, TestV1beta1Era, on a person's
/// label). `initConfiguration.bootstrapTokens[].ttl` too, below.
const KUBEADM_DURATIONS: [&[&str]; 2] = [
    &["joinConfiguration", "discovery", "timeout"],
    &[
        "clusterConfiguration",
        "apiServer",
        "timeoutForControlPlane",
    ],
];

const BOOTSTRAP_TOKENS: [&str; 2] = ["initConfiguration", "bootstrapTokens"];

/// The duration fields of a spec as found there, the tokens' `ttl`s after the fixed paths: what
/// decides, without a copy, whether the two specs need their durations read.
fn durations<'x, 'n>(spec: Option<&'x Node<'n>>) -> impl Iterator<Item = Option<&'x Node<'n>>> {
    let tokens = match spec.and_then(|s| s.at(&BOOTSTRAP_TOKENS)) {
        Some(Node::Array(tokens)) => tokens.as_slice(),
        _ => &[],
    };
    KUBEADM_DURATIONS
        .iter()
        .map(move |path| spec.and_then(|s| s.at(path)))
        .chain(tokens.iter().map(|token| token.at(&["ttl"])))
}

/// Both specs with every duration field that Go's time.ParseDuration reads written as its
/// value (after a NUL, so it never equals a plain text): `5m` and `5m0s` compare equal, `5m`
/// and `6m` do not, and a change is still reported at the field. Borrowed when no duration
/// field's text differs.
fn kubeadm_durations_by_value<'a, 'n>(
    old: Option<&'a Node<'n>>,
    new: Option<&'a Node<'n>>,
) -> (Option<Cow<'a, Node<'n>>>, Option<Cow<'a, Node<'n>>>) {
    if durations(old).eq(durations(new)) {
        return (old.map(Cow::Borrowed), new.map(Cow::Borrowed));
    }
    let by_value = |value: &mut Node<'n>| {
        let nanos = value
            .as_str()
            .and_then(|t| duration::parse_nanos(&t.to_str()));
        if let Some(nanos) = nanos {
            *value = Node::String(Str::Plain(Cow::Owned(format!("\u{0}duration:{nanos}"))));
        }
    };
    let normalise = |spec: Option<&'a Node<'n>>| {
        spec.map(|spec| {
            let mut spec = spec.clone();
            for path in KUBEADM_DURATIONS {
                if let Some(value) = at_mut(&mut spec, path) {
                    by_value(value);
                }
            }
            if let Some(Node::Array(tokens)) = at_mut(&mut spec, &BOOTSTRAP_TOKENS) {
                for token in tokens.iter_mut() {
                    if let Some(ttl) = token.get_mut("ttl") {
                        by_value(ttl);
                    }
                }
            }
            Cow::Owned(spec)
        })
    };
    (normalise(old), normalise(new))
}

fn at_mut<'a, 'n>(node: &'a mut Node<'n>, keys: &[&str]) -> Option<&'a mut Node<'n>> {
    keys.iter().try_fold(node, |n, key| n.get_mut(key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capi::providers::{default_field_rules, default_template_field_rules};
    use crate::diff::changes_at;
    use rstest::rstest;
    use serde_json::{json, Value};

    /// The changes the policy sees between two specs of `kind`: the defaulter applied, the
    /// kind's built-in rules.
    fn changes(kind: &str, old: Value, new: Value) -> Vec<String> {
        let (old, new) = (Node::from_value(&old), Node::from_value(&new));
        let (old, new) = as_defaulted(kind, Some(&old), Some(&new));
        changes_at(
            &["spec"],
            old.as_deref(),
            new.as_deref(),
            &default_field_rules(kind),
        )
        .into_iter()
        .map(|c| format!("{} {}", c.path, c.kind.as_str()))
        .collect()
    }

    /// CAPI v1.10's defaulter re-marshals v1beta1 durations (cluster test,
    /// TestV1beta1Era): the same value is no change, another value is.
    #[rstest]
    #[case::discovery_timeout_remarshalled(
        json!({"joinConfiguration": {"discovery": {"timeout": "5m"}}}),
        json!({"joinConfiguration": {"discovery": {"timeout": "5m0s"}}}),
        &[],
    )]
    #[case::control_plane_timeout_remarshalled(
        json!({"clusterConfiguration": {"apiServer": {"timeoutForControlPlane": "4m"}}}),
        json!({"clusterConfiguration": {"apiServer": {"timeoutForControlPlane": "4m0s"}}}),
        &[],
    )]
    #[case::token_ttls_remarshalled(
        json!({"initConfiguration": {"bootstrapTokens": [{"ttl": "24h"}, {"ttl": "90m"}]}}),
        json!({"initConfiguration": {"bootstrapTokens": [{"ttl": "24h0m0s"}, {"ttl": "1h30m0s"}]}}),
        &[],
    )]
    #[case::another_value(
        json!({"joinConfiguration": {"discovery": {"timeout": "5m"}}}),
        json!({"joinConfiguration": {"discovery": {"timeout": "6m0s"}}}),
        &["spec.joinConfiguration.discovery.timeout changed"],
    )]
    #[case::not_a_duration_stays_text(
        json!({"joinConfiguration": {"discovery": {"timeout": "soon"}}}),
        json!({"joinConfiguration": {"discovery": {"timeout": "later"}}}),
        &["spec.joinConfiguration.discovery.timeout changed"],
    )]
    #[case::other_fields_still_compared(
        json!({"joinConfiguration": {"discovery": {"timeout": "5m"}, "caCertPath": "/a"}}),
        json!({"joinConfiguration": {"discovery": {"timeout": "5m0s"}, "caCertPath": "/b"}}),
        &["spec.joinConfiguration.caCertPath changed"],
    )]
    fn kubeadm_durations_compare_by_value(
        #[case] old: Value,
        #[case] new: Value,
        #[case] expected: &[&str],
    ) {
        assert_eq!(changes("KubeadmConfig", old, new), expected);
    }

    fn user_data(data: Value) -> Value {
        json!({"agentConfig": {"format": "cloud-config", "additionalUserData": {"data": data}}})
    }

    // What the providers' own machinery does to an existing config: no edit.
    #[rstest]
    // cluster-api v1.10 bootstrap/kubeadm/internal/webhooks/kubeadmconfig.go registers the
    // defaulter with admission.DefaulterRemoveUnknownOrOmitableFields; controller-runtime
    // v0.20 pkg/webhook/admission/defaulter_custom.go then keeps the removal of every
    // zero-valued omitempty field (UseExperimentalRetryJoin is a plain bool, omitempty).
    #[case::kubeadm_prunes_a_false_bool("KubeadmConfig", json!({"useExperimentalRetryJoin": false, "files": [{"path": "/a", "append": false}]}), json!({"files": [{"path": "/a"}]}))]
    #[case::kubeadm_prunes_empty_string_and_zero("KubeadmConfig", json!({"joinConfiguration": {"nodeRegistration": {"criSocket": "", "name": "n"}, "timeouts": {"discoverySeconds": 0}}}), json!({"joinConfiguration": {"nodeRegistration": {"name": "n"}}}))]
    #[case::kubeadm_prunes_empty_list_and_map("KubeadmConfig", json!({"preKubeadmCommands": [], "mounts": [], "diskSetup": {}}), json!({}))]
    // k3s-io/cluster-api-k3s bootstrap/api/v1beta2/kthreesconfig_webhook.go
    // (*KThreesConfig).Default: both fields set when nil, on CREATE and UPDATE (since v0.2.0).
    #[case::k3s_defaults_server_config("KThreesConfig", json!({"version": "v1.31.1+k3s1", "serverConfig": {"tlsSan": ["a"]}}), json!({"version": "v1.31.1+k3s1", "serverConfig": {"tlsSan": ["a"], "disableCloudController": true, "cloudProviderName": "external"}}))]
    #[case::k3s_defaults_a_missing_server_config("KThreesConfig", json!({"version": "v1.31.1+k3s1"}), json!({"version": "v1.31.1+k3s1", "serverConfig": {"disableCloudController": true, "cloudProviderName": "external"}}))]
    // k3s bootstrap/controllers/kthreesconfig_controller.go reconcileTopLevelObjectSettings.
    #[case::k3s_controller_fills_version("KThreesConfig", json!({}), json!({"version": "v1.31.1+k3s1"}))]
    // rancher/cluster-api-provider-rke2 bootstrap/api/v1beta2/rke2config_webhook.go
    // DefaultRKE2ConfigSpec: format "cloud-config" when empty.
    #[case::rke2_defaults_format("RKE2Config", json!({"agentConfig": {"nodeName": "n"}}), json!({"agentConfig": {"nodeName": "n", "format": "cloud-config"}}))]
    // ... and CorrectArbitraryData: deletes write_files, ntp and runcmd; re-emits each map
    // value with yaml.v3 (indent 2, "\n  " prefix), each list value with a "\n" prefix.
    #[case::rke2_rewrites_user_data("RKE2Config",
        user_data(json!({"write_files": "- path: /etc/x", "ntp": "enabled: true", "runcmd": "- reboot",
                         "bootcmd": "[echo one, 'echo two']", "users": "ubuntu: {sudo: ALL}", "hostname": "node-a"})),
        user_data(json!({"bootcmd": "\n- echo one\n- echo two\n", "users": "\n  ubuntu:\n    sudo: ALL\n  ", "hostname": "node-a"})))]
    #[case::rke2_empty_value_becomes_an_empty_map("RKE2Config", user_data(json!({"users": "# none yet"})), user_data(json!({"users": "\n  {}\n  "})))]
    // The defaulter reads plain scalars as yaml.v3 does, not as YAML 1.2's core schema, and
    // re-emits them its way (found in the real cluster, cluster-test TestRKE2DefaulterNumbers).
    #[case::rke2_float_written_as_an_integer("RKE2Config", user_data(json!({"power_state": "{mode: reboot, timeout: 30.0}"})), user_data(json!({"power_state": "\n  mode: reboot\n  timeout: 30\n  "})))]
    #[case::rke2_leading_zero_is_octal("RKE2Config", user_data(json!({"swap": "{filename: /swap.img, size: auto, maxsize: 010}"})), user_data(json!({"swap": "\n  filename: /swap.img\n  maxsize: 8\n  size: auto\n  "})))]
    #[case::rke2_exponent_without_a_point("RKE2Config", user_data(json!({"x": "{n: 1e3}"})), user_data(json!({"x": "\n  \"n\": 1000\n  "})))]
    #[case::rke2_underscores_in_an_integer("RKE2Config", user_data(json!({"x": "{n: 1_000}"})), user_data(json!({"x": "\n  \"n\": 1000\n  "})))]
    #[case::rke2_binary_integer("RKE2Config", user_data(json!({"x": "{n: 0b101}"})), user_data(json!({"x": "\n  \"n\": 5\n  "})))]
    #[case::rke2_date_is_a_timestamp("RKE2Config", user_data(json!({"x": "{d: 2001-12-14}"})), user_data(json!({"x": "\n  d: 2001-12-14T00:00:00Z\n  "})))]
    #[case::rke2_timestamp_with_an_offset("RKE2Config", user_data(json!({"x": "{d: 2001-12-14t21:59:43.100-05:00}"})), user_data(json!({"x": "\n  d: 2001-12-14T21:59:43.1-05:00\n  "})))]
    #[case::rke2_plus_sign("RKE2Config", user_data(json!({"x": "{n: +5}"})), user_data(json!({"x": "\n  \"n\": 5\n  "})))]
    #[case::rke2_capitalised_bool("RKE2Config", user_data(json!({"x": "{b: False}"})), user_data(json!({"x": "\n  b: false\n  "})))]
    #[case::rke2_yes_is_a_string("RKE2Config", user_data(json!({"x": "{b: yes}"})), user_data(json!({"x": "\n  b: \"yes\"\n  "})))]
    #[case::rke2_hex_and_octal("RKE2Config", user_data(json!({"x": "{h: 0x1F, o: 0o17}"})), user_data(json!({"x": "\n  h: 31\n  o: 15\n  "})))]
    #[case::rke2_null("RKE2Config", user_data(json!({"x": "{n: ~}"})), user_data(json!({"x": "\n  \"n\": null\n  "})))]
    #[case::rke2_floats("RKE2Config", user_data(json!({"x": "[.5, .inf, 1.50]"})), user_data(json!({"x": "\n- 0.5\n- .inf\n- 1.5\n"})))]
    #[case::rke2_large_float_keeps_its_exponent("RKE2Config", user_data(json!({"x": "{n: 1e6, m: 09}"})), user_data(json!({"x": "\n  m: 9\n  \"n\": 1e+06\n  "})))]
    #[case::rke2_space_separated_timestamp("RKE2Config", user_data(json!({"x": "{t: 2001-12-14 1:2:3}"})), user_data(json!({"x": "\n  t: 2001-12-14T01:02:03Z\n  "})))]
    #[case::rke2_null_value_becomes_an_empty_map("RKE2Config", user_data(json!({"x": "~"})), user_data(json!({"x": "\n  {}\n  "})))]
    #[case::rke2_quoted_digits_stay_a_string("RKE2Config", user_data(json!({"x": "{s: '010'}"})), user_data(json!({"x": "\n  s: \"010\"\n  "})))]
    // RKE2 v0.20.1+ prunes like CAPI v1.10 (the same controller-runtime option).
    #[case::rke2_prunes("RKE2Config", json!({"agentConfig": {"format": "cloud-config", "airGapped": false, "nodeName": ""}}), json!({"agentConfig": {"format": "cloud-config"}}))]
    fn provider_machinery_is_no_edit(#[case] kind: &str, #[case] old: Value, #[case] new: Value) {
        assert_eq!(changes(kind, old, new), Vec::<String>::new());
    }

    // The same fields changed by a person, or a value once set changed: still edits, by path.
    #[rstest]
    #[case::kubeadm_bool_flipped("KubeadmConfig", json!({"useExperimentalRetryJoin": false}), json!({"useExperimentalRetryJoin": true}), &["spec.useExperimentalRetryJoin changed"])]
    #[case::kubeadm_true_removed("KubeadmConfig", json!({"useExperimentalRetryJoin": true}), json!({}), &["spec.useExperimentalRetryJoin removed"])]
    #[case::kubeadm_zero_added("KubeadmConfig", json!({}), json!({"useExperimentalRetryJoin": false}), &["spec.useExperimentalRetryJoin added"])]
    #[case::kubeadm_string_emptied("KubeadmConfig", json!({"joinConfiguration": {"nodeRegistration": {"criSocket": "unix:///run/containerd/containerd.sock"}}}), json!({"joinConfiguration": {"nodeRegistration": {"criSocket": ""}}}), &["spec.joinConfiguration.nodeRegistration.criSocket changed"])]
    #[case::kubeadm_list_element_removed("KubeadmConfig", json!({"preKubeadmCommands": ["a", ""]}), json!({"preKubeadmCommands": ["a"]}), &["spec.preKubeadmCommands[1] removed"])]
    #[case::k3s_cloud_provider_changed("KThreesConfig", json!({"serverConfig": {"disableCloudController": true, "cloudProviderName": "external"}}), json!({"serverConfig": {"disableCloudController": true, "cloudProviderName": "aws"}}), &["spec.serverConfig.cloudProviderName changed"])]
    #[case::k3s_cloud_controller_enabled("KThreesConfig", json!({"serverConfig": {"disableCloudController": true}}), json!({"serverConfig": {"disableCloudController": false}}), &["spec.serverConfig.disableCloudController changed"])]
    #[case::rke2_format_changed("RKE2Config", json!({"agentConfig": {"format": "cloud-config"}}), json!({"agentConfig": {"format": "ignition"}}), &["spec.agentConfig.format changed"])]
    #[case::rke2_user_data_says_something_else("RKE2Config",
        user_data(json!({"bootcmd": "[echo one, echo two]", "hostname": "node-a"})),
        user_data(json!({"bootcmd": "\n- echo one\n- echo three\n", "hostname": "node-b"})),
        &["spec.agentConfig.additionalUserData.data.bootcmd changed", "spec.agentConfig.additionalUserData.data.hostname changed"])]
    #[case::rke2_user_data_key_added("RKE2Config", user_data(json!({"bootcmd": "- a"})), user_data(json!({"bootcmd": "\n- a\n", "users": "\n  ubuntu: {}\n  "})), &["spec.agentConfig.additionalUserData.data.users added"])]
    #[case::rke2_map_becomes_text("RKE2Config", user_data(json!({"users": "a: b"})), user_data(json!({"users": "a: b c: d"})), &["spec.agentConfig.additionalUserData.data.users changed"])]
    #[case::rke2_number_changed("RKE2Config", user_data(json!({"power_state": "{timeout: 30.0}"})), user_data(json!({"power_state": "\n  timeout: 31\n  "})), &["spec.agentConfig.additionalUserData.data.power_state changed"])]
    #[case::rke2_quoted_digits_become_octal("RKE2Config", user_data(json!({"swap": "{maxsize: '010'}"})), user_data(json!({"swap": "\n  maxsize: 010\n  "})), &["spec.agentConfig.additionalUserData.data.swap changed"])]
    #[case::rke2_yes_becomes_true("RKE2Config", user_data(json!({"x": "{b: yes}"})), user_data(json!({"x": "\n  b: true\n  "})), &["spec.agentConfig.additionalUserData.data.x changed"])]
    #[case::rke2_timestamp_becomes_a_string("RKE2Config", user_data(json!({"x": "{d: 2001-12-14}"})), user_data(json!({"x": "\n  d: \"2001-12-14T00:00:00Z\"\n  "})), &["spec.agentConfig.additionalUserData.data.x changed"])]
    // Other kinds are compared as text: only RKE2's defaulter rewrites user data.
    #[case::eks_text_is_text("EKSConfig", user_data(json!({"bootcmd": "[a]"})), user_data(json!({"bootcmd": "\n- a\n"})), &["spec.agentConfig.additionalUserData.data.bootcmd changed"])]
    fn edits_of_the_same_fields_still_count(
        #[case] kind: &str,
        #[case] old: Value,
        #[case] new: Value,
        #[case] expected: &[&str],
    ) {
        assert_eq!(changes(kind, old, new), expected);
    }

    #[test]
    fn templates_get_the_rke2_format_default_under_spec_template_spec() {
        let rules = default_template_field_rules("RKE2ConfigTemplate");
        let old = json!({"agentConfig": {"nodeName": "n"}});
        let new = json!({"agentConfig": {"nodeName": "n", "format": "cloud-config"}});
        let root = ["spec", "template", "spec"];
        assert!(crate::diff::changed_fields_at(&root, Some(&old), Some(&new), &rules).is_empty());
        let kubeadm = default_template_field_rules("KubeadmConfigTemplate");
        assert_eq!(
            crate::diff::changed_fields_at(&root, Some(&old), Some(&new), &kubeadm).len(),
            1
        );
    }

    /// What CAPI v1.10's KubeadmConfigTemplate defaulter wrote into a template stored before it
    /// ran (cluster test, TestV1beta1Era), and a person's real edit beside it.
    #[rstest]
    #[case::format_and_pull_policy_filled(
        json!({"joinConfiguration": {"nodeRegistration": {"kubeletExtraArgs": {"max-pods": "110"}}}}),
        json!({"format": "cloud-config", "joinConfiguration": {"nodeRegistration": {"imagePullPolicy": "IfNotPresent", "kubeletExtraArgs": {"max-pods": "110"}}}}),
        &[],
    )]
    #[case::a_real_edit_still_counts(
        json!({"format": "cloud-config", "joinConfiguration": {"nodeRegistration": {"kubeletExtraArgs": {"max-pods": "110"}}}}),
        json!({"format": "ignition", "joinConfiguration": {"nodeRegistration": {"kubeletExtraArgs": {"max-pods": "110"}}}}),
        &["spec.template.spec.format"],
    )]
    fn kubeadm_templates_get_the_v1beta1_defaults_under_spec_template_spec(
        #[case] old: Value,
        #[case] new: Value,
        #[case] changed: &[&str],
    ) {
        let rules = default_template_field_rules("KubeadmConfigTemplate");
        let root = ["spec", "template", "spec"];
        let found: Vec<String> =
            crate::diff::changed_fields_at(&root, Some(&old), Some(&new), &rules)
                .iter()
                .map(|c| c.path.to_string())
                .collect();
        assert_eq!(found, changed);
    }
}
