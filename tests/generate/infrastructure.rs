//! docs/infrastructure.md's table: one row per infrastructure record
//! (src/capi/infrastructure.rs), what new bootstrap data does to a pool's existing instances.

use capi_bootstrap_rollout_policy::capi::infrastructure::{
    Infrastructure, ReadsBootstrapData, Replacement,
};

/// A table cell: no line breaks, no `|` left to end it.
fn cell(text: &str) -> String {
    text.replace('\n', " ").replace('|', "\\|")
}

fn reads(i: &Infrastructure) -> String {
    match i.reads_bootstrap_data {
        ReadsBootstrapData::Always => "yes".to_string(),
        ReadsBootstrapData::Never => "no".to_string(),
        ReadsBootstrapData::When(field) => format!("when `{field}` is set"),
    }
}

fn replacement(i: &Infrastructure) -> String {
    match i.replacement {
        Replacement::ByProviderOnRotation { disabled_by: None } => {
            "the provider replaces them on a rotation".to_string()
        }
        Replacement::ByProviderOnRotation {
            disabled_by: Some(field),
        } => format!("the provider replaces them on a rotation, unless `{field}` is true"),
        Replacement::DeleteMachinePoolMachines { documented_by } => {
            let machines = i
                .instance_kind
                .map_or(String::new(), |(kind, _)| format!(" (`{kind}`)"));
            format!("delete its MachinePool Machines{machines}: the pool scales back up with the new data ({documented_by})")
        }
        Replacement::Manual { instructions } => cell(instructions),
        Replacement::NotApplicable => "-".to_string(),
    }
}

fn knobs(i: &Infrastructure) -> String {
    if i.knobs.is_empty() {
        return "-".to_string();
    }
    i.knobs
        .iter()
        .map(|k| format!("`{}`: {}", k.path, cell(k.effect)))
        .collect::<Vec<_>>()
        .join("; ")
}

fn sources(i: &Infrastructure) -> String {
    i.sources
        .iter()
        .map(|s| format!("{} {} `{}`", s.repository, s.release, s.path))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The table, with a blank line before and after it.
pub fn table(records: &[Infrastructure]) -> Vec<String> {
    let mut lines = vec![
        String::new(),
        "| Provider | Kind | Reads bootstrap data | A `configRef` rotation (new data Secret) | An in-place edit (same Secret, new content) | Knobs | Fresh data on existing instances | Read in |".to_string(),
        "|---|---|---|---|---|---|---|---|".to_string(),
    ];
    lines.extend(records.iter().map(|i| {
        format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            i.provider,
            i.kind,
            reads(i),
            cell(&i.after_rotation()),
            cell(&i.after_content_change()),
            knobs(i),
            replacement(i),
            sources(i),
        )
    }));
    lines.push(String::new());
    lines
}
