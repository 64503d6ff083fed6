//! waPC glue: the Kubewarden entry points and nothing else. The rules live in the pure
//! modules below and are evaluated by [`engine::validate_payload_with`]; lookups, when the
//! context-aware mode is on, go through [`host_lookups`]. Without the `wapc` feature (the
//! browser playground) only the rules are built.
//!
//! Top-down: [`engine`] routes a request to its kind's file in `webhooks/` (bootstrap config,
//! bootstrap template, configRef holder), which asks the rule families in `rules/` (one file
//! per rule of docs/rules.md); below them the shared pieces: `reader/` (the payload's JSON
//! read into borrowed views), [`capi`] (CAPI's kinds, refs, owners, provider writes, paths),
//! [`diff`], `canonical_form`, [`fingerprint`], [`settings`], [`verdict`], [`lookups`].
//! Public: what the tools and tests of this repository use.

mod canonical_form;
pub mod capi;
pub mod diff;
pub mod engine;
pub mod fingerprint;
mod go_compat;
#[cfg(feature = "wapc")]
pub mod host_lookups;
pub mod lookups;
mod reader;
mod rules;
pub mod settings;
pub mod verdict;
mod webhooks;

#[cfg(feature = "wapc")]
use kubewarden_policy_sdk::settings::SettingsValidationResponse;
#[cfg(feature = "wapc")]
use kubewarden_policy_sdk::wapc_guest::{self as guest, CallResult};

/// Registers the three functions every Kubewarden policy exports.
#[cfg(feature = "wapc")]
#[no_mangle]
pub extern "C" fn wapc_init() {
    // The module is built with panic = "abort": a panic traps. Send its message to the host
    // first, so the host's 500 names the failure instead of a bare `unreachable` trap.
    std::panic::set_hook(Box::new(|info| {
        guest::console_log(&format!("capi-bootstrap-rollout-policy panicked: {info}"))
    }));
    guest::register_function("validate", validate);
    guest::register_function("validate_settings", validate_settings);
    guest::register_function(
        "protocol_version",
        kubewarden_policy_sdk::protocol_version_guest,
    );
    // Test builds only: proves a panic reaches the host as a named error (e2e-tests/tests).
    #[cfg(feature = "panic-probe")]
    guest::register_function("panic_probe", |_| panic!("panic probe reached"));
}

#[cfg(feature = "wapc")]
fn validate(payload: &[u8]) -> CallResult {
    let lookups = host_lookups::HostLookups(host_lookups::wapc_host_call);
    let verdict = engine::validate_payload_with(payload, &lookups);
    Ok(serde_json::to_vec(&verdict.into_response())?)
}

#[cfg(feature = "wapc")]
fn validate_settings(payload: &[u8]) -> CallResult {
    Ok(serde_json::to_vec(&validate_settings_payload(payload))?)
}

/// The `validate_settings` answer: never an error, always a verdict naming the problem.
#[cfg(feature = "wapc")]
pub fn validate_settings_payload(payload: &[u8]) -> SettingsValidationResponse {
    match settings::parse::settings_from_payload(payload) {
        Ok(_) => SettingsValidationResponse {
            valid: true,
            message: None,
        },
        Err(message) => SettingsValidationResponse {
            valid: false,
            message: Some(message),
        },
    }
}

#[cfg(all(test, feature = "wapc"))]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::valid(br#"{"inPlaceEdits": "warn"}"#.as_slice(), true, None)]
    #[case::invalid(br#"{"inPlaceEdits": "nope"}"#.as_slice(), false, Some("inPlaceEdits: unknown value \"nope\""))]
    #[case::not_json(b"{".as_slice(), false, Some("settings are not valid JSON"))]
    fn validate_settings_entry_point(
        #[case] payload: &[u8],
        #[case] valid: bool,
        #[case] fragment: Option<&str>,
    ) {
        let response = validate_settings_payload(payload);
        assert_eq!(response.valid, valid);
        match fragment {
            Some(f) => assert!(response.message.unwrap().contains(f)),
            None => assert!(response.message.is_none()),
        }
    }
}
