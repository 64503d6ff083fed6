//! Drift checks for the files that describe the policy to Kubewarden, Artifact Hub and users:
//! metadata.yml, policy.yaml, artifacthub-pkg.yml, artifacthub-repo.yml, questions-ui.yml, and
//! the metadata `make annotated-policy.wasm` embeds in the module. Every failure names the file
//! to fix. Cargo.toml is the source of the version, name, license and repository; the policy's
//! own settings code is the source of the defaults.

#[path = "../common/mod.rs"]
mod common;

mod artifacthub;
mod files;
mod module;
mod policy_yaml;
mod rules;
mod versions;
