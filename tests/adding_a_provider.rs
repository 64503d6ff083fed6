//! Adding a bootstrap provider in a group of its own and an infrastructure MachinePool kind
//! takes what ARCHITECTURE.md's "To add ..." lists say, and nothing else by hand. On a copy of
//! the checkout (`target/add-provider/checkout`, a git repository of its own) the test does
//! what a maintainer does:
//! - the two records, appended to `PROVIDERS` and `INFRASTRUCTURES`;
//! - the provider's CRDs, through `tests/crds/regenerate.py`, and a scenario of each, appended
//!   to the scenario modules, then `python3 e2e-tests/scenarios/generate.py`;
//! - `make generate`.
//!
//! Then git says what changed: only the records, the scenario modules and the files
//! `make generate` writes (each named by the lists), plus new files (the CRDs, the scenarios).
//! And `make check` passes on the copy, the new scenarios among those it runs, leaving the
//! tree as it was.
//!
//! It takes a minute or more (a build of its own in the copy's `target/`, kept between runs,
//! started from the checkout's), so `cargo test` skips it: `make add-provider-test` runs it,
//! and `make test` with it.

#[path = "common/architecture_lists.rs"]
mod architecture_lists;
#[allow(dead_code, unused_imports)]
mod generate;

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use architecture_lists::{architecture_section, named_paths};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

const RECORDS: [&str; 2] = ["src/capi/providers.rs", "src/capi/infrastructure.rs"];
const SCENARIO_MODULES: [&str; 2] = [
    "e2e-tests/scenarios/scenarios_providers.py",
    "e2e-tests/scenarios/scenarios_infrastructure.py",
];
/// Written by `make generate` beside [`generate::FILES`] (tests/infrastructure.rs).
const INFRASTRUCTURE_DOCS: &str = "docs/infrastructure.md";
const SCENARIOS: [&str; 2] = [
    "exampleownconfig-in-place-edit-rejected",
    "context-aware-edit-in-use-example-own",
];

const PROVIDER_RECORD: &str = r#"    Provider {
        clusterctl: "example-own",
        group: "bootstrap.own.example.com",
        config_kind: "ExampleOwnConfig",
        lookup_version: Some("v1beta1"),
        controller: "system:serviceaccount:example-own-system:example-own-manager",
        machine_only: &[],
        fill_once: &[],
        template_fill_once: &[],
        template_documented_edit: None,
        defaulter: Defaulter::None,
        rendering: Rendering::Once,
        spec_writes: "nothing",
    },
"#;

const INFRASTRUCTURE_RECORD: &str = r#"    Infrastructure {
        provider: "CAPEX",
        group: INFRASTRUCTURE_GROUP,
        kind: "ExampleOwnMachinePool",
        reads_bootstrap_data: ReadsBootstrapData::Always,
        on_rotation: Effect::NewInstancesOnly,
        on_content_change: Effect::NewInstancesOnly,
        knobs: &[],
        replacement: Replacement::DeleteMachinePoolMachines {
            documented_by: "example/cluster-api-provider-own docs/machinepools.md",
        },
        instance_kind: Some(("ExampleOwnMachine", true)),
        replaced_with: None,
        replacement_edges: None,
        inferred_from: None,
        sources: &[Source {
            repository: "example/cluster-api-provider-own",
            release: "v0.1.0",
            path: "controllers/machinepool_controller.go",
            fact: "an instance bootstraps once, from the data Secret it was launched with",
        }],
    },
"#;

const PROVIDER_SCENARIO: &str = r#"

# ExampleOwnConfig: a provider in a group of its own, known from its record alone.
example_own = {"apiVersion": "bootstrap.own.example.com/v1beta1", "kind": "ExampleOwnConfig",
               "metadata": meta(CONFIG, "9d0e1f2a-3b4c-4d5e-8f6a-7b8c9d0e1f2a", 2, None, pool_owner()),
               "spec": {"files": [{"path": "/etc/sysctl.d/90-spot.conf", "content": "vm.max_map_count = 262144"}]},
               "status": {"ready": True, "dataSecretName": CONFIG, "observedGeneration": 2}}
scenario("exampleownconfig-in-place-edit-rejected",
         "a provider in a group of its own, known from its record: an in-place edit of a config in use is refused",
         request("UPDATE", edited(example_own, lambda o: o["spec"]["files"][0].update(content="vm.max_map_count = 1")), example_own),
         {"allowed": False, "messageContains": ['ExampleOwnConfig.bootstrap.own.example.com "workers-spot-8d2f0a1c" is invalid: [spec.files[0].content: Forbidden: changed]']})
"#;

/// A line of `INFRA_REFUSALS`, put before its kind without a record.
const INFRASTRUCTURE_SCENARIO: &str = r#"    ("example-own", capi.INFRA_GROUP, "ExampleOwnMachinePool", "On a rotation, ExampleOwnMachinePool replaces no existing instance: new instances take the new data; delete the pool's Machines to replace them (CAPI drains each node first); CAPEX documents deleting their ExampleOwnMachines"),
"#;
const BEFORE_INFRASTRUCTURE_SCENARIO: &str = "    (\"unknown-kind\",";

/// The provider's CRDs, as its project would publish them.
const CRDS: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: exampleownconfigs.bootstrap.own.example.com
spec:
  group: bootstrap.own.example.com
  names: {kind: ExampleOwnConfig, listKind: ExampleOwnConfigList, plural: exampleownconfigs, singular: exampleownconfig}
  scope: Namespaced
  versions:
    - name: v1beta1
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema:
          type: object
          properties:
            apiVersion: {type: string}
            kind: {type: string}
            metadata: {type: object}
            spec:
              type: object
              properties:
                files:
                  type: array
                  items:
                    type: object
                    properties:
                      path: {type: string}
                      content: {type: string}
            status:
              type: object
              properties:
                ready: {type: boolean}
                dataSecretName: {type: string}
                observedGeneration: {type: integer}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: exampleownconfigtemplates.bootstrap.own.example.com
spec:
  group: bootstrap.own.example.com
  names: {kind: ExampleOwnConfigTemplate, listKind: ExampleOwnConfigTemplateList, plural: exampleownconfigtemplates, singular: exampleownconfigtemplate}
  scope: Namespaced
  versions:
    - name: v1beta1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            apiVersion: {type: string}
            kind: {type: string}
            metadata: {type: object}
            spec:
              type: object
              properties:
                template:
                  type: object
                  properties:
                    spec:
                      type: object
                      x-kubernetes-preserve-unknown-fields: true
"#;

/// Runs `program` in `dir` with the environment of a person's shell: cargo's variables for
/// this test, make's and a target directory elsewhere are not handed on. Returns its output,
/// stderr within stdout as a terminal shows them; fails with its end when the command does.
fn run(dir: &Path, program: &str, args: &[&str]) -> String {
    let mut command = Command::new("sh");
    command
        .args(["-c", "exec \"$0\" \"$@\" 2>&1", program])
        .args(args)
        .current_dir(dir);
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy().into_owned();
        let cargos = key.starts_with("CARGO_")
            && ![
                "CARGO_HOME",
                "CARGO_NET_",
                "CARGO_HTTP_",
                "CARGO_REGISTRIES_",
            ]
            .iter()
            .any(|keep| key.starts_with(keep));
        if cargos || ["MAKEFLAGS", "MFLAGS", "MAKELEVEL"].contains(&key.as_str()) {
            command.env_remove(&key);
        }
    }
    let started = Instant::now();
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    eprintln!(
        "{program} {}: {:.0} s",
        args.join(" "),
        started.elapsed().as_secs_f64()
    );
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() {
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(100)..].join("\n");
        panic!(
            "in {}: `{program} {}` failed ({}):\n{tail}",
            dir.display(),
            args.join(" "),
            output.status
        );
    }
    text
}

/// Every file under `dir`, relative, but `.git` and the top's `target`.
fn files_in(dir: &Path, prefix: &str, out: &mut BTreeSet<String>) {
    for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        let rel = format!("{prefix}{name}");
        if rel == ".git" || rel == "target" {
            continue;
        }
        if entry.file_type().unwrap().is_dir() {
            files_in(&entry.path(), &format!("{rel}/"), out);
        } else {
            out.insert(rel);
        }
    }
}

/// Makes `to` hold the checkout's files (tracked, and untracked but not ignored) and nothing
/// else, leaving a file that is already the same untouched, so that the copy's build only
/// redoes what changed since the last run.
fn sync(to: &Path) {
    let listed = run(
        root(),
        "git",
        &[
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ],
    );
    let files: BTreeSet<String> = listed
        .split('\0')
        .filter(|f| !f.is_empty() && root().join(f).is_file())
        .map(str::to_string)
        .collect();
    assert!(
        files.contains("Makefile"),
        "git lists no checkout at {}",
        root().display()
    );
    fs::create_dir_all(to).unwrap();
    let mut present = BTreeSet::new();
    files_in(to, "", &mut present);
    for stale in present.difference(&files) {
        fs::remove_file(to.join(stale)).unwrap();
    }
    for file in &files {
        let (from, dest) = (root().join(file), to.join(file));
        let content = fs::read(&from).unwrap();
        if fs::read(&dest).ok().as_ref() == Some(&content) {
            continue;
        }
        fs::create_dir_all(dest.parent().unwrap()).unwrap();
        fs::write(&dest, &content).unwrap();
        let metadata = fs::metadata(&from).unwrap();
        fs::set_permissions(&dest, metadata.permissions()).unwrap();
        let file = fs::File::options().write(true).open(&dest).unwrap();
        file.set_modified(metadata.modified().unwrap()).unwrap();
    }
}

/// A new copy's build starts from the checkout's: its `target/` profiles hard-linked, so what
/// the checkout built of the dependencies is fresh in the copy too. Sharing is safe because no
/// build writes into another's files: a compiled crate's file names carry a hash of its
/// configuration (the copy's own crates, at another path, hash to other names), and cargo
/// replaces a file it updates rather than writing into it. A copy that has a build keeps it.
fn seed_build(copy: &Path) {
    let target = copy.join("target");
    if target.exists() {
        return;
    }
    fs::create_dir_all(&target).unwrap();
    for profile in ["debug", "release", "wasm32-wasip1", "demo"] {
        let from = root().join("target").join(profile);
        if from.is_dir() {
            let to = target.join(profile);
            run(
                root(),
                "cp",
                &["-al", &from.to_string_lossy(), &to.to_string_lossy()],
            );
        }
    }
}

/// `text` with `insert` put before the first `before` after `after`.
fn inserted(text: &str, after: &str, before: &str, insert: &str) -> String {
    let start = text.find(after).unwrap_or_else(|| panic!("no `{after}`"));
    let at = start
        + text[start..]
            .find(before)
            .unwrap_or_else(|| panic!("no `{before}` after `{after}`"));
    format!("{}{insert}{}", &text[..at], &text[at..])
}

fn edit(copy: &Path, file: &str, change: impl FnOnce(String) -> String) {
    let path = copy.join(file);
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
    fs::write(&path, change(text)).unwrap();
}

/// What git says changed in `copy` since its last commit: `(modified, new)`; a deleted file
/// fails the test.
fn changes(copy: &Path) -> (BTreeSet<String>, BTreeSet<String>) {
    let status = run(
        copy,
        "git",
        &["status", "--porcelain", "--untracked-files=all"],
    );
    let (mut modified, mut new) = (BTreeSet::new(), BTreeSet::new());
    for line in status.lines() {
        let (code, path) = line.split_at(3);
        match code.trim() {
            "M" => modified.insert(path.to_string()),
            "??" => new.insert(path.to_string()),
            _ => panic!("{line}: only modified and new files are expected"),
        };
    }
    (modified, new)
}

#[test]
#[ignore = "copies the checkout and runs make check on the copy: make add-provider-test"]
fn a_provider_in_its_own_group_and_an_infrastructure_kind_take_only_their_records() {
    let base = root().join("target/add-provider");
    let copy = base.join("checkout");
    sync(&copy);
    seed_build(&copy);
    if !copy.join(".git").is_dir() {
        run(&copy, "git", &["init", "-q"]);
    }
    run(&copy, "git", &["add", "-A"]);
    let identity = [
        "-c",
        "user.name=add-provider",
        "-c",
        "user.email=add-provider@example.com",
    ];
    run(
        &copy,
        "git",
        &[
            &identity[..],
            &["commit", "-q", "--allow-empty", "-m", "the checkout"],
        ]
        .concat(),
    );

    // What the maintainer writes: the records, the CRDs (through the script), the scenarios.
    edit(&copy, RECORDS[0], |t| {
        inserted(
            &t,
            "pub const PROVIDERS: &[Provider] = &[",
            "\n];",
            &format!("\n{}", PROVIDER_RECORD.trim_end()),
        )
    });
    edit(&copy, RECORDS[1], |t| {
        inserted(
            &t,
            "pub const INFRASTRUCTURES: &[Infrastructure] = &[",
            "\n];",
            &format!("\n{}", INFRASTRUCTURE_RECORD.trim_end()),
        )
    });
    let crds = base.join("example-own-crds.yaml");
    fs::write(&crds, CRDS).unwrap();
    run(
        &copy,
        "python3",
        &["tests/crds/regenerate.py", crds.to_str().unwrap()],
    );
    edit(&copy, SCENARIO_MODULES[0], |t| {
        format!("{t}{PROVIDER_SCENARIO}")
    });
    edit(&copy, SCENARIO_MODULES[1], |t| {
        inserted(
            &t,
            "INFRA_REFUSALS = [",
            BEFORE_INFRASTRUCTURE_SCENARIO,
            INFRASTRUCTURE_SCENARIO,
        )
    });
    run(&copy, "python3", &["e2e-tests/scenarios/generate.py"]);
    run(&copy, "make", &["generate"]);

    // Only the records, the scenario modules and the generated files changed, each of them
    // named by ARCHITECTURE.md's lists; every generated file changed; the rest is new.
    let (modified, new) = changes(&copy);
    eprintln!("changed: {modified:?}\nnew: {} files", new.len());
    let generated: BTreeSet<String> = generate::FILES
        .iter()
        .copied()
        .chain([INFRASTRUCTURE_DOCS])
        .map(str::to_string)
        .collect();
    let expected: BTreeSet<String> = RECORDS
        .iter()
        .chain(&SCENARIO_MODULES)
        .map(|f| f.to_string())
        .chain(generated.iter().cloned())
        .collect();
    let unexpected: Vec<&String> = modified.difference(&expected).collect();
    assert!(
        unexpected.is_empty(),
        "adding a provider and an infrastructure kind changed files that are neither a record, \
         a scenario module nor generated: {unexpected:?}"
    );
    let unwritten: Vec<&String> = generated.difference(&modified).collect();
    assert!(
        unwritten.is_empty(),
        "make generate wrote nothing for the new records into {unwritten:?}"
    );
    let mut listed = named_paths(&architecture_section("To add a bootstrap provider"));
    listed.extend(named_paths(&architecture_section(
        "To add an infrastructure provider",
    )));
    let unnamed: Vec<&String> = modified
        .iter()
        .filter(|f| !listed.contains_key(*f))
        .collect();
    assert!(
        unnamed.is_empty(),
        "changed, and named by neither of ARCHITECTURE.md's lists: {unnamed:?}"
    );
    let expected_new = |f: &String| {
        f.starts_with("tests/crds/providers/ExampleOwnConfig")
            || SCENARIOS
                .iter()
                .any(|s| f.starts_with(&format!("e2e-tests/scenarios/{s}/")))
    };
    let stray: Vec<&String> = new.iter().filter(|f| !expected_new(f)).collect();
    assert!(
        stray.is_empty(),
        "new files beyond the CRDs and scenarios: {stray:?}"
    );
    for crd in [
        "ExampleOwnConfig.v1beta1.json",
        "ExampleOwnConfigTemplate.v1beta1.json",
    ] {
        assert!(
            new.contains(&format!("tests/crds/providers/{crd}")),
            "{crd} not written"
        );
    }
    for scenario in SCENARIOS {
        assert!(
            new.contains(&format!("e2e-tests/scenarios/{scenario}/request.json")),
            "{scenario} not written"
        );
    }

    // `make check` on it: fmt, clippy, every scenario (the new ones among them), the tests.
    run(&copy, "git", &["add", "-A"]);
    run(
        &copy,
        "git",
        &[
            &identity[..],
            &[
                "commit",
                "-q",
                "-m",
                "a provider and an infrastructure kind",
            ],
        ]
        .concat(),
    );
    let output = run(&copy, "make", &["check"]);
    for scenario in SCENARIOS {
        assert!(
            output.contains(scenario),
            "make check's scenarios do not show {scenario}"
        );
    }
    let (modified, new) = changes(&copy);
    assert!(
        modified.is_empty() && new.is_empty(),
        "make check changed the tree: {modified:?} {new:?}"
    );
}
