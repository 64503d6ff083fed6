//! `annotate` and `inspect`: the metadata written and read back, refusals, kwctl's warnings.

use serde_json::Value;

use crate::common::{annotate, host, line, lookup_guest, request, Guest, Step, Workdir, METADATA};

#[test]
fn annotate_writes_metadata_that_inspect_reads_back() {
    let dir = Workdir::new("annotate_writes_metadata");
    let run = annotate(&dir, &Guest::default(), METADATA, "annotated.wasm");
    assert_eq!(run.status, 0, "{}", run.stderr);
    let annotated = dir.0.join("annotated.wasm");
    let inspected = host(&["inspect", annotated.to_str().unwrap()]);
    assert_eq!(
        inspected.stdout,
        concat!(
            r#"{"protocolVersion":"v1","rules":[{"apiGroups":["cluster.x-k8s.io"],"apiVersions":["v1beta2"],"resources":["machinepools"],"operations":["CREATE","UPDATE"]}],"#,
            r#""annotations":{"io.kubewarden.kwctl":"policy-host "#,
            env!("CARGO_PKG_VERSION"),
            r##"","io.kubewarden.policy.title":"test-policy","io.kubewarden.policy.usage":"# Usage\n\nRotate \"configRef\".\n","io.kubewarden.policy.version":"0.1.0"},"##,
            r#""mutating":false,"backgroundAudit":true,"executionMode":"kubewarden-wapc","policyType":"kubernetes","#,
            r#""contextAwareResources":[{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"MachinePool"}]}"#,
            "\n"
        )
    );
    // The annotated module still runs, and annotating it again replaces the section.
    let bytes = std::fs::read(&annotated).unwrap();
    wasmparser::Validator::new().validate_all(&bytes).unwrap();
    let module = dir.write("policy.wasm", &bytes);
    let metadata = dir.write("metadata.yml", METADATA.replace("test-policy", "renamed"));
    let again = dir.0.join("again.wasm");
    let run = host(&[
        "annotate",
        "--metadata-path",
        metadata.to_str().unwrap(),
        "--output-path",
        again.to_str().unwrap(),
        module.to_str().unwrap(),
    ]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    let again_bytes = std::fs::read(&again).unwrap();
    let sections = wasmparser::Parser::new(0)
        .parse_all(&again_bytes)
        .filter(|p| matches!(p, Ok(wasmparser::Payload::CustomSection(r)) if r.name() == "io.kubewarden.metadata"))
        .count();
    assert_eq!(sections, 1);
    let inspected = host(&["inspect", again.to_str().unwrap()]);
    assert!(inspected
        .stdout
        .contains(r#""io.kubewarden.policy.title":"renamed""#));
    assert!(
        !inspected.stdout.contains("io.kubewarden.policy.usage"),
        "no -u this time"
    );

    let plain = dir.guest("plain.wasm", &Guest::default());
    let run = host(&["inspect", plain.to_str().unwrap()]);
    assert_eq!(run.status, 1);
    assert!(run.stderr.contains("not annotated"), "{}", run.stderr);
}

#[test]
fn annotate_refuses_invalid_rules() {
    let dir = Workdir::new("annotate_refuses_invalid_rules");
    let cases = [
        (r#"operations: ["CREATE", "UPDATE"]"#, "operations: []", "Metadata is invalid: rules[0].operations: must have at least one element"),
        (r#"operations: ["CREATE", "UPDATE"]"#, r#"operations: ["CREATE", "PATCH"]"#, "unknown variant `PATCH`, expected one of `CREATE`, `UPDATE`, `DELETE`, `CONNECT`, `*`"),
        (r#"operations: ["CREATE", "UPDATE"]"#, r#"operations: ["*", "CREATE"]"#, "Metadata is invalid: rules[0].operations: No other elements can be defined when '*' is used"),
        (r#"apiGroups: ["cluster.x-k8s.io"]"#, "apiGroups: []", "Metadata is invalid: rules[0].apiGroups: must have at least one element"),
        (r#"apiVersions: ["v1beta2"]"#, r#"apiVersions: ["*", "v1"]"#, "Metadata is invalid: rules[0].apiVersions: No other elements can be defined when '*' is used"),
        (r#"resources: ["machinepools"]"#, r#"resources: ["*/*", "pods"]"#, "Metadata is invalid: rules[0].resources: if '*/*' is present, must not specify other resources"),
        ("mutating: false\n", "\n", "missing field `mutating`"),
        ("executionMode: kubewarden-wapc", "executionMode: opa", "The policy has not been created using Rego"),
    ];
    for (from, to, error) in cases {
        let metadata = METADATA.replace(from, to);
        assert_ne!(metadata, METADATA, "{from}");
        let run = annotate(&dir, &Guest::default(), &metadata, "annotated.wasm");
        assert_eq!(run.status, 1, "{to}");
        assert!(run.stderr.contains(error), "{to}: {}", run.stderr);
        assert!(!dir.0.join("annotated.wasm").exists(), "{to}");
    }
    let unknown = Guest {
        protocol_version: vec![Step::Respond(r#""Unknown""#)],
        ..Guest::default()
    };
    let run = annotate(&dir, &unknown, METADATA, "annotated.wasm");
    assert!(
        run.stderr
            .contains("Metadata is invalid: Must specify a valid protocol version"),
        "{}",
        run.stderr
    );
    let broken = Guest {
        protocol_version: vec![Step::Trap],
        ..Guest::default()
    };
    let run = annotate(&dir, &broken, METADATA, "annotated.wasm");
    assert_eq!(run.status, 1);
    assert!(
        run.stderr
            .contains("Error while detecting Kubewarden protocol version"),
        "{}",
        run.stderr
    );
    let rego = Guest {
        rego: true,
        ..Guest::default()
    };
    let run = annotate(&dir, &rego, METADATA, "annotated.wasm");
    assert!(
        run.stderr
            .contains("This policy has been created using Rego"),
        "{}",
        run.stderr
    );
}

/// METADATA with `lines` added at the top level.
fn metadata_with(lines: &str) -> String {
    format!("{METADATA}{lines}")
}

const WARN_USED: &str = " WARN policy-host: host capabilities used by the policy but not declared in metadata capabilities=";
const WARN_UNUSED: &str = " WARN policy-host: host capabilities declared in metadata but not detected in the policy capabilities=";

/// kwctl 1.35's annotate compares the host calls it finds in the module with metadata's
/// hostCapabilities and warns, in its words, about each side of a difference; the module is
/// written all the same.
#[test]
fn annotate_warns_as_kwctl_when_host_capabilities_differ() {
    let dir = Workdir::new("annotate_warns_on_host_capabilities");
    let declared = "hostCapabilities:\n- kubernetes/list_resources_by_namespace\n";

    // The guest calls list_resources_by_namespace; metadata declares nothing.
    let run = annotate(&dir, &lookup_guest(), METADATA, "annotated.wasm");
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert_eq!(
        run.stderr,
        format!("{WARN_USED}{{\"kubernetes/list_resources_by_namespace\"}}\n")
    );
    assert!(dir.0.join("annotated.wasm").exists());

    // Declared as called: silence, and the declaration is stored.
    let run = annotate(
        &dir,
        &lookup_guest(),
        &metadata_with(declared),
        "declared.wasm",
    );
    assert_eq!((run.status, run.stderr.as_str()), (0, ""));
    let inspected = host(&["inspect", dir.0.join("declared.wasm").to_str().unwrap()]);
    assert!(
        inspected.stdout.ends_with(
            r#""contextAwareResources":[{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"MachinePool"}],"hostCapabilities":["kubernetes/list_resources_by_namespace"]}
"#
        ),
        "{}",
        inspected.stdout
    );

    // Declared, but the guest calls nothing.
    let run = annotate(
        &dir,
        &Guest::default(),
        &metadata_with(declared),
        "unused.wasm",
    );
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert_eq!(
        run.stderr,
        format!("{WARN_UNUSED}{{\"kubernetes/list_resources_by_namespace\"}}\n")
    );

    // A pattern is compared as a string: both warnings, used first. Neither for a guest that
    // calls nothing and declares nothing (an empty list included).
    let run = annotate(
        &dir,
        &lookup_guest(),
        &metadata_with("hostCapabilities: [\"kubernetes/*\", oci/v1/verify]\n"),
        "pattern.wasm",
    );
    assert_eq!(
        run.stderr,
        format!(
            "{WARN_USED}{{\"kubernetes/list_resources_by_namespace\"}}\n{WARN_UNUSED}{{\"kubernetes/*\", \"oci/v1/verify\"}}\n"
        )
    );
    for metadata in [
        METADATA.to_string(),
        metadata_with("hostCapabilities: []\n"),
    ] {
        let run = annotate(&dir, &Guest::default(), &metadata, "plain.wasm");
        assert_eq!((run.status, run.stderr.as_str()), (0, ""));
    }

    // Metadata that fails validation is refused before any comparison, as in kwctl.
    let run = annotate(
        &dir,
        &lookup_guest(),
        &METADATA.replace("operations: [\"CREATE\", \"UPDATE\"]", "operations: []"),
        "invalid.wasm",
    );
    assert_eq!(run.status, 1);
    assert!(!run.stderr.contains("host capabilities"), "{}", run.stderr);
}

/// kwctl's annotate stamps every module with `io.kubewarden.kwctl`, overriding metadata.yml;
/// policy-host writes its own name and version there.
#[test]
fn annotate_names_the_annotating_tool_in_io_kubewarden_kwctl() {
    let dir = Workdir::new("annotate_names_the_annotating_tool");
    let stamp = concat!("policy-host ", env!("CARGO_PKG_VERSION"));
    let own = METADATA.replace(
        "annotations:\n",
        "annotations:\n  io.kubewarden.kwctl: 9.8.7\n",
    );
    let bare = METADATA[..METADATA.find("annotations:").unwrap()].to_string();
    for metadata in [own, bare] {
        let module = dir.guest("policy.wasm", &Guest::default());
        let metadata = dir.write("metadata.yml", &metadata);
        let output = dir.0.join("annotated.wasm");
        let run = host(&[
            "annotate",
            "-m",
            metadata.to_str().unwrap(),
            "-o",
            output.to_str().unwrap(),
            module.to_str().unwrap(),
        ]);
        assert_eq!(run.status, 0, "{}", run.stderr);
        let inspected = host(&["inspect", output.to_str().unwrap()]);
        let stored: Value = serde_json::from_str(&inspected.stdout).unwrap();
        assert_eq!(
            stored["annotations"]["io.kubewarden.kwctl"], stamp,
            "{stored}"
        );
        assert!(!inspected.stdout.contains("9.8.7"), "{}", inspected.stdout);
    }
}

/// `kwctl run` refuses a module whose minimumKubewardenVersion is newer than itself (its
/// major.minor; the patch is ignored); policy-host answers as kwctl 1.35.0.
#[test]
fn run_refuses_a_module_that_needs_a_newer_kubewarden() {
    let dir = Workdir::new("run_refuses_a_newer_minimum");
    let request = dir.write("request.json", request().to_string());
    let cases = [
        ("1.36.0", Some("Error: Policy required Kubewarden version 1.36.0 or greater. But it's running on 1.35.0")),
        ("2.1.4", Some("Error: Policy required Kubewarden version 2.1.0 or greater. But it's running on 1.35.0")),
        ("1.35.9", None),
        ("1.33.0", None),
    ];
    for (minimum, refusal) in cases {
        let metadata = metadata_with(&format!("minimumKubewardenVersion: {minimum}\n"));
        let run = annotate(&dir, &Guest::default(), &metadata, "annotated.wasm");
        assert_eq!(run.status, 0, "{}", run.stderr);
        let module = dir.0.join("annotated.wasm");
        let inspected = host(&["inspect", module.to_str().unwrap()]);
        assert!(
            inspected
                .stdout
                .contains(&format!(r#""minimumKubewardenVersion":"{minimum}""#)),
            "{}",
            inspected.stdout
        );
        let run = host(&[
            "run",
            "--request-path",
            request.to_str().unwrap(),
            module.to_str().unwrap(),
        ]);
        match refusal {
            Some(error) => {
                // The first line: with RUST_BACKTRACE set, anyhow adds a backtrace.
                let first = run.stderr.lines().next().unwrap_or_default();
                assert_eq!((run.status, first), (1, error), "{minimum}");
                assert_eq!(run.stdout, "");
            }
            None => assert_eq!(
                line(&run),
                r#"{"uid":"req-1","allowed":true,"auditAnnotations":null,"warnings":null}"#,
                "{minimum}"
            ),
        }
    }
}
