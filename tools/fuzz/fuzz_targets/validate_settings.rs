//! `validate_settings` on arbitrary bytes: always a verdict, never a panic.
#![no_main]

use capi_bootstrap_rollout_policy::validate_settings_payload;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = validate_settings_payload(data);
});
