//! The README and the pages under docs/ stay true to the checkout:
//!
//! - every relative link in README.md and docs/*.md names a file or folder of the checkout, and
//!   the heading it names after `#`, by GitHub's anchor rules;
//! - README.md links repository files only absolutely (`https://github.com/<repo>/blob/main/…`):
//!   Artifact Hub shows it, and `kwctl inspect` prints it, out of the repository. Each such link
//!   names a file of the checkout (and its heading);
//! - the README's lookup RBAC is the block the cluster test applies (cluster-test/framework/policy.go
//!   finds it by the same pattern), and grants what policy.yaml's contextAwareResources name;
//! - the README's refusal is kubectl's output as the cluster test compares it.
//!
//! The page as Artifact Hub and GitHub render it is checked in a browser by `make readme-test`
//! (tests/readme-render/).

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use serde_json::Value;

/// The repository's own files on GitHub, as README.md links them.
const REPOSITORY_FILES: [&str; 2] = [
    "https://github.com/capi-bootstrap-rollout-policy/capi-bootstrap-rollout-policy/blob/main/",
    "https://github.com/capi-bootstrap-rollout-policy/capi-bootstrap-rollout-policy/tree/main/",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    let path = root().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// README.md and docs/*.md, as paths relative to the checkout.
fn documents() -> Vec<String> {
    let mut docs: Vec<String> = std::fs::read_dir(root().join("docs"))
        .expect("docs/ exists")
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    docs.sort();
    let mut files = vec!["README.md".to_string()];
    files.extend(docs);
    files
}

/// A fence opener or closer: three or more backticks or tildes, indented at most three spaces.
fn fence(line: &str) -> Option<(char, usize)> {
    let trimmed = line.trim_start_matches(' ');
    if line.len() - trimmed.len() > 3 {
        return None;
    }
    let c = trimmed.chars().next()?;
    if c != '`' && c != '~' {
        return None;
    }
    let n = trimmed.chars().take_while(|&x| x == c).count();
    (n >= 3).then_some((c, n))
}

/// The text outside fenced code blocks, line by line (`None` for a line inside a fence or a
/// fence line itself). Panics on a fence left open: GitHub would render the rest as code.
fn prose_lines<'a>(file: &str, text: &'a str) -> Vec<Option<&'a str>> {
    let mut open: Option<(char, usize, usize)> = None;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        match (open, fence(line)) {
            (None, Some((c, len))) => {
                open = Some((c, len, n + 1));
                out.push(None);
            }
            (Some((c, len, _)), Some((c2, len2)))
                if c == c2 && len2 >= len && line.trim().chars().all(|x| x == c) =>
            {
                open = None;
                out.push(None);
            }
            (Some(_), _) => out.push(None),
            (None, None) => out.push(Some(line)),
        }
    }
    if let Some((_, _, line)) = open {
        panic!("{file}:{line}: a code fence is never closed");
    }
    out
}

/// `text` with each code span's content blanked out (CommonMark: a run of n backticks up to
/// the next run of exactly n).
fn without_code_spans(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let run = chars[i..].iter().take_while(|&&c| c == '`').count();
        let mut j = i + run;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let other = chars[j..].iter().take_while(|&&c| c == '`').count();
                if other == run {
                    close = Some(j);
                    break;
                }
                j += other;
            } else {
                j += 1;
            }
        }
        match close {
            Some(j) => {
                out.extend(std::iter::repeat_n(' ', j + run - i));
                i = j + run;
            }
            None => {
                out.extend(std::iter::repeat_n('`', run));
                i += run;
            }
        }
    }
    out
}

/// The paragraphs of a document outside code fences, with code spans blanked, each with the
/// line it starts on.
fn paragraphs(file: &str, text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (n, line) in prose_lines(file, text).into_iter().enumerate() {
        match line {
            Some(line) if !line.trim().is_empty() => {
                let (_, block) = current.get_or_insert_with(|| (n + 1, String::new()));
                block.push_str(line);
                block.push('\n');
            }
            _ => out.extend(current.take()),
        }
    }
    out.extend(current);
    out.into_iter()
        .map(|(n, block)| (n, without_code_spans(&block)))
        .collect()
}

/// Every link destination of a document, with the line it is on: inline links and images
/// `[text](dest "title")` and reference definitions `[label]: dest`.
fn links(file: &str, text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (start, block) in paragraphs(file, text) {
        let line_of = |at: usize| start + block[..at].matches('\n').count();
        for (at, _) in block.match_indices("](") {
            let rest = &block[at + 2..];
            let dest = if let Some(angle) = rest.strip_prefix('<') {
                angle.split('>').next().unwrap_or_default().to_string()
            } else {
                let mut depth = 0usize;
                let end = rest
                    .char_indices()
                    .find(|&(_, c)| match c {
                        '(' => {
                            depth += 1;
                            false
                        }
                        ')' if depth == 0 => true,
                        ')' => {
                            depth -= 1;
                            false
                        }
                        c => c.is_whitespace(),
                    })
                    .map_or(rest.len(), |(i, _)| i);
                rest[..end].to_string()
            };
            out.push((line_of(at), dest));
        }
        for (offset, line) in block.lines().enumerate() {
            let trimmed = line.trim_start();
            if let Some(rest) = trimmed.strip_prefix('[') {
                if let Some((label, dest)) = rest.split_once("]:") {
                    if !label.is_empty() && !label.contains(']') {
                        let dest = dest.split_whitespace().next().unwrap_or_default();
                        out.push((start + offset, dest.trim_matches(['<', '>']).to_string()));
                    }
                }
            }
        }
    }
    out
}

/// A heading's text as GitHub renders it, for its anchor: code spans' backticks dropped,
/// links replaced by their text, emphasis markers dropped.
fn rendered_text(heading: &str) -> String {
    let mut text = String::new();
    let mut chars = heading.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '`' | '*' => {}
            '[' => {}
            ']' if chars.peek() == Some(&'(') => {
                for c in chars.by_ref() {
                    if c == ')' {
                        break;
                    }
                }
            }
            ']' => {}
            c => text.push(c),
        }
    }
    text
}

/// GitHub's anchor for a heading (as github-slugger computes it): lower case, every character
/// but letters, digits, `_`, `-` and spaces removed, each space a `-`.
fn slug(heading: &str) -> String {
    rendered_text(heading.trim())
        .to_lowercase()
        .chars()
        .filter(|&c| c.is_alphanumeric() || c == '_' || c == '-' || c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors a document's headings get on GitHub: ATX and setext headings outside code
/// fences, a repeated anchor numbered `-1`, `-2`, ...
fn anchors(file: &str, text: &str) -> BTreeSet<String> {
    let lines = prose_lines(file, text);
    let mut headings = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(line) = line else { continue };
        let trimmed = line.trim_start_matches(' ');
        if line.len() - trimmed.len() <= 3 {
            let hashes = trimmed.chars().take_while(|&c| c == '#').count();
            if (1..=6).contains(&hashes)
                && trimmed[hashes..].chars().next().is_none_or(|c| c == ' ')
            {
                let content = trimmed[hashes..].trim();
                let content = content.trim_end_matches('#').trim_end();
                headings.push(content.to_string());
                continue;
            }
        }
        // Setext: a line of `=` or `-` under a paragraph line.
        let underline = line.trim();
        let is_underline = !underline.is_empty()
            && (underline.chars().all(|c| c == '=') || underline.chars().all(|c| c == '-'));
        if is_underline && i > 0 {
            if let Some(previous) = lines[i - 1] {
                let p = previous.trim_start();
                let paragraph = !p.is_empty()
                    && !p.starts_with(['#', '|', '-', '*', '+', '>'])
                    && !p.chars().next().is_some_and(|c| c.is_ascii_digit());
                if paragraph {
                    headings.push(previous.trim().to_string());
                }
            }
        }
    }
    let mut seen = BTreeSet::new();
    for heading in headings {
        let base = slug(&heading);
        let mut anchor = base.clone();
        let mut n = 0;
        while seen.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        seen.insert(anchor);
    }
    seen
}

/// `base`/`rel` with `.` and `..` resolved, or None when it leaves the checkout.
fn resolve(base: &Path, rel: &str) -> Option<PathBuf> {
    let mut parts: Vec<String> = Vec::new();
    for component in base.join(rel).components() {
        match component {
            Component::Normal(part) => parts.push(part.to_string_lossy().into_owned()),
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::CurDir => {}
            _ => return None,
        }
    }
    Some(parts.iter().collect())
}

/// Checks that `target` (a path in the checkout, with an optional `#anchor`) names a file or
/// folder, and the anchor a heading of it. Returns what is wrong.
fn check_target(
    file: &str,
    line: usize,
    link: &str,
    path: &Path,
    anchor: Option<&str>,
) -> Option<String> {
    let full = root().join(path);
    if !full.exists() {
        return Some(format!(
            "{file}:{line}: {link}: no {} in the checkout",
            path.display()
        ));
    }
    let anchor = anchor.filter(|a| !a.is_empty())?;
    if path.extension().is_none_or(|e| e != "md") {
        return None;
    }
    let rel = path.to_string_lossy();
    let text = read(&rel);
    let found = anchors(&rel, &text);
    (!found.contains(anchor)).then(|| {
        format!(
            "{file}:{line}: {link}: {rel} has no heading #{anchor} (it has: {})",
            found.iter().cloned().collect::<Vec<_>>().join(", ")
        )
    })
}

fn is_absolute(dest: &str) -> bool {
    dest.split_once(':').is_some_and(|(scheme, _)| {
        !scheme.is_empty()
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    }) || dest.starts_with("//")
}

#[test]
fn every_link_of_readme_and_docs_resolves_in_the_checkout() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for file in documents() {
        let text = read(&file);
        let dir = Path::new(&file).parent().unwrap_or(Path::new(""));
        for (line, dest) in links(&file, &text) {
            let (path, anchor) = match dest.split_once('#') {
                Some((path, anchor)) => (path, Some(anchor)),
                None => (dest.as_str(), None),
            };
            if let Some(rest) = REPOSITORY_FILES.iter().find_map(|p| dest.strip_prefix(p)) {
                let (path, anchor) = match rest.split_once('#') {
                    Some((path, anchor)) => (path, Some(anchor)),
                    None => (rest, None),
                };
                checked += 1;
                problems.extend(check_target(&file, line, &dest, Path::new(path), anchor));
                continue;
            }
            if is_absolute(&dest) {
                continue;
            }
            if file == "README.md" && !path.is_empty() {
                problems.push(format!(
                    "{file}:{line}: {dest}: README.md is shown outside the repository (Artifact \
                     Hub, kwctl inspect): link repository files as {}{path}",
                    REPOSITORY_FILES[0]
                ));
                continue;
            }
            checked += 1;
            let target = if path.is_empty() {
                Some(PathBuf::from(&file))
            } else {
                resolve(dir, path)
            };
            match target {
                Some(target) => problems.extend(check_target(&file, line, &dest, &target, anchor)),
                None => problems.push(format!("{file}:{line}: {dest}: leaves the checkout")),
            }
        }
    }
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
    assert!(
        checked > 50,
        "only {checked} links found: is the link reader broken?"
    );
}

#[test]
fn anchors_follow_githubs_rules() {
    let text = "# Rule 3: CAPI's own machinery\n## What CAPI itself writes, and how the policy treats it\n\
                ## `kwctl` and **policy-host**\n## Manifests in an older API version (GitOps repositories still in v1beta1)\n\
                ```sh\n# not a heading\n```\n## Settings\n## Settings\nSetext\n---\n";
    let found = anchors("test", text);
    let want: BTreeSet<String> = [
        "rule-3-capis-own-machinery",
        "what-capi-itself-writes-and-how-the-policy-treats-it",
        "kwctl-and-policy-host",
        "manifests-in-an-older-api-version-gitops-repositories-still-in-v1beta1",
        "settings",
        "settings-1",
        "setext",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(found, want);
    let links = links(
        "test",
        "See [a](docs/a.md#x) and `[not](a link)`,\n[b\nc](<d e.md>) ![i](img.png \"t\").\n\n[ref]: x.md\n",
    );
    let dests: Vec<&str> = links.iter().map(|(_, d)| d.as_str()).collect();
    assert_eq!(dests, ["docs/a.md#x", "d e.md", "img.png", "x.md"]);
}

/// The README's ClusterRole block, found as cluster-test/framework/policy.go's LookupsRBAC finds it:
/// the first ```yaml block that starts with a ClusterRole.
fn readme_rbac() -> Vec<Value> {
    let readme = read("README.md");
    let start = "```yaml\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n";
    let at = readme
        .find(start)
        .expect("README.md has no ClusterRole block for the context-aware lookups");
    let block = &readme[at + "```yaml\n".len()..];
    let block = &block[..block.find("```").expect("the RBAC block is closed")];
    yaml_serde::Deserializer::from_str(block)
        .map(|doc| {
            let value: Value =
                serde::Deserialize::deserialize(doc).expect("the RBAC block is YAML");
            value
        })
        .collect()
}

#[test]
fn readme_rbac_grants_what_policy_yaml_looks_up_to_the_policy_server_and_audit_scanner() {
    let docs = readme_rbac();
    let role = docs
        .iter()
        .find(|d| d["kind"] == "ClusterRole")
        .expect("a ClusterRole");
    let binding = docs
        .iter()
        .find(|d| d["kind"] == "ClusterRoleBinding")
        .expect("README.md's RBAC block binds its ClusterRole (a ClusterRoleBinding)");
    assert_eq!(
        binding["roleRef"]["name"], role["metadata"]["name"],
        "the binding's roleRef"
    );
    let subjects = binding["subjects"].as_array().expect("subjects");
    // The charts' default PolicyServer's ServiceAccount (the lookups) and the audit scanner's
    // (its reports on CAPI's kinds), both in the release's namespace, as the paragraph says.
    for name in ["policy-server", "audit-scanner"] {
        assert!(
            subjects.iter().any(|s| s["kind"] == "ServiceAccount"
                && s["name"] == name
                && s["namespace"] == "kubewarden"),
            "the binding names the charts' ServiceAccount kubewarden/{name}: {subjects:?}"
        );
    }
    assert_eq!(
        subjects.len(),
        2,
        "the binding names only those two: {subjects:?}"
    );
    let mut granted = BTreeSet::new();
    for rule in role["rules"].as_array().expect("rules") {
        let verbs: BTreeSet<&str> = rule["verbs"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(
            verbs,
            ["get", "list", "watch"].into(),
            "README.md's ClusterRole verbs: {rule}"
        );
        for group in rule["apiGroups"].as_array().unwrap() {
            for resource in rule["resources"].as_array().unwrap() {
                granted.insert((
                    group.as_str().unwrap().to_string(),
                    resource.as_str().unwrap().to_string(),
                ));
            }
        }
    }
    let policy: Value = yaml_serde::from_str(&read("policy.yaml")).expect("policy.yaml is YAML");
    let wanted: BTreeSet<(String, String)> = policy["spec"]["contextAwareResources"]
        .as_array()
        .expect("policy.yaml spec.contextAwareResources")
        .iter()
        .map(|r| {
            let group = r["apiVersion"]
                .as_str()
                .unwrap()
                .split('/')
                .next()
                .unwrap()
                .to_string();
            let plural = format!("{}s", r["kind"].as_str().unwrap().to_lowercase());
            (group, plural)
        })
        .collect();
    let missing: Vec<_> = wanted.difference(&granted).collect();
    assert!(missing.is_empty(), "README.md's ClusterRole does not grant {missing:?}, which policy.yaml's contextAwareResources name");
    let extra: Vec<_> = granted.difference(&wanted).collect();
    assert!(
        extra.is_empty(),
        "README.md's ClusterRole grants {extra:?}, which the policy never looks up"
    );
}

/// The refusal the README shows is kubectl's stderr as the cluster test compares it
/// (cluster-test/edits_test.go: the README contains "\n" + stderr): the command, kubectl's
/// patch, the webhook's name and the policy's message with the rotation to do.
#[test]
fn readme_shows_kubectls_refusal_as_the_cluster_test_compares_it() {
    let readme = read("README.md");
    let command = "```console\n$ kubectl apply -f pool-1-a.yaml\n";
    let at = readme
        .find(command)
        .expect("README.md shows kubectl's refusal in a console block");
    let output = &readme[at + command.len()..];
    let output = &output[..output.find("```").expect("the console block is closed")];
    for want in [
        "Error from server: error when applying patch:",
        "admission webhook \"clusterwide-capi-bootstrap-rollout.kubewarden.admission\" denied the request: ",
        "[spec.files[0].content: Forbidden: changed]",
        "The config is in use by MachinePool fleet/pool-1",
        "set spec.template.spec.bootstrap.configRef.name of MachinePool fleet/pool-1 to",
    ] {
        assert!(output.contains(want), "README.md's kubectl output lacks {want:?}");
    }
    assert!(
        output.ends_with('\n') && !output.trim_end().contains("\n\n"),
        "one block of kubectl's output"
    );
}
