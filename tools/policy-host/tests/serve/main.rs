//! `policy-host serve`, the binary of this package, started as policy-server is (the same
//! flags, a policies.yml, a TLS certificate made here) and asked over HTTPS what `policy-host
//! run` answers: every scenario of e2e-tests/scenarios, in protect mode, in monitor mode and
//! with a custom rejection message; the audit and raw routes; unknown policies and bodies that
//! are no AdmissionReview; guests that trap or loop; context-aware lookups answered by a fake
//! API server through a kubeconfig; settings and modules refused at start.
//!
//! Every server listens on 127.0.0.1 and is killed when its test ends.

mod common;
mod context_aware;
mod guests;
mod refusals;
mod routes;
mod scenarios;
