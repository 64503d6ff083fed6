//! The Debian packages `make demo` and `make test` need are listed once, in
//! .ci/system-packages, which the Makefile runs before building anything. Every other place
//! that could repeat the list (.ci/run, the README, the docs) must not install packages or
//! name an `apt-get install` of its own, or the lists drift apart.

use std::path::Path;

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn only_ci_system_packages_installs_debian_packages() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![
        root.join(".ci/run"),
        root.join("Makefile"),
        root.join("README.md"),
    ];
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            files.push(path);
        }
    }
    let offenders: Vec<String> = files
        .iter()
        .flat_map(|path| {
            read(path)
                .lines()
                .enumerate()
                .filter(|(_, line)| line.contains("apt-get install"))
                .map(|(n, line)| format!("{}:{}: {}", path.display(), n + 1, line.trim()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        offenders.is_empty(),
        "install Debian packages only in .ci/system-packages:\n{}",
        offenders.join("\n")
    );
}

#[test]
fn make_demo_and_make_test_set_packages_up_before_anything_else() {
    let makefile = read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("Makefile"));
    let first_prerequisite = |target: &str| -> Vec<String> {
        makefile
            .lines()
            .filter_map(|line| line.strip_prefix(&format!("{target}: ")))
            .filter_map(|rest| rest.split_whitespace().next().map(str::to_string))
            .collect()
    };
    let demo = first_prerequisite("demo");
    assert!(!demo.is_empty(), "no demo rule");
    assert!(
        demo.iter().all(|p| p == "system-packages-demo"),
        "demo rules start with {demo:?}"
    );
    let test = first_prerequisite("test");
    assert_eq!(
        test.first().map(String::as_str),
        Some("system-packages-test")
    );
    assert!(makefile.contains("\t@.ci/system-packages demo\n"));
    assert!(makefile.contains("\t@.ci/system-packages test\n"));
}

#[test]
fn the_test_list_holds_the_demo_list_and_the_cluster_tests_tools() {
    let output = std::process::Command::new(
        Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/system-packages"),
    )
    .arg("list")
    .output()
    .unwrap();
    assert!(output.status.success());
    let list = String::from_utf8(output.stdout).unwrap();
    let packages: Vec<&str> = list.lines().collect();
    for package in ["binaryen", "chromium", "iproute2", "util-linux"] {
        assert!(
            packages.contains(&package),
            "{package} missing from {packages:?}"
        );
    }
}
