//! Findings of the rules and the verdict they add up to, worded the way CAPI's webhooks word
//! their errors: `Kind.group "name" is invalid: [path: Forbidden: detail, ...]`.

use std::collections::BTreeMap;
#[cfg(feature = "wapc")]
use std::collections::HashMap;

#[cfg(feature = "wapc")]
use kubewarden_policy_sdk::response::ValidationResponse;

use crate::capi::kinds::GroupKind;
use crate::settings::Action;

/// Warnings longer than this are cut: the API server truncates long ones anyway.
pub const WARNING_LIMIT: usize = 120;
// The audit annotations' keys are bare names: kube-apiserver records a webhook's annotation as
// `<webhook name>/<key>` (`clusterwide-capi-bootstrap-rollout.kubewarden.admission/exemption`)
// and drops, with a warning in its own log, a key that has a `/` of its own (seen in the
// cluster test's `clusterctl move`: every `capi-bootstrap-rollout-policy/...` key was lost).

/// The audit annotation set when an exempt requester would have been rejected or warned
/// (rule 6, [`crate::rules::exemptions`]).
pub const EXEMPTION_ANNOTATION: &str = "exemption";

/// The audit annotation that keeps, whole, every warning [`WARNING_LIMIT`] cut (joined by
/// ` | `): the cause of a failed lookup is at the end of its warning, and a platform engineer
/// needs it (seen in the cluster test: a host capability not granted, cut after `'kub...`).
pub const FULL_WARNINGS_ANNOTATION: &str = "warnings";

/// The audit annotation set when a `controllerUsers` identity wrote what others may not: CAPI's
/// and the providers' controllers are never refused nor warned, but their in-place edits stay
/// visible in the audit log (rule 3, [`crate::rules::controller_writes`]).
pub const CONTROLLER_WRITE_ANNOTATION: &str = "controller-write";

/// One field-level problem: `spec.files[2].content: Forbidden: changed`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Violation {
    pub field: String,
    pub detail: String,
}

impl Violation {
    pub fn new(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Violation {
            field: field.into(),
            detail: detail.into(),
        }
    }
}

/// What one rule found about one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Finding {
    /// `Reject` or `Warn`; rules drop findings whose action is `Allow`.
    pub action: Action,
    pub violations: Vec<Violation>,
    /// Why it matters and what to do, appended after the field list of a rejection.
    pub explanation: String,
    /// The short form, used when the finding only warns (or for exempt requesters).
    pub warning: String,
    /// The name the remediation proposes for the rotated config or template, when it proposes one.
    pub suggested_name: Option<String>,
}

impl Finding {
    /// A finding that only warns: no field violations, nothing to explain in a rejection.
    pub fn warning(text: impl Into<String>) -> Self {
        Finding {
            action: Action::Warn,
            violations: Vec::new(),
            explanation: String::new(),
            warning: text.into(),
            suggested_name: None,
        }
    }

    /// A failed lookup never fails the request: the ownerReference rules decide, and a warning
    /// says so.
    pub fn lookup_failed(what: &str, error: &str) -> Self {
        Finding::warning(format!(
            "{what} lookup failed, judged by ownerReferences only: {error}"
        ))
    }
}

/// A violation as reported in a [`Verdict`]: the field, the detail and what the rule did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportedViolation {
    pub field: String,
    pub detail: String,
    pub action: Action,
}

/// The object a request is about, for messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Subject {
    pub group_kind: GroupKind,
    pub namespace: String,
    pub name: String,
}

impl Subject {
    /// `KubeadmConfig default/worker-a`, for warnings.
    pub fn short(&self) -> String {
        if self.namespace.is_empty() {
            format!("{} {}", self.group_kind.kind, self.name)
        } else {
            format!("{} {}/{}", self.group_kind.kind, self.namespace, self.name)
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    pub allowed: bool,
    pub message: Option<String>,
    pub code: Option<u16>,
    pub warnings: Vec<String>,
    pub audit_annotations: BTreeMap<String, String>,
    /// The violations of the rejecting and warning findings, as data (tools and the playground;
    /// not part of the AdmissionResponse).
    pub violations: Vec<ReportedViolation>,
    /// The rotation name the first finding that proposes one suggests (not part of the
    /// AdmissionResponse either).
    pub suggested_name: Option<String>,
}

/// Cuts a warning to [`WARNING_LIMIT`] characters.
pub(crate) fn short_warning(text: &str) -> String {
    if text.chars().count() <= WARNING_LIMIT {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(WARNING_LIMIT - 3).collect();
    cut.push_str("...");
    cut
}

impl Verdict {
    pub fn accept() -> Self {
        Verdict {
            allowed: true,
            ..Verdict::default()
        }
    }

    /// A request this policy cannot read: rejected with 400 and the reason.
    pub(crate) fn bad_request(reason: impl Into<String>) -> Self {
        Verdict {
            allowed: false,
            message: Some(reason.into()),
            code: Some(400),
            ..Verdict::default()
        }
    }

    /// Adds the findings up: every rejecting violation in one message, every warning listed.
    pub(crate) fn from_findings(subject: &Subject, findings: &[Finding]) -> Self {
        let rejecting: Vec<&Finding> = findings
            .iter()
            .filter(|f| f.action == Action::Reject)
            .collect();
        let warned: Vec<&str> = findings
            .iter()
            .filter(|f| f.action == Action::Warn)
            .map(|f| f.warning.as_str())
            .collect();
        let warnings = warned.iter().map(|w| short_warning(w)).collect();
        let cut: Vec<&str> = warned
            .iter()
            .copied()
            .filter(|w| w.chars().count() > WARNING_LIMIT)
            .collect();
        let audit_annotations: BTreeMap<String, String> = if cut.is_empty() {
            BTreeMap::new()
        } else {
            BTreeMap::from([(FULL_WARNINGS_ANNOTATION.to_string(), cut.join(" | "))])
        };
        let reported = findings
            .iter()
            .filter(|f| f.action != Action::Allow)
            .flat_map(|f| {
                f.violations.iter().map(|v| ReportedViolation {
                    field: v.field.clone(),
                    detail: v.detail.clone(),
                    action: f.action,
                })
            })
            .collect();
        let suggested_name = findings
            .iter()
            .filter(|f| f.action != Action::Allow)
            .find_map(|f| f.suggested_name.clone());
        if rejecting.is_empty() {
            return Verdict {
                allowed: true,
                warnings,
                audit_annotations,
                violations: reported,
                suggested_name,
                ..Verdict::default()
            };
        }
        let fields: Vec<String> = rejecting
            .iter()
            .flat_map(|f| &f.violations)
            .map(|v| format!("{}: {}", v.field, v.detail))
            .collect();
        let mut message = format!(
            "{} {:?} is invalid: [{}]",
            subject.group_kind.qualified(),
            subject.name,
            fields.join(", ")
        );
        let mut explained: Vec<&str> = Vec::new();
        for finding in &rejecting {
            if !explained.contains(&finding.explanation.as_str()) {
                explained.push(&finding.explanation);
                message.push_str(". ");
                message.push_str(&finding.explanation);
            }
        }
        Verdict {
            allowed: false,
            message: Some(message),
            code: Some(403),
            warnings,
            audit_annotations,
            violations: reported,
            suggested_name,
        }
    }

    /// Allowed, with `note` under `key` in the audit annotations, the warnings kept or dropped;
    /// the violations and the suggested name stay as data (rules 3 and 6).
    pub(crate) fn allowed_with_note(self, key: &str, note: String, keep_warnings: bool) -> Self {
        let mut audit_annotations = self.audit_annotations;
        audit_annotations.insert(key.to_string(), note);
        Verdict {
            allowed: true,
            message: None,
            code: None,
            warnings: if keep_warnings {
                self.warnings
            } else {
                Vec::new()
            },
            audit_annotations,
            violations: self.violations,
            suggested_name: self.suggested_name,
        }
    }

    /// The AdmissionResponse: `violations` and `suggested_name` are already in the message.
    #[cfg(feature = "wapc")]
    pub fn into_response(self) -> ValidationResponse {
        ValidationResponse {
            accepted: self.allowed,
            message: self.message,
            code: self.code,
            mutated_object: None,
            audit_annotations: (!self.audit_annotations.is_empty()).then(|| {
                self.audit_annotations
                    .into_iter()
                    .collect::<HashMap<_, _>>()
            }),
            warnings: (!self.warnings.is_empty()).then_some(self.warnings),
        }
    }
}

/// What kube-apiserver accepts after the webhook's name and a `/`: a qualified name's
/// name part (apimachinery's IsQualifiedName), at most 63 characters.
#[cfg(test)]
pub(crate) fn is_bare_annotation_key(key: &str) -> bool {
    let edge = |c: char| c.is_ascii_alphanumeric();
    key.len() <= 63
        && key.starts_with(edge)
        && key.ends_with(edge)
        && key.chars().all(|c| edge(c) || matches!(c, '-' | '_' | '.'))
}

#[cfg(test)]
mod tests {
    use super::is_bare_annotation_key;

    #[rstest::rstest]
    #[case::exemption(super::EXEMPTION_ANNOTATION)]
    #[case::warnings(super::FULL_WARNINGS_ANNOTATION)]
    #[case::controller_write(super::CONTROLLER_WRITE_ANNOTATION)]
    fn audit_annotation_keys_are_kept_by_the_api_server(#[case] key: &str) {
        assert!(is_bare_annotation_key(key), "{key:?}");
    }

    #[rstest::rstest]
    #[case::prefixed("capi-bootstrap-rollout-policy/exemption")]
    #[case::empty("")]
    #[case::trailing_dash("exemption-")]
    fn prefixed_or_malformed_keys_would_be_dropped(#[case] key: &str) {
        assert!(!is_bare_annotation_key(key), "{key:?}");
    }

    use super::*;
    use rstest::rstest;

    fn subject() -> Subject {
        Subject {
            group_kind: GroupKind::builtin("bootstrap.cluster.x-k8s.io", "KubeadmConfig"),
            namespace: "fleet".into(),
            name: "pool-1-a".into(),
        }
    }

    const RBAC_ERROR: &str = "ApiError: machinepools.cluster.x-k8s.io is forbidden: User \
        \"system:serviceaccount:kubewarden:policy-server\" cannot list resource \"machinepools\"";

    fn edit() -> Finding {
        Finding {
            action: Action::Reject,
            violations: vec![Violation::new(
                "spec.files[0].content",
                "Forbidden: changed",
            )],
            explanation: "The config is in use".into(),
            warning: "spec.files[0].content edited in place".into(),
            suggested_name: None,
        }
    }

    #[rstest]
    #[case::short_warning_no_annotation(vec![Finding::warning("KubeadmConfig fleet/pool-1-a: ok")], true, None)]
    #[case::cut_lookup_error_kept_whole(vec![Finding::lookup_failed("MachinePool", RBAC_ERROR)], true, Some(1))]
    #[case::kept_on_a_rejection_too(vec![Finding::lookup_failed("MachinePool", RBAC_ERROR), edit()], false, Some(1))]
    #[case::two_cut_warnings_joined(vec![Finding::lookup_failed("MachinePool", RBAC_ERROR), Finding::lookup_failed("KubeadmConfig", RBAC_ERROR)], true, Some(2))]
    fn a_cut_warning_is_kept_whole_in_the_audit_log(
        #[case] findings: Vec<Finding>,
        #[case] allowed: bool,
        #[case] cut: Option<usize>,
    ) {
        let verdict = Verdict::from_findings(&subject(), &findings);
        assert_eq!(verdict.allowed, allowed);
        assert!(verdict
            .warnings
            .iter()
            .all(|w| w.chars().count() <= WARNING_LIMIT));
        let annotation = verdict.audit_annotations.get(FULL_WARNINGS_ANNOTATION);
        match cut {
            None => assert_eq!(annotation, None),
            Some(n) => {
                let annotation = annotation.expect("the whole warnings are audited");
                assert_eq!(annotation.split(" | ").count(), n);
                assert!(annotation.ends_with("cannot list resource \"machinepools\""));
                assert!(verdict.warnings[0].ends_with("..."));
            }
        }
    }

    fn finding(action: Action, field: &str, explanation: &str, name: Option<&str>) -> Finding {
        Finding {
            action,
            violations: vec![Violation::new(field, "Forbidden: changed")],
            explanation: explanation.into(),
            warning: format!("{field} edited"),
            suggested_name: name.map(str::to_string),
        }
    }

    #[rstest]
    #[case::nothing(vec![], true, None, &[])]
    #[case::one_rejection(vec![finding(Action::Reject, "spec.a", "Why.", None)], false, Some("KubeadmConfig.bootstrap.cluster.x-k8s.io \"pool-1-a\" is invalid: [spec.a: Forbidden: changed]. Why."), &[])]
    #[case::every_field_once_every_explanation_once(vec![finding(Action::Reject, "spec.a", "Why.", None), finding(Action::Reject, "spec.b", "Why.", None), finding(Action::Reject, "metadata.x", "Other.", None)], false, Some("KubeadmConfig.bootstrap.cluster.x-k8s.io \"pool-1-a\" is invalid: [spec.a: Forbidden: changed, spec.b: Forbidden: changed, metadata.x: Forbidden: changed]. Why.. Other."), &[])]
    #[case::warnings_only(vec![finding(Action::Warn, "spec.a", "Why.", None), Finding::warning("lookup failed")], true, None, &["spec.a edited", "lookup failed"])]
    #[case::a_rejection_keeps_the_warnings(vec![finding(Action::Warn, "spec.a", "Why.", None), finding(Action::Reject, "spec.b", "Why.", None)], false, Some("KubeadmConfig.bootstrap.cluster.x-k8s.io \"pool-1-a\" is invalid: [spec.b: Forbidden: changed]. Why."), &["spec.a edited"])]
    #[case::allowed_findings_are_not_reported(vec![finding(Action::Allow, "spec.a", "Why.", Some("x"))], true, None, &[])]
    fn findings_add_up_to_one_message(
        #[case] findings: Vec<Finding>,
        #[case] allowed: bool,
        #[case] message: Option<&str>,
        #[case] warnings: &[&str],
    ) {
        let verdict = Verdict::from_findings(&subject(), &findings);
        assert_eq!(verdict.allowed, allowed);
        assert_eq!(verdict.message.as_deref(), message);
        assert_eq!(verdict.code, (!allowed).then_some(403));
        assert_eq!(verdict.warnings, warnings);
        let reported: Vec<(&str, Action)> = verdict
            .violations
            .iter()
            .map(|v| (v.field.as_str(), v.action))
            .collect();
        let expected: Vec<(&str, Action)> = findings
            .iter()
            .filter(|f| f.action != Action::Allow)
            .flat_map(|f| f.violations.iter().map(|v| (v.field.as_str(), f.action)))
            .collect();
        assert_eq!(reported, expected);
        if findings.iter().all(|f| f.action == Action::Allow) {
            assert_eq!(verdict, Verdict::accept());
        }
    }

    #[test]
    fn the_first_proposed_name_is_suggested() {
        let findings = [
            finding(Action::Allow, "spec.a", "Why.", Some("ignored-name")),
            finding(Action::Warn, "spec.b", "Why.", None),
            finding(Action::Reject, "spec.c", "Why.", Some("pool-1-5e6f7a8b")),
            finding(Action::Reject, "spec.d", "Why.", Some("pool-1-00000000")),
        ];
        let verdict = Verdict::from_findings(&subject(), &findings);
        assert_eq!(verdict.suggested_name.as_deref(), Some("pool-1-5e6f7a8b"));
    }

    #[rstest]
    #[case::namespaced("fleet", "KubeadmConfig fleet/pool-1-a")]
    #[case::cluster_scoped("", "KubeadmConfig pool-1-a")]
    fn a_subject_in_short(#[case] namespace: &str, #[case] short: &str) {
        let subject = Subject {
            namespace: namespace.into(),
            ..subject()
        };
        assert_eq!(subject.short(), short);
    }

    #[rstest]
    #[case::short("a".repeat(WARNING_LIMIT), "a".repeat(WARNING_LIMIT))]
    #[case::one_too_long("a".repeat(WARNING_LIMIT + 1), format!("{}...", "a".repeat(WARNING_LIMIT - 3)))]
    #[case::cut_by_characters_not_bytes("ü".repeat(WARNING_LIMIT + 5), format!("{}...", "ü".repeat(WARNING_LIMIT - 3)))]
    fn warnings_are_cut_at_the_limit(#[case] text: String, #[case] expected: String) {
        assert_eq!(short_warning(&text), expected);
    }

    #[test]
    fn an_unreadable_request_is_a_400() {
        let verdict = Verdict::bad_request("request.kind is missing");
        assert_eq!(
            (verdict.allowed, verdict.code, verdict.message.as_deref()),
            (false, Some(400), Some("request.kind is missing"))
        );
    }
}
