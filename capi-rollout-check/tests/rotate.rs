//! `capi-rollout-check rotate --manifests`: the rotation as a pull request's change to the
//! manifests of tests/fixtures/base, which `capi-rollout-check` itself then passes.

use std::fs;
use std::path::{Path, PathBuf};

mod common;
use common::Run;

const CONFIG: &str = "workers-spot-8d2f0a1c";

fn run(args: &[&str]) -> Run {
    common::run(args, None)
}

/// A copy of tests/fixtures/base in a folder of its own under the test's target directory.
fn repository(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = fs::remove_dir_all(&dir);
    copy(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/base"),
        &dir,
    );
    dir
}

fn copy(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// The repository's config with max-pods 110 -> 220, as a file outside the repository.
fn edited(dir: &Path) -> PathBuf {
    let text = fs::read_to_string(dir.join("team-payments/workers-spot.yaml")).unwrap();
    let config = text
        .split("\n---\n")
        .next()
        .unwrap()
        .replace("value: \"110\"", "value: \"220\"");
    assert!(config.contains("\"220\""));
    let file = dir.with_extension("edited.yaml");
    fs::write(&file, config).unwrap();
    file
}

/// The name the policy's refusal of the same edit in place suggests.
fn suggested(dir: &Path, edited: &Path) -> String {
    let head = dir.with_extension("in-place");
    let _ = fs::remove_dir_all(&head);
    copy(dir, &head);
    let text = fs::read_to_string(head.join("team-payments/workers-spot.yaml")).unwrap();
    fs::write(
        head.join("team-payments/workers-spot.yaml"),
        text.replacen(
            text.split("\n---\n").next().unwrap(),
            &fs::read_to_string(edited).unwrap(),
            1,
        ),
    )
    .unwrap();
    let r = run(&[
        "--base",
        dir.to_str().unwrap(),
        "--head",
        head.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 1, "the in-place edit is refused:\n{}", r.stdout);
    let marker = "create a new KubeadmConfig \"";
    let at = r.stdout.find(marker).expect("a suggestion") + marker.len();
    let name = r.stdout[at..].split('"').next().unwrap().to_string();
    assert!(
        name.starts_with("workers-spot-") && name != CONFIG,
        "{name}"
    );
    name
}

#[test]
fn the_rotation_as_a_pull_request() {
    let dir = repository("rotate-write");
    let edited = edited(&dir);
    let name = suggested(&dir, &edited);
    let pool_before = fs::read_to_string(dir.join("team-payments/workers-spot.yaml")).unwrap();

    let r = run(&[
        "rotate",
        "--manifests",
        dir.to_str().unwrap(),
        "-f",
        edited.to_str().unwrap(),
        "--write",
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let new_file = dir.join(format!("team-payments/{name}.yaml"));
    assert!(
        r.stdout.contains(&format!(
            "wrote {} (new): KubeadmConfig {name}",
            new_file.display()
        )),
        "{}",
        r.stdout
    );

    assert_rotation_written(&dir, &new_file, &name, &pool_before);
    assert_check_passes(&dir, &name);

    // Run again: the same rotation is already there, nothing more to write.
    let again = run(&[
        "rotate",
        "--manifests",
        dir.to_str().unwrap(),
        "-f",
        edited.to_str().unwrap(),
        "--write",
    ]);
    assert_eq!(again.code, 2, "{}", again.stdout);
    assert!(
        again.stderr.contains(&format!(
            "nothing in {} uses KubeadmConfig team-payments/{CONFIG}",
            dir.display()
        )),
        "{}",
        again.stderr
    );
}

/// What `rotate --write` wrote in `dir`: the config `name` (`new_file`), the pool's configRef
/// (the pool's file was `pool_before`) and the kustomization's list.
fn assert_rotation_written(dir: &Path, new_file: &Path, name: &str, pool_before: &str) {
    // The new config: the edited spec, the repository's labels, under the suggested name.
    let config = fs::read_to_string(new_file).unwrap();
    assert!(config.contains(&format!("name: {name}\n")), "{config}");
    assert!(
        config.contains("value: '220'") || config.contains("value: \"220\""),
        "{config}"
    );
    assert!(
        config.contains("cluster.x-k8s.io/cluster-name: prod-eu-1"),
        "{config}"
    );
    // The pool's file: its configRef.name line and nothing else.
    let pool_after = fs::read_to_string(dir.join("team-payments/workers-spot.yaml")).unwrap();
    let changed: Vec<(&str, &str)> = pool_before
        .lines()
        .zip(pool_after.lines())
        .filter(|(a, b)| a != b)
        .collect();
    assert_eq!(
        changed,
        vec![(
            format!("          name: {CONFIG}").as_str(),
            format!("          name: {name}").as_str()
        )]
    );
    // The kustomization lists the new file.
    let kustomization = fs::read_to_string(dir.join("kustomization.yaml")).unwrap();
    assert!(
        kustomization.contains(&format!(
            "  - team-payments/workers-spot.yaml\n  - team-payments/{name}.yaml\n"
        )),
        "{kustomization}"
    );
}

/// `capi-rollout-check` passes the rotation to `name` written in `dir`.
fn assert_check_passes(dir: &Path, name: &str) {
    let check = run(&[
        "--base",
        "tests/fixtures/base",
        "--head",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(check.code, 0, "{}", check.stdout);
    assert!(
        check.stdout.contains(&format!(
            "allowed   CREATE KubeadmConfig team-payments/{name}"
        )),
        "{}",
        check.stdout
    );
    assert!(
        check
            .stdout
            .contains("allowed   UPDATE MachinePool team-payments/workers-spot"),
        "{}",
        check.stdout
    );
}

#[test]
fn printed_without_write() {
    let dir = repository("rotate-print");
    let edited = edited(&dir);
    let r = run(&[
        "rotate",
        "--manifests",
        dir.to_str().unwrap(),
        "-f",
        edited.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains(" (new): KubeadmConfig workers-spot-"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("team-payments/workers-spot.yaml (changed): MachinePool team-payments/workers-spot: configRef.name"), "{}", r.stdout);
    assert!(r.stdout.contains("the policy's answer to the edit made in place: KubeadmConfig.bootstrap.cluster.x-k8s.io"), "{}", r.stdout);
    // Nothing written.
    assert_eq!(fs::read_dir(dir.join("team-payments")).unwrap().count(), 2);
}

#[test]
fn bad_input() {
    let dir = repository("rotate-bad");
    let edited = edited(&dir);
    let manifests = dir.to_str().unwrap();
    let unchanged = dir.with_extension("unchanged.yaml");
    let text = fs::read_to_string(dir.join("team-payments/workers-spot.yaml")).unwrap();
    fs::write(&unchanged, text.split("\n---\n").next().unwrap()).unwrap();
    let other = dir.with_extension("other.yaml");
    fs::write(
        &other,
        fs::read_to_string(&edited)
            .unwrap()
            .replace(CONFIG, "workers-none"),
    )
    .unwrap();
    for (args, code, message) in [
        (vec!["-f", unchanged.to_str().unwrap()], 1, format!("nothing to rotate: the edited spec of KubeadmConfig team-payments/{CONFIG} is the one it has")),
        (vec!["-f", other.to_str().unwrap()], 2, format!("{manifests} holds no KubeadmConfig team-payments/workers-none")),
        (vec!["-f", "tests/fixtures/bad/unparsable.yaml"], 2, "tests/fixtures/bad/unparsable.yaml:37 (document 2): not valid YAML".to_string()),
    ] {
        let mut all = vec!["rotate", "--manifests", manifests, "--write"];
        all.extend(args);
        let r = run(&all);
        assert_eq!(r.code, code, "{all:?}: {}{}", r.stdout, r.stderr);
        assert!(r.stderr.contains(&message), "{all:?}: {}", r.stderr);
        assert_eq!(fs::read_dir(dir.join("team-payments")).unwrap().count(), 2, "{all:?} wrote a file");
    }
}

/// `--reissue` takes the spec from the cluster: with -f, --edit or --manifests it is a usage
/// error (exit 2) that names the clash, and nothing is run.
#[test]
fn reissue_takes_no_manifest() {
    for (args, clash) in [
        (
            vec![
                "machinepool/pool-1",
                "-n",
                "fleet",
                "--reissue",
                "-f",
                "x.yaml",
            ],
            "the argument '--reissue' cannot be used with '--filename <FILE>'",
        ),
        (
            vec!["machinepool/pool-1", "-n", "fleet", "--reissue", "--edit"],
            "the argument '--reissue' cannot be used with '--edit'",
        ),
        (
            vec!["--manifests", "tests/fixtures/base", "--reissue"],
            "the argument '--manifests <PATH>' cannot be used with '--reissue'",
        ),
    ] {
        let mut all = vec!["rotate", "--kubectl", "/nonexistent/kubectl"];
        all.extend(args);
        let r = run(&all);
        assert_eq!(r.code, 2, "{all:?}: {}{}", r.stdout, r.stderr);
        assert!(r.stderr.contains(clash), "{all:?}: {}", r.stderr);
        assert_eq!(r.stdout, "", "{all:?}");
    }
}
