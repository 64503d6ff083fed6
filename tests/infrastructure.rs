//! What the policy and its docs say about a pool's existing instances is held to the
//! infrastructure records (src/capi/infrastructure.rs):
//!
//! - docs/infrastructure.md's table is the records, rendered here. After a record changes,
//!   regenerate it with
//!   `UPDATE_INFRASTRUCTURE_DOCS=1 cargo test -p capi-bootstrap-rollout-policy --test infrastructure`;
//!   without the variable the test fails when the two differ.
//! - No text of the README, docs/ or src/ promises a roll-out on every infrastructure: CAPI
//!   takes a bootstrap change from a configRef rotation and does nothing about instances; only
//!   some infrastructure providers replace them (the records say which).
//! - Where a record's effect is inferred (`inferred_from`), the docs say so wherever they state
//!   it; the README's sentence on `capi-rollout-check roll` names where it deletes Machines and
//!   where it exits 1, from the records; a refusal the docs quote is one the records make.

use std::fs;
use std::path::{Path, PathBuf};

use capi_bootstrap_rollout_policy::capi::infrastructure::{
    refusal_sentence, Effect, Infrastructure, ReadsBootstrapData, Replacement, INFRASTRUCTURES,
    INFRASTRUCTURE_DOCS,
};
use capi_bootstrap_rollout_policy::capi::kinds::GroupKind;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

const DOCS: &str = "docs/infrastructure.md";
const BEGIN: &str = "<!-- The table below is generated from src/capi/infrastructure.rs: \
UPDATE_INFRASTRUCTURE_DOCS=1 cargo test -p capi-bootstrap-rollout-policy --test infrastructure -->";
const END: &str = "<!-- End of the generated table. -->";

fn r_group() -> &'static str {
    INFRASTRUCTURES[0].group
}

fn reads(record: &Infrastructure) -> String {
    match record.reads_bootstrap_data {
        ReadsBootstrapData::Always => "yes".to_string(),
        ReadsBootstrapData::Never => "never".to_string(),
        ReadsBootstrapData::When(field) => format!("only with `{field}`"),
    }
}

fn effect(record: &Infrastructure, effect: Effect) -> String {
    match (effect, record.reads_bootstrap_data) {
        (Effect::ReplacesExisting, ReadsBootstrapData::When(_)) => {
            "**every node replaced** (a new launch template version)".to_string()
        }
        (Effect::ReplacesExisting, _) => "**existing instances replaced**".to_string(),
        (Effect::NewInstancesOnly, _) => match record.inferred_from {
            Some(from) => format!(
                "new instances only; existing ones keep their data (inferred from {from}, not read in {}'s code)",
                record.provider
            ),
            None => "new instances only; existing ones keep their data".to_string(),
        },
        (Effect::NotRead, _) => "-".to_string(),
    }
}

fn knobs(record: &Infrastructure) -> String {
    if record.knobs.is_empty() {
        return "-".to_string();
    }
    record
        .knobs
        .iter()
        .map(|k| format!("`{}`: {}", k.path, k.effect))
        .collect::<Vec<_>>()
        .join("<br>")
}

fn replacement(record: &Infrastructure) -> String {
    match record.replacement {
        Replacement::ByProviderOnRotation {
            disabled_by: Some(field),
        } => format!("the provider, on a rotation (not with `{field}: true`)"),
        Replacement::ByProviderOnRotation { disabled_by: None } => {
            "the provider, on a rotation".to_string()
        }
        // Which step is whose: deleting the pool's Machines (CAPI drains first) is the way the
        // policy and `capi-rollout-check roll` give; the provider's docs delete its own
        // instance objects.
        Replacement::DeleteMachinePoolMachines { documented_by } => {
            match record.instance_kind {
                Some((instance_kind, _)) if documented_by.contains(" docs/") => format!(
                    "delete the pool's Machines (CAPI drains each node first); the provider's docs delete the `{instance_kind}` ({documented_by})"
                ),
                _ => format!("delete the pool's Machines ({documented_by})"),
            }
        }
        Replacement::Manual { instructions } => format!("by hand: {instructions}"),
        Replacement::NotApplicable => "-".to_string(),
    }
}

fn instances(record: &Infrastructure) -> String {
    match record.instance_kind {
        Some((kind, true)) => format!("`{kind}`"),
        Some((kind, false)) => format!("`{kind}` (behind a feature gate)"),
        None => "-".to_string(),
    }
}

fn sources(record: &Infrastructure) -> String {
    record
        .sources
        .iter()
        .map(|s| format!("{} {} `{}`: {}", s.repository, s.release, s.path, s.fact))
        .collect::<Vec<_>>()
        .join("<br>")
}

/// The generated part of docs/infrastructure.md: the table, then what the refusal says per kind.
fn rendered() -> String {
    let mut out = String::new();
    out.push_str(BEGIN);
    out.push_str("\n\n| Infrastructure (MachinePool kind) | Reads bootstrap data | configRef rotated (a new data Secret name) | Same Secret, new content (an in-place edit, once rendered) | Knobs | Documented replacement | MachinePool Machines | Sources |\n");
    out.push_str("|---|---|---|---|---|---|---|---|\n");
    for r in INFRASTRUCTURES {
        out.push_str(&format!(
            "| {} `{}` | {} | {} | {} | {} | {} | {} | {} |\n",
            r.provider,
            r.kind,
            reads(r),
            effect(r, r.on_rotation),
            effect(r, r.on_content_change),
            knobs(r),
            replacement(r),
            instances(r),
            sources(r)
        ));
    }
    // The sentence as the refusal words it, without the link to this page.
    let said = |config_kind: &str, kind: Option<&str>| {
        let kinds: Vec<GroupKind> = kind
            .map(|k| GroupKind::new(r_group(), k))
            .into_iter()
            .collect();
        let pools = kind.map(|_| kinds.as_slice());
        refusal_sentence(config_kind, pools).replace(&format!(" ({INFRASTRUCTURE_DOCS})"), "")
    };
    out.push_str("\nWhat the refusal of an in-place edit says of the pool's infrastructure: without lookups, or with `contextAware: true` for a kind without a record,\n\n");
    out.push_str(&format!("> {}\n\n", said("KubeadmConfig", None)));
    out.push_str("and with `contextAware: true`, for a pool whose `spec.template.spec.infrastructureRef` names the kind:\n\n");
    for r in INFRASTRUCTURES {
        out.push_str(&format!(
            "- `{}`: {}\n",
            r.kind,
            said("KubeadmConfig", Some(r.kind))
        ));
        let once = said("RKE2Config", Some(r.kind));
        if once != said("KubeadmConfig", Some(r.kind)) {
            out.push_str(&format!(
                "  For a bootstrap provider that renders its data once ({}): {once}\n",
                render_once()
            ));
        }
    }
    out.push('\n');
    out.push_str(END);
    out
}

#[test]
fn the_docs_table_is_the_records() {
    let path = root().join(DOCS);
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{DOCS}: {e}"));
    let start = text
        .find(BEGIN)
        .unwrap_or_else(|| panic!("{DOCS} has no line {BEGIN}"));
    let end = text
        .find(END)
        .map(|at| at + END.len())
        .unwrap_or_else(|| panic!("{DOCS} has no line {END}"));
    let now = &text[start..end];
    let want = rendered();
    if now == want {
        return;
    }
    if std::env::var_os("UPDATE_INFRASTRUCTURE_DOCS").is_some() {
        let updated = format!("{}{want}{}", &text[..start], &text[end..]);
        fs::write(&path, updated).unwrap();
        return;
    }
    panic!(
        "{DOCS}'s table differs from src/capi/infrastructure.rs; regenerate it with \
         UPDATE_INFRASTRUCTURE_DOCS=1 cargo test -p capi-bootstrap-rollout-policy --test infrastructure"
    );
}

/// Every kind of the records, and only those, has a row (a hand-written row would be lost at
/// the next regeneration).
#[test]
fn every_record_has_a_row_and_every_row_a_record() {
    let text = fs::read_to_string(root().join(DOCS)).unwrap();
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("| ") && l.contains("MachinePool`"))
        .collect();
    assert_eq!(rows.len(), INFRASTRUCTURES.len(), "{rows:#?}");
    for r in INFRASTRUCTURES {
        assert!(
            rows.iter()
                .any(|row| row.starts_with(&format!("| {} `{}` |", r.provider, r.kind))),
            "no row for {}",
            r.kind
        );
    }
}

/// The link every text gives points at this page.
#[test]
fn the_docs_link_is_this_page() {
    assert!(INFRASTRUCTURE_DOCS.ends_with(&format!("/blob/main/{DOCS}")));
    assert!(root().join(DOCS).is_file());
}

/// Phrases that promise existing instances a roll-out on every infrastructure. Each one was
/// in the policy's texts or docs while they said so; only CAPA's AWSMachinePool and EKS node
/// groups with a launch template replace instances after a rotation.
const PROMISES: &[&str] = &[
    "replaces the instances",
    "replace the instances",
    "out to existing instances",
    "rolls a bootstrap change out",
    "rolls the change out",
    "the rotation that rolls",
    "rotation that does roll",
    "rolled out by rotating",
    "the infrastructure provider replaces",
    "the provider replaces the",
    "cloud provider handles rolling",
];

fn files_under(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_under(&path, ext, out);
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
}

#[test]
fn no_text_promises_a_roll_out_the_infrastructure_may_not_make() {
    let mut files = vec![
        root().join("README.md"),
        root().join("metadata.yml"),
        root().join("questions-ui.yml"),
    ];
    files_under(&root().join("docs"), "md", &mut files);
    files_under(&root().join("src"), "rs", &mut files);
    files_under(&root().join("tools/playground/www"), "html", &mut files);
    // docs/rotate.md quotes `capi-rollout-check rotate`'s own output lines, held to the
    // command by capi-rollout-check's tests.
    files.retain(|f| !f.ends_with("docs/rotate.md"));
    let mut found = Vec::new();
    for file in &files {
        // Rust strings continue on the next line after a `\`: read them joined.
        let text = fs::read_to_string(file)
            .unwrap()
            .replace("\\\n", " ")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase();
        for promise in PROMISES {
            if text.contains(promise) {
                found.push(format!(
                    "{}: {promise:?}",
                    file.strip_prefix(root()).unwrap().display()
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "texts promising a roll-out that most infrastructures do not make (docs/infrastructure.md): {found:#?}"
    );
}

/// README.md, CHANGELOG.md and docs/*.md as (path, text), docs/rotate.md left out: it quotes
/// `capi-rollout-check rotate`'s own lines, held to the command by capi-rollout-check's tests.
fn markdown_documents() -> Vec<(String, String)> {
    let mut files = vec![root().join("README.md"), root().join("CHANGELOG.md")];
    files_under(&root().join("docs"), "md", &mut files);
    files.retain(|f| !f.ends_with("docs/rotate.md"));
    files.sort();
    files
        .into_iter()
        .map(|f| {
            let text = fs::read_to_string(&f).unwrap();
            (f.strip_prefix(root()).unwrap().display().to_string(), text)
        })
        .collect()
}

/// A document's paragraphs (blocks between blank lines), whitespace collapsed.
fn paragraphs(text: &str) -> Vec<String> {
    text.split("\n\n")
        .map(|p| p.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|p| !p.is_empty())
        .collect()
}

/// Where a record's effect on existing instances is inferred (CAPG: from Google's API
/// reference, not CAPG's code), every paragraph that says that provider's pools keep their
/// instances says what it is inferred from.
#[test]
fn an_inferred_effect_is_said_to_be_inferred_wherever_it_is_stated() {
    let keeps = [
        "keep",
        "replace no existing",
        "replaces no existing",
        "replace nothing",
    ];
    let mut found = Vec::new();
    for (file, text) in markdown_documents() {
        for paragraph in paragraphs(&text) {
            let lower = paragraph.to_lowercase();
            for record in INFRASTRUCTURES
                .iter()
                .filter(|r| r.on_rotation == Effect::NewInstancesOnly)
            {
                let Some(from) = record.inferred_from else {
                    continue;
                };
                let names = lower.contains(&record.provider.to_lowercase())
                    || lower.contains(&record.kind.to_lowercase());
                if names
                    && keeps.iter().any(|k| lower.contains(k))
                    && !lower.contains(&from.to_lowercase())
                {
                    found.push(format!("{file}: {}: {paragraph:.160}", record.kind));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "paragraphs stating what is inferred as read in the provider's code (say what it is inferred from): {found:#?}"
    );
}

/// The README's paragraph on `capi-rollout-check roll` says its budget, and its generated list
/// (`make generate`) names the kinds where it deletes Machines (the records whose replacement
/// is deleting MachinePool Machines) and the providers where it deletes nothing and exits 1 (a
/// replacement by hand, or CAPA's refresh turned off).
#[test]
fn the_readme_says_where_roll_deletes_and_where_it_exits_1() {
    let readme = fs::read_to_string(root().join("README.md")).unwrap();
    let paragraph = paragraphs(&readme)
        .into_iter()
        .find(|p| p.contains("`capi-rollout-check roll machinepool/"))
        .expect("README.md has a paragraph on capi-rollout-check roll");
    for budget in [
        "up to the pool's maxUnavailable (at least 1) at a time",
        "never below replicas minus maxUnavailable Ready",
        "exits 1",
    ] {
        assert!(
            paragraph.contains(budget),
            "{budget:?} not in {paragraph:?}"
        );
    }
    let line = |start: &str| {
        readme
            .lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("README.md has no line `{start}...`"))
            .to_string()
    };
    let deletes = line("- `roll` deletes Machines on ");
    let exits = line("- `roll` deletes nothing and exits 1 on ");
    for record in INFRASTRUCTURES {
        let named = format!("{}'s {}", record.provider, record.kind);
        match record.replacement {
            Replacement::DeleteMachinePoolMachines { .. } => {
                assert!(deletes.contains(&named), "{named} not in {deletes:?}")
            }
            Replacement::Manual { .. }
            | Replacement::ByProviderOnRotation {
                disabled_by: Some(_),
            } => assert!(exits.contains(&named), "{named} not in {exits:?}"),
            _ => {}
        }
    }
}

/// Every refusal sentence the docs quote in code (`On a rotation, ...`) is one the records make,
/// whole, without its link.
#[test]
fn the_refusals_the_docs_quote_are_the_records() {
    let mut said = Vec::new();
    for record in INFRASTRUCTURES {
        for config_kind in ["KubeadmConfig", "RKE2Config"] {
            let kinds = [GroupKind::new(r_group(), record.kind)];
            let sentence = refusal_sentence(config_kind, Some(&kinds[..]));
            said.push(
                sentence
                    .replace(&format!(" ({INFRASTRUCTURE_DOCS})."), "")
                    .to_string(),
            );
        }
    }
    let mut found = Vec::new();
    for (file, text) in markdown_documents() {
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        for quoted in text.split('`').skip(1).step_by(2) {
            if quoted.starts_with("On a rotation, ") && !said.iter().any(|s| s == quoted) {
                found.push(format!("{file}: {quoted}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "quoted refusals the records do not make: {found:#?}"
    );
}

/// The bootstrap providers that render their data Secret once, by clusterctl's names, from the
/// records.
fn render_once() -> String {
    capi_bootstrap_rollout_policy::capi::providers::PROVIDERS
        .iter()
        .filter(|p| p.rendering == capi_bootstrap_rollout_policy::capi::providers::Rendering::Once)
        .map(|p| p.clusterctl)
        .collect::<Vec<_>>()
        .join(", ")
}
