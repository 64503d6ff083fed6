//! Who is asking: exemptions, CAPI's controllers and the garbage collector. Identities match
//! exactly; no prefixes, no case folding.

use serde_json::Value;

use crate::settings::Settings;

/// The identity kube-controller-manager's garbage collector uses when it drops ownerReferences.
pub const GARBAGE_COLLECTOR: &str = "system:serviceaccount:kube-system:generic-garbage-collector";

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Requester<'a> {
    pub username: &'a str,
    pub groups: Vec<&'a str>,
}

impl<'a> Requester<'a> {
    /// Reads `request.userInfo`; a missing or malformed one is an anonymous requester.
    pub fn from_user_info(user_info: Option<&'a Value>) -> Self {
        let username = user_info
            .and_then(|u| u.get("username"))
            .and_then(Value::as_str)
            .unwrap_or("");
        let groups = user_info
            .and_then(|u| u.get("groups"))
            .and_then(Value::as_array)
            .map(|groups| groups.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        Requester { username, groups }
    }

    /// Why this requester is exempt, if it is: `exemptUsers` or `exemptGroups` matched.
    pub fn exemption(&self, settings: &Settings) -> Option<String> {
        if settings.exempt_users.iter().any(|u| u == self.username) {
            return Some(format!("user {:?} is in exemptUsers", self.username));
        }
        settings
            .exempt_groups
            .iter()
            .find(|g| self.groups.contains(&g.as_ref()))
            .map(|g| format!("user {:?} is in exempt group {g:?}", self.username))
    }

    /// One of `controllerUsers` (CAPI's and the default providers' controllers by default).
    pub fn is_controller(&self, settings: &Settings) -> bool {
        settings.controller_users.iter().any(|u| u == self.username)
    }

    pub fn is_garbage_collector(&self) -> bool {
        self.username == GARBAGE_COLLECTOR
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::json;

    fn settings() -> Settings {
        Settings {
            exempt_users: vec!["alice".into()],
            exempt_groups: vec!["platform-admins".into()],
            ..Settings::default()
        }
    }

    #[rstest]
    #[case::exact_user(json!({"username": "alice"}), Some("user \"alice\" is in exemptUsers"))]
    #[case::user_prefix(json!({"username": "alice2"}), None)]
    #[case::user_case(json!({"username": "Alice"}), None)]
    #[case::user_space(json!({"username": "alice "}), None)]
    #[case::group(json!({"username": "bob", "groups": ["system:authenticated", "platform-admins"]}), Some("user \"bob\" is in exempt group \"platform-admins\""))]
    #[case::group_prefix(json!({"username": "bob", "groups": ["platform-admins-readonly"]}), None)]
    #[case::groups_not_a_list(json!({"username": "bob", "groups": "platform-admins"}), None)]
    #[case::no_user_info(json!(null), None)]
    fn exemptions_match_exactly(#[case] user_info: Value, #[case] expected: Option<&str>) {
        let requester = Requester::from_user_info(Some(&user_info));
        assert_eq!(requester.exemption(&settings()).as_deref(), expected);
    }

    #[rstest]
    #[case::capi_manager("system:serviceaccount:capi-system:capi-manager", true)]
    #[case::other_namespace("system:serviceaccount:other:capi-manager", false)]
    #[case::kubeadm_bootstrap(
        "system:serviceaccount:capi-kubeadm-bootstrap-system:capi-kubeadm-bootstrap-manager",
        true
    )]
    #[case::rke2_bootstrap(
        "system:serviceaccount:rke2-bootstrap-system:rke2-bootstrap-manager",
        true
    )]
    #[case::k3s_default_service_account(
        "system:serviceaccount:capi-k3s-bootstrap-system:default",
        true
    )]
    #[case::default_service_account_elsewhere("system:serviceaccount:capi-system:default", false)]
    #[case::prefix_only(
        "system:serviceaccount:capi-kubeadm-bootstrap-system:capi-kubeadm-bootstrap",
        false
    )]
    fn controller_identity(#[case] username: &str, #[case] expected: bool) {
        let requester = Requester {
            username,
            groups: vec![],
        };
        assert_eq!(requester.is_controller(&Settings::default()), expected);
    }
}
