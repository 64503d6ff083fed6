//! The `validate` entry point on arbitrary bytes, and on arbitrary JSON placed where the
//! request and settings go: no input may panic (a panic is a 500 for the user's kubectl).
#![no_main]

use capi_bootstrap_rollout_policy::engine::validate_payload;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let verdict = validate_payload(data);
    // Deterministic: the same bytes, the same verdict.
    assert_eq!(verdict, validate_payload(data));
    // Arbitrary JSON as the request of a well-formed payload reaches the rules themselves.
    if let Ok(request) = serde_json::from_slice::<serde_json::Value>(data) {
        let payload = serde_json::json!({"request": request, "settings": {}});
        let _ = validate_payload(&serde_json::to_vec(&payload).unwrap());
    }
});
