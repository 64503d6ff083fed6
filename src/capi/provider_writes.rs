//! What CAPI's own machinery writes into an existing bootstrap config or template, per provider:
//! the controllers' identities, the fields they write (machine-only or fill-once), and what the
//! providers' defaulting webhooks do to every CREATE/UPDATE, whoever sends it. A validating
//! policy sees each request after the mutating webhooks ran, so none of this may count as an
//! edit. The table "What CAPI itself writes" of docs/compared-fields.md is this module in prose.
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
use yaml_rust2::parser::{Event, EventReceiver, Parser};
use yaml_rust2::scanner::TScalarStyle;

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
/// `apiVersion`. Seen in the cluster test (TestV1beta1Era): a person's label of a
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
        zero_is_absent: &[],
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

/// A user-data value as RKE2's defaulter reads it: a YAML map or list (an empty, comment-only or
/// null value is the empty map) stands for its content, written as sorted JSON after a NUL so it
/// never equals a plain text and a change is reported at `data.<key>` itself; `None` for
/// scalars and for YAML the defaulter would not read (or that this reading does not mirror:
/// tags, aliases, merge keys, duplicate keys), which is compared as text.
///
/// The defaulter decodes with gopkg.in/yaml.v3 (`yaml.Unmarshal` into a `map[string]interface{}`,
/// else a `[]interface{}`, only the first document), so plain scalars are resolved as yaml.v3's
/// resolve.go does ([`resolve_plain`]), not as YAML 1.2's core schema, and its re-emitted text
/// reads back as the same content: numbers compare by value (yaml.v3 writes a float64 with
/// `FormatFloat(f, 'g', -1)`, so a stored `30.0` comes back as `30`), timestamps as yaml.v3
/// re-emits them (RFC 3339). The top map's keys are the keys' own text, as yaml.v3 decodes a
/// key into a Go `string` (a plain null key is dropped).
fn parsed_yaml(text: &str) -> Option<String> {
    let mut events = Events(Vec::new());
    Parser::new_from_str(text).load(&mut events, false).ok()?;
    let mut events = events.0.into_iter().skip_while(|e| {
        matches!(
            e,
            Event::StreamStart | Event::DocumentStart | Event::Nothing
        )
    });
    let content = match events.next() {
        None | Some(Event::StreamEnd | Event::DocumentEnd) => Node::Object(Vec::new()),
        Some(Event::Scalar(value, TScalarStyle::Plain, _, None))
            if matches!(resolve_plain(&value), Scalar::Null) =>
        {
            Node::Object(Vec::new())
        }
        Some(first @ (Event::MappingStart(..) | Event::SequenceStart(..))) => {
            yaml_node(first, &mut events, 0)?
        }
        Some(_) => return None,
    };
    Some(format!("\u{0}yaml:{}", content.to_json()))
}

/// The parser's events, collected.
struct Events(Vec<Event>);

impl EventReceiver for Events {
    fn on_event(&mut self, event: Event) {
        self.0.push(event);
    }
}

/// Deeper YAML than this is compared as text (no recursion without bound).
const MAX_YAML_DEPTH: usize = 64;

/// The node that `first` and the events after it stand for, as yaml.v3 decodes it into an
/// `interface{}`; `depth` 0 is the top map, whose keys are their text.
fn yaml_node(
    first: Event,
    events: &mut impl Iterator<Item = Event>,
    depth: usize,
) -> Option<Node<'static>> {
    if depth > MAX_YAML_DEPTH {
        return None;
    }
    Some(match first {
        Event::Scalar(value, style, _, None) => scalar(&value, style).node(),
        Event::SequenceStart(_, None) => {
            let mut items = Vec::new();
            loop {
                match events.next()? {
                    Event::SequenceEnd => break,
                    item => items.push(yaml_node(item, events, depth + 1)?),
                }
            }
            Node::Array(items)
        }
        Event::MappingStart(_, None) => {
            let mut fields: Vec<(Str<'static>, Node<'static>)> = Vec::new();
            let mut texts: Vec<String> = Vec::new();
            loop {
                let (key, style) = match events.next()? {
                    Event::MappingEnd => break,
                    Event::Scalar(key, style, _, None) => (key, style),
                    _ => return None, // a map or list as a key: yaml.v3 refuses it
                };
                // yaml.v3 refuses a key's text twice, whatever its style; a merge key it merges.
                if key == "<<" || texts.contains(&key) {
                    return None;
                }
                texts.push(key.clone());
                let value = yaml_node(events.next()?, events, depth + 1)?;
                let key = match (depth, scalar(&key, style)) {
                    (0, Scalar::Null) => continue,
                    (0, _) => escaped(key),
                    (_, resolved) => resolved.key(),
                };
                if fields.iter().any(|(k, _)| k.to_str() == key.as_str()) {
                    return None; // two texts of one value (`8`, `010`): compared as text
                }
                fields.push((Str::Plain(Cow::Owned(key)), value));
            }
            Node::object(fields)
        }
        _ => return None, // tags, aliases
    })
}

/// A scalar's value as yaml.v3 resolves it.
#[derive(Debug, PartialEq)]
enum Scalar {
    Null,
    Bool(bool),
    Int(Number),
    Float(f64),
    /// As yaml.v3 re-emits a `time.Time`: RFC 3339 with nanoseconds, the offset kept.
    Timestamp(String),
    Str(String),
}

fn scalar(text: &str, style: TScalarStyle) -> Scalar {
    match style {
        TScalarStyle::Plain => resolve_plain(text),
        _ => Scalar::Str(text.to_string()),
    }
}

/// A string's text, a leading NUL doubled so it never equals the marked text of a value that is
/// no string.
fn escaped(text: String) -> String {
    if text.starts_with('\u{0}') {
        format!("\u{0}{text}")
    } else {
        text
    }
}

impl Scalar {
    fn node(self) -> Node<'static> {
        let text = |s: String| Node::String(Str::Plain(Cow::Owned(s)));
        match self {
            Scalar::Null => Node::Null,
            Scalar::Bool(b) => Node::Bool(b),
            Scalar::Int(n) => Node::Number(n),
            Scalar::Float(f) => match float_number(f) {
                Some(n) => Node::Number(n),
                None => text(format!("\u{0}float:{}", float_text(f))),
            },
            Scalar::Timestamp(t) => text(format!("\u{0}timestamp:{t}")),
            Scalar::Str(s) => text(escaped(s)),
        }
    }

    /// A nested map's key: a string is its text, any other value its marked JSON text.
    fn key(self) -> String {
        match self.node() {
            Node::String(s) => s.to_str().into_owned(),
            other => format!("\u{0}{}", other.to_json()),
        }
    }
}

/// A float as the number it compares as: an integral value as the integer yaml.v3 re-emits
/// (`30.0` is written `30`), `None` for infinities and NaN.
fn float_number(f: f64) -> Option<Number> {
    // -2^63 <= f < 2^63: exactly representable bounds, so the cast is exact.
    if f.fract() == 0.0 && (i64::MIN as f64..-(i64::MIN as f64)).contains(&f) {
        return Some(Number::from(f as i64));
    }
    Number::from_f64(f)
}

fn float_text(f: f64) -> &'static str {
    match f {
        f if f.is_nan() => ".nan",
        f if f > 0.0 => ".inf",
        _ => "-.inf",
    }
}

/// A plain scalar as gopkg.in/yaml.v3 v3.0.1 resolves it (resolve.go `resolve` with no tag):
/// - null: empty, `~`, `null`, `Null`, `NULL`; bool: `true`/`True`/`TRUE`, `false`/`False`/`FALSE`
///   only (`yes`, `on`, `y` are strings); `.inf`, `+.inf`, `-.inf`, `.nan` in those three cases;
/// - a text starting with `.` is a float if Go's `ParseFloat` reads it (`.5`);
/// - a text starting with a digit or sign: a timestamp (`parseTimestamp`), else, with every `_`
///   removed, an integer as Go's `ParseInt(s, 0, 64)` reads it (sign; `0x`, `0o`, `0b` and a
///   leading `0` for octal, so `010` is 8), else `ParseUint`, else a float of the form
///   `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?` (`1e3`, `1_000.5`, `09`);
/// - anything else is a string.
fn resolve_plain(text: &str) -> Scalar {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Scalar::Null,
        "true" | "True" | "TRUE" => return Scalar::Bool(true),
        "false" | "False" | "FALSE" => return Scalar::Bool(false),
        ".nan" | ".NaN" | ".NAN" => return Scalar::Float(f64::NAN),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Scalar::Float(f64::INFINITY)
        }
        "-.inf" | "-.Inf" | "-.INF" => return Scalar::Float(f64::NEG_INFINITY),
        _ => {}
    }
    let string = || Scalar::Str(text.to_string());
    match text.as_bytes()[0] {
        b'.' => match go_float(text) {
            Some(f) if is_float_text(&text[1..], true) => Scalar::Float(f),
            _ => string(),
        },
        b'0'..=b'9' | b'+' | b'-' => {
            if let Some(t) = timestamp(text) {
                return Scalar::Timestamp(t);
            }
            let plain = text.replace('_', "");
            if let Some(n) = go_int(&plain) {
                return Scalar::Int(n);
            }
            match go_float(&plain) {
                Some(f)
                    if is_float_text(plain.strip_prefix(['+', '-']).unwrap_or(&plain), false) =>
                {
                    Scalar::Float(f)
                }
                _ => string(),
            }
        }
        _ => string(),
    }
}

/// Go's `ParseInt(s, 0, 64)`, else `ParseUint(s, 0, 64)` (no sign).
fn go_int(s: &str) -> Option<Number> {
    let (negative, unsigned) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let (radix, digits) = match unsigned.as_bytes() {
        [b'0', p, _, ..] if p.eq_ignore_ascii_case(&b'x') => (16, &unsigned[2..]),
        [b'0', p, _, ..] if p.eq_ignore_ascii_case(&b'o') => (8, &unsigned[2..]),
        [b'0', p, _, ..] if p.eq_ignore_ascii_case(&b'b') => (2, &unsigned[2..]),
        [b'0', ..] => (8, &unsigned[1..]),
        [] => return None,
        _ => (10, unsigned),
    };
    if !digits.bytes().all(|c| (c as char).is_digit(radix)) {
        return None;
    }
    // "0" alone: octal with no digits after the prefix, which Go reads as 0.
    let magnitude = if digits.is_empty() {
        0
    } else {
        u64::from_str_radix(digits, radix).ok()?
    };
    if negative {
        let value = 0i64.checked_sub_unsigned(magnitude)?;
        Some(Number::from(value))
    } else if s.starts_with('+') {
        i64::try_from(magnitude).ok().map(Number::from)
    } else {
        Some(Number::from(magnitude))
    }
}

/// Go's `ParseFloat(s, 64)` for the decimal forms checked by [`is_float_text`]: out of range is
/// an error, not an infinity.
fn go_float(s: &str) -> Option<f64> {
    s.parse::<f64>().ok().filter(|f| f.is_finite())
}

/// `(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?` for a text without its sign; `after_dot`:
/// the text's leading `.` was already taken.
fn is_float_text(s: &str, after_dot: bool) -> bool {
    let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
    let mut rest = s;
    if after_dot {
        let n = digits(rest);
        if n == 0 {
            return false;
        }
        rest = &rest[n..];
    } else if let Some(fraction) = rest.strip_prefix('.') {
        let n = digits(fraction);
        if n == 0 {
            return false;
        }
        rest = &fraction[n..];
    } else {
        let n = digits(rest);
        if n == 0 {
            return false;
        }
        rest = &rest[n..];
        if let Some(fraction) = rest.strip_prefix('.') {
            rest = &fraction[digits(fraction)..];
        }
    }
    match rest.as_bytes().first() {
        None => true,
        Some(b'e' | b'E') => {
            let exponent = rest[1..].trim_start_matches(['+', '-']);
            let signs = rest.len() - 1 - exponent.len();
            signs <= 1 && !exponent.is_empty() && digits(exponent) == exponent.len()
        }
        Some(_) => false,
    }
}

/// yaml.v3's `parseTimestamp`: four digits and `-`, then Go's `time.Parse` with one of
/// `2006-1-2T15:4:5.999999999Z07:00` (or a lower-case `t`), `2006-1-2 15:4:5.999999999` (no
/// zone: UTC), `2006-1-2`; the value as yaml.v3 re-emits it (`time.RFC3339Nano`).
fn timestamp(s: &str) -> Option<String> {
    let b = s.as_bytes();
    if b.len() < 5 || !b[..4].iter().all(u8::is_ascii_digit) || b[4] != b'-' {
        return None;
    }
    let mut rest = &s[5..];
    let year: u32 = s[..4].parse().ok()?;
    let month = one_or_two_digits(&mut rest)?;
    rest = rest.strip_prefix('-')?;
    let day = one_or_two_digits(&mut rest)?;
    if !(1..=12).contains(&month) || day < 1 || day > days_in(month, year) {
        return None;
    }
    let date = format!("{year:04}-{month:02}-{day:02}");
    if rest.is_empty() {
        return Some(format!("{date}T00:00:00Z"));
    }
    let zoned = match rest.as_bytes()[0] {
        b'T' | b't' => {
            rest = &rest[1..];
            true
        }
        b' ' => {
            rest = rest.trim_start_matches(' ');
            false
        }
        _ => return None,
    };
    let hour = one_or_two_digits(&mut rest)?;
    rest = rest.strip_prefix(':')?;
    let minute = one_or_two_digits(&mut rest)?;
    rest = rest.strip_prefix(':')?;
    let second = one_or_two_digits(&mut rest)?;
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let mut nanos = String::new();
    if let [b'.' | b',', d, ..] = rest.as_bytes() {
        if d.is_ascii_digit() {
            let n = rest[1..].bytes().take_while(u8::is_ascii_digit).count();
            nanos = rest[1..1 + n.min(9)].trim_end_matches('0').to_string();
            rest = &rest[1 + n..];
        }
    }
    let fraction = if nanos.is_empty() {
        String::new()
    } else {
        format!(".{nanos}")
    };
    let zone = if !zoned {
        "Z".to_string()
    } else if let Some(r) = rest.strip_prefix('Z') {
        rest = r;
        "Z".to_string()
    } else {
        let z = rest.as_bytes();
        if z.len() < 6 || z[3] != b':' || !(z[0] == b'+' || z[0] == b'-') {
            return None;
        }
        let two = |t: &[u8]| {
            (t[0].is_ascii_digit() && t[1].is_ascii_digit())
                .then(|| u32::from(t[0] - b'0') * 10 + u32::from(t[1] - b'0'))
        };
        let (hours, minutes) = (two(&z[1..3])?, two(&z[4..6])?);
        if hours > 24 || minutes > 60 {
            return None;
        }
        rest = &rest[6..];
        let offset = hours * 60 + minutes;
        if offset == 0 {
            "Z".to_string()
        } else {
            format!("{}{:02}:{:02}", z[0] as char, offset / 60, offset % 60)
        }
    };
    if !rest.is_empty() {
        return None;
    }
    Some(format!(
        "{date}T{hour:02}:{minute:02}:{second:02}{fraction}{zone}"
    ))
}

/// Go's `getnum(s, false)`: one digit, or two.
fn one_or_two_digits(rest: &mut &str) -> Option<u32> {
    let n = rest.bytes().take(2).take_while(u8::is_ascii_digit).count();
    if n == 0 {
        return None;
    }
    let value = rest[..n].parse().ok()?;
    *rest = &rest[n..];
    Some(value)
}

fn days_in(month: u32, year: u32) -> u32 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
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

    /// Plain scalars as yaml.v3 v3.0.1's resolve.go resolves them.
    #[rstest]
    #[case::empty("", Scalar::Null)]
    #[case::tilde("~", Scalar::Null)]
    #[case::null_capitalised("Null", Scalar::Null)]
    #[case::true_upper("TRUE", Scalar::Bool(true))]
    #[case::false_capitalised("False", Scalar::Bool(false))]
    #[case::yes("yes", Scalar::Str("yes".into()))]
    #[case::on("on", Scalar::Str("on".into()))]
    #[case::y("y", Scalar::Str("y".into()))]
    #[case::decimal("30", Scalar::Int(30.into()))]
    #[case::plus("+5", Scalar::Int(5.into()))]
    #[case::minus("-5", Scalar::Int((-5).into()))]
    #[case::zero("0", Scalar::Int(0.into()))]
    #[case::octal_leading_zero("010", Scalar::Int(8.into()))]
    #[case::negative_octal("-010", Scalar::Int((-8).into()))]
    #[case::not_octal_is_a_float("09", Scalar::Float(9.0))]
    #[case::octal_0o("0o17", Scalar::Int(15.into()))]
    #[case::hex("0x1F", Scalar::Int(31.into()))]
    #[case::hex_upper_prefix("0X1f", Scalar::Int(31.into()))]
    #[case::binary("0b101", Scalar::Int(5.into()))]
    #[case::negative_binary("-0b101", Scalar::Int((-5).into()))]
    #[case::underscores("1_000", Scalar::Int(1000.into()))]
    #[case::hex_underscores("0x_1F", Scalar::Int(31.into()))]
    #[case::leading_underscore("_1", Scalar::Str("_1".into()))]
    #[case::prefix_alone("0x", Scalar::Str("0x".into()))]
    #[case::min_i64("-9223372036854775808", Scalar::Int(i64::MIN.into()))]
    #[case::past_i64_is_u64("18446744073709551615", Scalar::Int(u64::MAX.into()))]
    #[case::past_u64_is_a_float("18446744073709551616", Scalar::Float(18446744073709551616.0))]
    #[case::plus_past_i64_is_a_float("+9223372036854775808", Scalar::Float(9223372036854775808.0))]
    #[case::float("30.0", Scalar::Float(30.0))]
    #[case::trailing_point("5.", Scalar::Float(5.0))]
    #[case::exponent("1e3", Scalar::Float(1000.0))]
    #[case::signed_exponent("-1.5E-3", Scalar::Float(-0.0015))]
    #[case::point_first(".5", Scalar::Float(0.5))]
    #[case::signed_point_first("+.5", Scalar::Float(0.5))]
    #[case::float_underscores("1_000.5", Scalar::Float(1000.5))]
    #[case::point_underscores(".5_0", Scalar::Str(".5_0".into()))]
    #[case::overflowing_float("1e999", Scalar::Str("1e999".into()))]
    #[case::inf(".inf", Scalar::Float(f64::INFINITY))]
    #[case::minus_inf("-.Inf", Scalar::Float(f64::NEG_INFINITY))]
    #[case::go_words("inf", Scalar::Str("inf".into()))]
    #[case::double_sign("+-5", Scalar::Str("+-5".into()))]
    #[case::base_60("1:20", Scalar::Str("1:20".into()))]
    #[case::date("2001-12-14", Scalar::Timestamp("2001-12-14T00:00:00Z".into()))]
    #[case::short_date("2001-2-3", Scalar::Timestamp("2001-02-03T00:00:00Z".into()))]
    #[case::leap_day("2000-02-29", Scalar::Timestamp("2000-02-29T00:00:00Z".into()))]
    #[case::no_leap_day("1900-02-29", Scalar::Str("1900-02-29".into()))]
    #[case::bad_month("2001-13-01", Scalar::Str("2001-13-01".into()))]
    #[case::rfc3339("2001-12-14T21:59:43.10Z", Scalar::Timestamp("2001-12-14T21:59:43.1Z".into()))]
    #[case::offset("2001-12-14t21:59:43+05:30", Scalar::Timestamp("2001-12-14T21:59:43+05:30".into()))]
    #[case::zero_offset("2001-12-14T21:59:43-00:00", Scalar::Timestamp("2001-12-14T21:59:43Z".into()))]
    #[case::no_zone_after_t("2001-12-14T21:59:43", Scalar::Str("2001-12-14T21:59:43".into()))]
    #[case::space_no_zone("2001-12-14  1:2:3.123456789123", Scalar::Timestamp("2001-12-14T01:02:03.123456789Z".into()))]
    #[case::space_short_zone("2001-12-14 21:59:43.10 -5", Scalar::Str("2001-12-14 21:59:43.10 -5".into()))]
    #[case::words("just words", Scalar::Str("just words".into()))]
    fn plain_scalars_as_yaml_v3_resolves_them(#[case] text: &str, #[case] expected: Scalar) {
        assert_eq!(resolve_plain(text), expected);
    }

    /// No text makes the reading panic; odd ones are text or content, never an error.
    #[test]
    fn odd_yaml_never_panics() {
        let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        for text in [
            "-",
            "+",
            ".",
            "0b",
            "-0",
            "-0x",
            "0o",
            "9999-99-99",
            "2001-",
            "2001-1",
            "2001-1-1T",
            "2001-1-1T1:1:1.",
            "2001-1-1T1:1:1+",
            "2001-1-1T1:1:1+5:00",
            "2001-1-1T1:1:1+99:99",
            "\u{0}",
            "[\u{0}]",
            "{\"\\0\": 1}",
            "- é\n- 1é",
            "{? [a]: b}",
            "&a [*a]",
            deep.as_str(),
        ] {
            let _ = parsed_yaml(text);
            let _ = resolve_plain(text);
        }
        assert_eq!(parsed_yaml(&deep), None);
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
    // yaml.v3 decodes the top map's keys into Go strings: their text; a null key is dropped.
    #[case::top_keys_are_their_text(
        "1: a\ntrue: b\n~: c\n010: d",
        Some("{\"010\":\"d\",\"1\":\"a\",\"true\":\"b\"}")
    )]
    // Deeper keys keep their type: a number key is not the string of its digits.
    #[case::nested_keys_keep_their_type(
        "x: {1: a, '2': b, 010: c}",
        Some("{\"x\":{\"\\u00001\":\"a\",\"\\u00008\":\"c\",\"2\":\"b\"}}")
    )]
    #[case::infinity("x: .inf", Some("{\"x\":\"\\u0000float:.inf\"}"))]
    #[case::null_document("~", Some("{}"))]
    #[case::tagged("x: !!str 5", None)]
    #[case::merge_key("x: {<<: {a: 1}}", None)]
    #[case::duplicate_key("{a: 1, a: 2}", None)]
    #[case::duplicate_key_text("x: {1: a, '1': b}", None)]
    #[case::duplicate_null_key("~: a\nnull: b\n~: c", None)]
    #[case::escaped("x: \"q\\\"\\n\"", Some("{\"x\":\"q\\\"\\n\"}"))]
    #[case::a_scalar("plain text", None)]
    #[case::unreadable("a: [", None)]
    fn user_data_as_the_defaulter_reads_it(#[case] text: &str, #[case] json: Option<&str>) {
        assert_eq!(parsed_yaml(text), json.map(|j| format!("\u{0}yaml:{j}")));
    }
}
