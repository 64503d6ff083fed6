//! Rule 6, exemptions: requests from `exemptUsers` or a member of `exemptGroups` are allowed,
//! and the audit annotation [`EXEMPTION_ANNOTATION`] records what would have happened.
//! Identities match exactly; no prefixes, no case folding. `dryRun` requests get the real
//! verdict: nothing here reads it. The engine applies it to every verdict ([`exempt`]).

use crate::reader::request::Requester;
use crate::settings::Settings;
use crate::verdict::{Verdict, EXEMPTION_ANNOTATION};

/// Why this requester is exempt, if it is: `exemptUsers` or `exemptGroups` matched.
pub fn exemption(settings: &Settings, requester: &Requester) -> Option<String> {
    if settings
        .exempt_users
        .iter()
        .any(|u| u == requester.username)
    {
        return Some(format!("user {:?} is in exemptUsers", requester.username));
    }
    settings
        .exempt_groups
        .iter()
        .find(|g| requester.groups.contains(&g.as_ref()))
        .map(|g| format!("user {:?} is in exempt group {g:?}", requester.username))
}

/// An exempt requester is allowed; what would have happened goes into the audit log, the
/// warnings are kept.
pub fn exempt(verdict: Verdict, reason: &str) -> Verdict {
    if verdict.allowed && verdict.warnings.is_empty() {
        return verdict;
    }
    let outcome = match &verdict.message {
        Some(message) if !verdict.allowed => format!("would have rejected: {message}"),
        _ => format!("would have warned: {}", verdict.warnings.join(" | ")),
    };
    verdict.allowed_with_note(
        EXEMPTION_ANNOTATION,
        format!("allowed because {reason}; {outcome}"),
        true,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capi::kinds::GroupKind;
    use crate::settings::Action;
    use crate::verdict::{Finding, Subject, Violation};
    use rstest::rstest;

    fn settings() -> Settings {
        Settings {
            exempt_users: vec!["alice".into()],
            exempt_groups: vec!["platform-admins".into()],
            ..Settings::default()
        }
    }

    #[rstest]
    #[case::exact_user("alice", &[], Some("user \"alice\" is in exemptUsers"))]
    #[case::user_prefix("alice2", &[], None)]
    #[case::user_case("Alice", &[], None)]
    #[case::user_space("alice ", &[], None)]
    #[case::group("bob", &["system:authenticated", "platform-admins"], Some("user \"bob\" is in exempt group \"platform-admins\""))]
    #[case::group_prefix("bob", &["platform-admins-readonly"], None)]
    #[case::user_before_group("alice", &["platform-admins"], Some("user \"alice\" is in exemptUsers"))]
    #[case::anonymous("", &[], None)]
    fn exemptions_match_exactly(
        #[case] username: &str,
        #[case] groups: &[&str],
        #[case] expected: Option<&str>,
    ) {
        let requester = Requester {
            username,
            groups: groups.to_vec(),
        };
        assert_eq!(exemption(&settings(), &requester).as_deref(), expected);
    }

    fn verdict(action: Action) -> Verdict {
        let subject = Subject {
            group_kind: GroupKind::builtin("bootstrap.cluster.x-k8s.io", "KubeadmConfig"),
            namespace: "fleet".into(),
            name: "pool-1-a".into(),
        };
        Verdict::from_findings(
            &subject,
            &[Finding {
                action,
                violations: vec![Violation::new(
                    "spec.files[0].content",
                    "Forbidden: changed",
                )],
                explanation: "The config is in use".into(),
                warning: "spec.files[0].content edited in place".into(),
                suggested_name: None,
            }],
        )
    }

    #[rstest]
    #[case::rejected(Action::Reject, "would have rejected: KubeadmConfig.bootstrap.cluster.x-k8s.io \"pool-1-a\" is invalid: [spec.files[0].content: Forbidden: changed]. The config is in use", 0)]
    #[case::warned(
        Action::Warn,
        "would have warned: spec.files[0].content edited in place",
        1
    )]
    fn an_exempt_requester_is_allowed_and_audited(
        #[case] action: Action,
        #[case] outcome: &str,
        #[case] warnings: usize,
    ) {
        let verdict = exempt(verdict(action), "user \"alice\" is in exemptUsers");
        assert!(verdict.allowed);
        assert_eq!((verdict.message, verdict.code), (None, None));
        assert_eq!(verdict.warnings.len(), warnings);
        assert_eq!(
            verdict.audit_annotations[EXEMPTION_ANNOTATION],
            format!("allowed because user \"alice\" is in exemptUsers; {outcome}")
        );
    }

    #[test]
    fn nothing_found_leaves_no_trace() {
        assert_eq!(exempt(Verdict::accept(), "any"), Verdict::accept());
    }
}
