//! What CAPI's own machinery writes into an existing bootstrap config or template, per provider:
//! the controllers' identities, the fields they write (machine-only or fill-once), and what the
//! providers' defaulting webhooks do to every CREATE/UPDATE, whoever sends it. A validating
//! policy sees each request after the mutating webhooks ran, so none of this may count as an
//! edit. The README's "What CAPI itself writes" table is this module in prose.
//!
//! Read from the providers' code, late 2026 (each fact cites its source where it is used):
//! - CABPK (KubeadmConfig): the token, rotated every ~7.5 min, is machine-only; the discovery
//!   fields it fills once; the v1beta1 defaults; CAPI v1.10's defaulters prune zero-valued
//!   `omitempty` fields on every write ([`crate::diff`] treats that pruning as no change).
//! - k3s (KThreesConfig v1beta2): the defaulter sets `serverConfig.disableCloudController` and
//!   `serverConfig.cloudProviderName` when nil; the controller fills `spec.version` from a
//!   Machine owner when empty.
//! - RKE2 (RKE2Config, RKE2ConfigTemplate): the defaulter sets `agentConfig.format` when empty
//!   and rewrites `agentConfig.additionalUserData.data` ([`normalise_rke2_user_data`]).
//! - k0s: `spec.version` filled from the owner (as k3s). CAPA (EKSConfig, NodeadmConfig),
//!   MicroK8s and Talos write no spec of an existing object.

use std::borrow::Cow;

use serde_json::Number;
use yaml_rust2::{Yaml, YamlLoader};

use crate::capi::paths::{builtin_path, PathPattern};
use crate::diff::FieldRules;
use crate::reader::json::{Node, Str};

/// The controller identities of CAPI core and of every default bootstrap kind's provider, as
/// `clusterctl init` installs them: `system:serviceaccount:<namespace>:<namePrefix><name>`, the
/// namespace and name prefix from the provider's `config/default/kustomization.yaml`, the name
/// from its manager's ServiceAccount. Where a provider ships none (k3s, Talos) its pods run as
/// the namespace's `default`, shared with anything else deployed there.
pub const DEFAULT_CONTROLLER_USERS: [&str; 8] = [
    // kubernetes-sigs/cluster-api core/config/default/kustomization.yaml (namespace capi-system,
    // namePrefix capi-) + core/config/rbac/service_account.yaml (manager); config/ before
    // v1.14. The topology controller's in-place patches come from it.
    "system:serviceaccount:capi-system:capi-manager",
    // kubernetes-sigs/cluster-api bootstrap/kubeadm/config/default/kustomization.yaml
    // (capi-kubeadm-bootstrap-system, capi-kubeadm-bootstrap-) + config/rbac/service_account.yaml.
    "system:serviceaccount:capi-kubeadm-bootstrap-system:capi-kubeadm-bootstrap-manager",
    // kubernetes-sigs/cluster-api-provider-aws config/default/kustomization.yaml (capa-system,
    // capa-) + config/rbac/serviceaccount.yaml and manager_service_account_patch.yaml
    // (controller-manager): EKSConfig and NodeadmConfig, in the main manager since v0.7.
    "system:serviceaccount:capa-system:capa-controller-manager",
    // rancher/cluster-api-provider-rke2 bootstrap/config/default/kustomization.yaml
    // (rke2-bootstrap-system, rke2-bootstrap-) + bootstrap/config/rbac/service_account.yaml.
    "system:serviceaccount:rke2-bootstrap-system:rke2-bootstrap-manager",
    // k3s-io/cluster-api-k3s bootstrap/config/default/kustomization.yaml (namespace
    // capi-k3s-bootstrap-system); bootstrap/config/rbac has no ServiceAccount and the manager
    // sets no serviceAccountName, so it runs as the namespace's `default` (no namePrefix).
    "system:serviceaccount:capi-k3s-bootstrap-system:default",
    // k0sproject/k0smotron config/clusterapi/bootstrap/kustomization.yaml (namespace k0smotron,
    // namePrefix k0smotron-, nameSuffix -bootstrap) + its rbac/service_account.yaml
    // (controller-manager): clusterctl's k0sproject-k0smotron bootstrap provider.
    "system:serviceaccount:k0smotron:k0smotron-controller-manager-bootstrap",
    // canonical/cluster-api-bootstrap-provider-microk8s config/default/kustomization.yaml
    // (capi-microk8s-bootstrap-system, capi-microk8s-bootstrap-) + config/rbac/
    // service_account.yaml (controller-manager).
    "system:serviceaccount:capi-microk8s-bootstrap-system:capi-microk8s-bootstrap-controller-manager",
    // siderolabs/cluster-api-bootstrap-provider-talos config/default/kustomization.yaml
    // (namespace cabpt-system): no ServiceAccount of its own, so the namespace's `default`.
    "system:serviceaccount:cabpt-system:default",
];

/// CABPK rotates the bootstrap token for as long as a MachinePool owns the config.
const KUBEADM_MACHINE_ONLY: &[PathPattern] =
    &[builtin_path! { spec.joinConfiguration.discovery.bootstrapToken.token }];
/// CABPK fills the discovery fields when empty; CAPI's v1beta1 defaulter sets the rest.
const KUBEADM_FILL_ONCE: &[PathPattern] = &[
    builtin_path! { spec.joinConfiguration.discovery.bootstrapToken.apiServerEndpoint },
    builtin_path! { spec.joinConfiguration.discovery.bootstrapToken.caCertHashes },
    builtin_path! { spec.joinConfiguration.discovery.bootstrapToken.unsafeSkipCAVerification },
    builtin_path! { spec.joinConfiguration.discovery.file.kubeConfig.cluster.server },
    builtin_path! { spec.joinConfiguration.discovery.file.kubeConfig.cluster.certificateAuthorityData },
    builtin_path! { spec.joinConfiguration.discovery.file.kubeConfig.user.exec.apiVersion },
    builtin_path! { spec.format },
    builtin_path! { spec.initConfiguration.nodeRegistration.imagePullPolicy },
    builtin_path! { spec.joinConfiguration.nodeRegistration.imagePullPolicy },
];
/// k0s copies the version from a Machine owner when it is empty.
const K0S_FILL_ONCE: &[PathPattern] = &[builtin_path! { spec.version }];
/// k3s: the version as k0s; the defaulter's two serverConfig fields, set when nil.
const K3S_FILL_ONCE: &[PathPattern] = &[
    builtin_path! { spec.version },
    builtin_path! { spec.serverConfig.disableCloudController },
    builtin_path! { spec.serverConfig.cloudProviderName },
];
/// RKE2: the defaulter's format, set when empty.
const RKE2_FILL_ONCE: &[PathPattern] = &[builtin_path! { spec.agentConfig.format }];
const RKE2_TEMPLATE_FILL_ONCE: &[PathPattern] =
    &[builtin_path! { spec.template.spec.agentConfig.format }];
/// CAPI v1.10's KubeadmConfigTemplate defaulter (bootstrap/kubeadm/internal/webhooks,
/// `KubeadmConfigTemplate.Default` calls the config's defaults on `spec.template.spec`):
/// `format` and the nodeRegistrations' `imagePullPolicy` when empty, and the exec plugin's
/// `apiVersion`. Seen in the cluster test (TestV1beta1EraTemplate): a person's label of a
/// template stored before the defaulter was refused as `...format: Forbidden: added`.
const KUBEADM_TEMPLATE_FILL_ONCE: &[PathPattern] = &[
    builtin_path! { spec.template.spec.format },
    builtin_path! { spec.template.spec.initConfiguration.nodeRegistration.imagePullPolicy },
    builtin_path! { spec.template.spec.joinConfiguration.nodeRegistration.imagePullPolicy },
    builtin_path! { spec.template.spec.joinConfiguration.discovery.file.kubeConfig.user.exec.apiVersion },
];

fn rules(machine_only: &[PathPattern], fill_once: &[PathPattern]) -> FieldRules {
    FieldRules {
        ignored: machine_only.to_vec(),
        fill_once: fill_once.to_vec(),
    }
}

/// The built-in non-compared fields of a config kind (paths from the object's top).
pub(crate) fn default_field_rules(kind: &str) -> FieldRules {
    match kind {
        "KubeadmConfig" => rules(KUBEADM_MACHINE_ONLY, KUBEADM_FILL_ONCE),
        "K0sWorkerConfig" => rules(&[], K0S_FILL_ONCE),
        "KThreesConfig" => rules(&[], K3S_FILL_ONCE),
        "RKE2Config" => rules(&[], RKE2_FILL_ONCE),
        _ => FieldRules::default(),
    }
}

/// The built-in non-compared fields of a bootstrap template kind (`RKE2ConfigTemplate`,
/// `KubeadmConfigTemplate`): only
/// what a defaulting webhook writes; no controller writes into a template's spec.
pub(crate) fn default_template_field_rules(kind: &str) -> FieldRules {
    match kind {
        "RKE2ConfigTemplate" => rules(&[], RKE2_TEMPLATE_FILL_ONCE),
        "KubeadmConfigTemplate" => rules(&[], KUBEADM_TEMPLATE_FILL_ONCE),
        _ => FieldRules::default(),
    }
}

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
    if config_kind == "KubeadmConfig" {
        return kubeadm_durations_by_value(old, new);
    }
    let user_data = |spec: Option<&'a Node<'n>>| spec.and_then(|s| s.at(&USER_DATA));
    if config_kind != "RKE2Config" || user_data(old) == user_data(new) {
        return (old.map(Cow::Borrowed), new.map(Cow::Borrowed));
    }
    let normalise = |spec: Option<&'a Node<'n>>| {
        spec.map(|spec| {
            let mut spec = spec.clone();
            if let Some(Node::Object(data)) = at_mut(&mut spec, &USER_DATA) {
                data.retain(|(key, _)| !RKE2_DROPPED_USER_DATA_KEYS.iter().any(|k| key.is(k)));
                for (_, value) in data.iter_mut() {
                    let parsed = value.as_str().and_then(|text| parsed_yaml(&text.to_str()));
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
/// `5m` comes back `5m0s` (seen in the cluster test, TestV1beta1EraDurations, on a person's
/// label). `initConfiguration.bootstrapTokens[].ttl` too, below.
const KUBEADM_DURATIONS: [&[&str]; 2] = [
    &["joinConfiguration", "discovery", "timeout"],
    &[
        "clusterConfiguration",
        "apiServer",
        "timeoutForControlPlane",
    ],
];

/// Both specs with every duration field that Go's time.ParseDuration reads written as its
/// value (after a NUL, so it never equals a plain text): `5m` and `5m0s` compare equal, `5m`
/// and `6m` do not, and a change is still reported at the field. Borrowed when no duration
/// field's text differs.
fn kubeadm_durations_by_value<'a, 'n>(
    old: Option<&'a Node<'n>>,
    new: Option<&'a Node<'n>>,
) -> (Option<Cow<'a, Node<'n>>>, Option<Cow<'a, Node<'n>>>) {
    let texts = |spec: Option<&Node<'n>>| -> Vec<Option<String>> {
        let mut out: Vec<Option<String>> = KUBEADM_DURATIONS
            .iter()
            .map(|path| {
                spec.and_then(|s| s.at(path))
                    .and_then(|v| v.as_str())
                    .map(|t| t.to_str().into_owned())
            })
            .collect();
        if let Some(Node::Array(tokens)) =
            spec.and_then(|s| s.at(&["initConfiguration", "bootstrapTokens"]))
        {
            out.extend(tokens.iter().map(|t| {
                t.at(&["ttl"])
                    .and_then(|v| v.as_str())
                    .map(|s| s.to_str().into_owned())
            }));
        }
        out
    };
    if texts(old) == texts(new) {
        return (old.map(Cow::Borrowed), new.map(Cow::Borrowed));
    }
    let by_value = |value: &mut Node<'n>| {
        let nanos = value.as_str().and_then(|t| go_duration_nanos(&t.to_str()));
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
            if let Some(Node::Array(tokens)) =
                at_mut(&mut spec, &["initConfiguration", "bootstrapTokens"])
            {
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

/// Go's time.ParseDuration, to whole nanoseconds: an optional sign, then `0` or one or more
/// decimal numbers (a fraction allowed) each with its unit, `ns`, `us` (`µs`, `μs`), `ms`, `s`,
/// `m`, `h`. `None` for anything Go refuses.
fn go_duration_nanos(text: &str) -> Option<i128> {
    let (sign, mut rest) = match text.strip_prefix('-') {
        Some(r) => (-1, r),
        None => (1, text.strip_prefix('+').unwrap_or(text)),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
        let whole_len = digits(rest);
        let whole = &rest[..whole_len];
        rest = &rest[whole_len..];
        let mut fraction = "";
        if let Some(r) = rest.strip_prefix('.') {
            let len = digits(r);
            fraction = &r[..len];
            rest = &r[len..];
        }
        if whole.is_empty() && fraction.is_empty() {
            return None;
        }
        let unit_len = rest
            .char_indices()
            .find(|(_, c)| *c == '.' || c.is_ascii_digit())
            .map_or(rest.len(), |(i, _)| i);
        let unit: i128 = match &rest[..unit_len] {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        rest = &rest[unit_len..];
        let whole: i128 = if whole.is_empty() {
            0
        } else {
            whole.parse().ok()?
        };
        let mut value = whole.checked_mul(unit)?;
        if !fraction.is_empty() {
            let digits = fraction.len().min(18) as u32;
            let numerator: i128 = fraction[..digits as usize].parse().ok()?;
            value =
                value.checked_add(numerator.checked_mul(unit)? / 10i128.checked_pow(digits)?)?;
        }
        total = total.checked_add(value)?;
    }
    Some(sign * total)
}

fn at_mut<'a, 'n>(node: &'a mut Node<'n>, keys: &[&str]) -> Option<&'a mut Node<'n>> {
    keys.iter().try_fold(node, |n, key| n.get_mut(key))
}

/// A user-data value as RKE2's defaulter reads it: a YAML map or list (an empty or comment-only
/// value is the empty map) stands for its content, written as sorted JSON after a NUL so it
/// never equals a plain text and a change is reported at `data.<key>` itself; `None` for
/// scalars and unreadable YAML, which the defaulter leaves as text.
fn parsed_yaml(text: &str) -> Option<String> {
    let documents = YamlLoader::load_from_str(text).ok()?;
    let content = match documents.into_iter().next() {
        None => Node::Object(Vec::new()),
        Some(document @ (Yaml::Hash(_) | Yaml::Array(_))) => yaml_node(document)?,
        Some(_) => return None,
    };
    Some(format!("\u{0}yaml:{}", content.to_json()))
}

/// A parsed YAML node as the JSON node it stands for; map keys that are not strings are written
/// as their YAML text.
fn yaml_node(node: Yaml) -> Option<Node<'static>> {
    let text = |s: String| Node::String(Str::Plain(Cow::Owned(s)));
    Some(match node {
        Yaml::Null => Node::Null,
        Yaml::Boolean(b) => Node::Bool(b),
        Yaml::Integer(i) => Node::Number(Number::from(i)),
        Yaml::Real(real) => match real.parse::<f64>().ok().and_then(Number::from_f64) {
            Some(n) => Node::Number(n),
            None => text(real),
        },
        Yaml::String(s) => text(s),
        Yaml::Array(items) => Node::Array(
            items
                .into_iter()
                .map(yaml_node)
                .collect::<Option<Vec<_>>>()?,
        ),
        Yaml::Hash(entries) => {
            let mut fields = Vec::with_capacity(entries.len());
            for (key, value) in entries {
                let key = match key {
                    Yaml::String(s) => s,
                    Yaml::Integer(i) => i.to_string(),
                    Yaml::Real(r) => r,
                    Yaml::Boolean(b) => b.to_string(),
                    Yaml::Null => "null".to_string(),
                    _ => return None,
                };
                fields.push((Str::Plain(Cow::Owned(key)), yaml_node(value)?));
            }
            Node::object(fields)
        }
        Yaml::Alias(_) | Yaml::BadValue => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::changes_at;
    use rstest::rstest;
    use serde_json::{json, Value};

    /// The built-in patterns, made at compile time, are the patterns their text parses to.
    #[rstest]
    #[case::kubeadm(default_field_rules("KubeadmConfig"), 1, 9)]
    #[case::k0s(default_field_rules("K0sWorkerConfig"), 0, 1)]
    #[case::k3s(default_field_rules("KThreesConfig"), 0, 3)]
    #[case::rke2(default_field_rules("RKE2Config"), 0, 1)]
    #[case::rke2_template(default_template_field_rules("RKE2ConfigTemplate"), 0, 1)]
    #[case::kubeadm_template(default_template_field_rules("KubeadmConfigTemplate"), 0, 4)]
    fn builtin_patterns_are_what_their_text_parses_to(
        #[case] rules: FieldRules,
        #[case] ignored: usize,
        #[case] fill_once: usize,
    ) {
        assert_eq!(
            (rules.ignored.len(), rules.fill_once.len()),
            (ignored, fill_once)
        );
        for pattern in rules.ignored.iter().chain(&rules.fill_once) {
            assert_eq!(PathPattern::parse(pattern.as_str()).as_ref(), Ok(pattern));
            assert!(pattern.as_str().starts_with("spec.") && !pattern.as_str().contains(' '));
        }
    }

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

    #[rstest]
    #[case::minutes("5m", Some(300_000_000_000))]
    #[case::as_go_writes_it("5m0s", Some(300_000_000_000))]
    #[case::hours_and_minutes("1h30m", Some(5_400_000_000_000))]
    #[case::fraction("1.5s", Some(1_500_000_000))]
    #[case::leading_dot(".5s", Some(500_000_000))]
    #[case::micro_sign("3\u{b5}s", Some(3_000))]
    #[case::zero("0", Some(0))]
    #[case::negative("-2m", Some(-120_000_000_000))]
    #[case::no_unit("5", None)]
    #[case::unknown_unit("5d", None)]
    #[case::empty("", None)]
    #[case::only_a_sign("-", None)]
    #[case::overflow("99999999999999999999999999999999999999h", None)]
    fn durations_are_read_as_go_reads_them(#[case] text: &str, #[case] nanos: Option<i128>) {
        assert_eq!(go_duration_nanos(text), nanos);
    }

    /// CAPI v1.10's defaulter re-marshals v1beta1 durations (cluster test,
    /// TestV1beta1EraDurations): the same value is no change, another value is.
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
    /// ran (cluster test, TestV1beta1EraTemplate), and a person's real edit beside it.
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

    #[test]
    fn unreadable_yaml_and_scalars_stay_text() {
        for text in ["[unclosed", "just words", "42", "*alias"] {
            assert_eq!(parsed_yaml(text), None, "{text}");
        }
        assert_eq!(parsed_yaml(""), parsed_yaml("\n  {}\n  "));
        assert_eq!(
            parsed_yaml("{a: 1, b: [x]}"),
            parsed_yaml("b:\n- x\na: 1\n")
        );
        assert_ne!(parsed_yaml("{a: 1}"), parsed_yaml("{a: '1'}"));
    }

    /// The text a user-data value stands for: sorted JSON after a NUL, as serde_json writes it.
    #[rstest]
    #[case::map("b: 1\na: x", Some("{\"a\":\"x\",\"b\":1}"))]
    #[case::list(
        "- 1\n- 2.50\n- {k: v}\n- true\n- ~",
        Some("[1,2.5,{\"k\":\"v\"},true,null]")
    )]
    #[case::empty("", Some("{}"))]
    #[case::comment_only("# none yet", Some("{}"))]
    #[case::keys_that_are_no_strings(
        "1: a\ntrue: b\n~: c",
        Some("{\"1\":\"a\",\"null\":\"c\",\"true\":\"b\"}")
    )]
    #[case::not_a_number("x: .inf", Some("{\"x\":\".inf\"}"))]
    #[case::escaped("x: \"q\\\"\\n\"", Some("{\"x\":\"q\\\"\\n\"}"))]
    #[case::a_scalar("plain text", None)]
    #[case::unreadable("a: [", None)]
    fn user_data_as_the_defaulter_reads_it(#[case] text: &str, #[case] json: Option<&str>) {
        assert_eq!(parsed_yaml(text), json.map(|j| format!("\u{0}yaml:{j}")));
    }
}
