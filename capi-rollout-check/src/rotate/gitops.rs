//! `rotate --manifests`: the rotation as a change to the repository, for a pull request. The
//! new config goes into a file of its own beside the current config's (and into the
//! kustomization that lists that file); each pool's manifest gets its `configRef.name` line
//! changed and nothing else, so the diff is the rotation and `capi-rollout-check` passes on it.

use std::fs;
use std::path::{Path, PathBuf};

use capi_bootstrap_rollout_policy::settings::Settings;
use serde_json::Value;

use super::plan::{self, key_of, rejections, ConfigRef, Plan};
use super::{one_object, RotateError};
use crate::manifests::{Key, Manifest, ManifestSet};

/// One file the rotation writes.
#[derive(Debug, PartialEq, Eq)]
pub struct FileChange {
    pub path: PathBuf,
    pub text: String,
    pub created: bool,
    /// What changed in it, for the summary.
    pub what: String,
}

#[derive(Debug)]
pub struct Change {
    pub plan: Plan,
    pub files: Vec<FileChange>,
    /// What the person still has to do by hand.
    pub notes: Vec<String>,
}

fn is_consumer(object: &Value) -> bool {
    let key = key_of(object);
    capi_bootstrap_rollout_policy::capi::kinds::is_machine_pool(&key.group, &key.kind)
        || capi_bootstrap_rollout_policy::capi::kinds::is_machine_template_consumer(
            &key.group, &key.kind,
        )
}

/// In `text`, the `name:` under the first `configRef:` whose name is `old`, in the document
/// whose first content line is `line` (1-based), set to `new`, keeping its quotes and comment.
/// `None` when no such line is there (a flow mapping, JSON): the person edits it.
pub fn repoint_yaml(text: &str, line: usize, old: &str, new: &str) -> Option<String> {
    set_name_under(text, line, "configRef:", old, new)
}

/// [`repoint_yaml`] for any block: the `name:` right under the first `block` (`metadata:`,
/// `configRef:`) whose name is `old`.
fn set_name_under(text: &str, line: usize, block: &str, old: &str, new: &str) -> Option<String> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut config_ref: Option<usize> = None;
    let mut child: Option<usize> = None;
    let mut i = line.saturating_sub(1);
    while i < lines.len() {
        let full = lines[i];
        let bare = full.trim_end_matches(['\n', '\r']);
        if i > line.saturating_sub(1)
            && (bare == "---" || bare.starts_with("--- ") || bare == "...")
        {
            return None;
        }
        let content = bare.trim_start();
        let indent = bare.len() - content.len();
        if content.is_empty() || content.starts_with('#') {
            i += 1;
            continue;
        }
        if let Some(ci) = config_ref {
            if indent <= ci {
                config_ref = None;
                child = None;
                continue; // this line may open another configRef
            }
            if indent == *child.get_or_insert(indent) {
                if let Some(rest) = content.strip_prefix("name:") {
                    let (value, comment) = match rest.find(" #") {
                        Some(at) => (&rest[..at], &rest[at..]),
                        None => (rest, ""),
                    };
                    let spaces = &value[..value.len() - value.trim_start().len()];
                    let trailing = &value[value.trim_end().len()..];
                    let value = value.trim();
                    let (quote, unquoted) = match value.chars().next() {
                        Some(q @ ('"' | '\'')) if value.len() >= 2 && value.ends_with(q) => {
                            (q.to_string(), &value[1..value.len() - 1])
                        }
                        _ => (String::new(), value),
                    };
                    if unquoted == old {
                        let ending = &full[bare.len()..];
                        let replaced = format!(
                            "{}name:{spaces}{quote}{new}{quote}{trailing}{comment}{ending}",
                            &bare[..indent]
                        );
                        let mut out: String = lines[..i].concat();
                        out.push_str(&replaced);
                        out.push_str(&lines[i + 1..].concat());
                        return Some(out);
                    }
                }
            }
        } else if content
            .strip_prefix(block)
            .is_some_and(|r| r.trim().is_empty() || r.trim_start().starts_with('#'))
        {
            config_ref = Some(indent);
        }
        i += 1;
    }
    None
}

/// The kustomization files from `dir` up to `root`, nearest first.
fn kustomizations(dir: &Path, root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut at = Some(dir);
    while let Some(d) = at {
        for name in ["kustomization.yaml", "kustomization.yml", "Kustomization"] {
            let file = d.join(name);
            if file.is_file() {
                found.push(file);
            }
        }
        if d == root {
            break;
        }
        at = d.parent();
    }
    found
}

/// In a kustomization's text, `new` listed right after the resources entry `old` (both relative
/// to the kustomization), with the same indentation and quoting; `None` when `old` is not listed.
fn list_beside(text: &str, old: &str, new: &str) -> Option<String> {
    let mut out = String::new();
    let mut done = false;
    for line in text.split_inclusive('\n') {
        out.push_str(line);
        if done {
            continue;
        }
        let bare = line.trim_end_matches(['\n', '\r']);
        let content = bare.trim_start();
        if let Some(entry) = content.strip_prefix("- ") {
            let entry = entry.trim();
            let unquoted = entry.trim_matches(['"', '\'']);
            if unquoted == old {
                let quoted = entry.replace(old, new);
                if !line.ends_with('\n') {
                    out.push('\n');
                }
                out.push_str(&format!(
                    "{}- {quoted}\n",
                    &bare[..bare.len() - content.len()]
                ));
                done = true;
            }
        }
    }
    done.then_some(out)
}

fn relative(path: &Path, base: &Path) -> Option<String> {
    path.strip_prefix(base)
        .ok()
        .map(|p| p.display().to_string())
}

/// The config `edited` names in `base`, and every pool (MachineDeployment, MachineSet) there
/// that uses it.
fn current_and_consumers<'a>(
    base: &'a ManifestSet,
    manifests: &str,
    key: &Key,
) -> Result<(&'a Manifest, Vec<&'a Manifest>), RotateError> {
    let current = base.objects.get(key).ok_or_else(|| {
        RotateError::Object(format!(
            "{manifests} holds no {key}: give an edited copy of a config these manifests hold"
        ))
    })?;
    let consumers: Vec<&Manifest> = base
        .objects
        .values()
        .filter(|m| is_consumer(&m.object) && key_of(&m.object).namespace == key.namespace)
        .filter(|m| ConfigRef::of(&m.object).is_some_and(|r| r.names(key)))
        .collect();
    if consumers.is_empty() {
        return Err(RotateError::Object(format!(
            "nothing in {manifests} uses {key}: the policy admits an in-place edit of a config no \
             pool uses, so edit its file instead"
        )));
    }
    Ok((current, consumers))
}

/// The new config's file, beside the current one: the person's own manifest under the new
/// name when that is the new config as planned (their comments and order kept), else the
/// planned object as YAML. `None` when the file already holds exactly this config.
fn new_config_file(
    plan: &Plan,
    new_file: &Path,
    (edited_text, edited_source, old_name): (&str, &str, &str),
) -> Result<Option<FileChange>, RotateError> {
    let text = format!(
        "# {}: {} rotated for {} (capi-rollout-check rotate)\n{}",
        plan.new.name,
        plan.old.name,
        plan.consumers
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        yaml_serde::to_string(&plan.new_object).unwrap_or_default()
    );
    let text = set_name_under(edited_text, 1, "metadata:", old_name, &plan.new.name)
        .filter(|renamed| one_object(renamed, edited_source).is_ok_and(|o| o == plan.new_object))
        .map(|renamed| {
            format!(
                "# {}: {} rotated (capi-rollout-check rotate)\n{renamed}",
                plan.new.name, plan.old.name
            )
        })
        .unwrap_or(text);
    if !new_file.exists() {
        return Ok(Some(FileChange {
            path: new_file.to_path_buf(),
            text,
            created: true,
            what: format!("{} {}", plan.new.kind, plan.new.name),
        }));
    }
    let there = fs::read_to_string(new_file).unwrap_or_default();
    let same =
        one_object(&there, &new_file.display().to_string()).is_ok_and(|o| o == plan.new_object);
    if !same {
        return Err(RotateError::Object(format!(
            "{} exists and is not this rotation's config: nothing was written",
            new_file.display()
        )));
    }
    Ok(None)
}

/// Each consumer's configRef.name, in its file (a file already changed is changed further);
/// a ref not written as one YAML line is a note for the person.
fn repoint_files(
    plan: &Plan,
    consumers: &[&Manifest],
    files: &mut Vec<FileChange>,
    notes: &mut Vec<String>,
) -> Result<(), RotateError> {
    for consumer in consumers {
        let path = PathBuf::from(&consumer.location.file);
        let index = files.iter().position(|f| f.path == path);
        let before = match index {
            Some(i) => files[i].text.clone(),
            None => fs::read_to_string(&path)
                .map_err(|e| RotateError::Input(format!("{}: cannot read: {e}", path.display())))?,
        };
        let consumer_key = key_of(&consumer.object);
        let Some(after) = repoint_yaml(
            &before,
            consumer.location.line,
            &plan.old.name,
            &plan.new.name,
        ) else {
            notes.push(format!(
                "{}: set spec.template.spec.bootstrap.configRef.name of {consumer_key} to {:?} (not written as one YAML line here)",
                consumer.location, plan.new.name
            ));
            continue;
        };
        let what = format!(
            "{consumer_key}: configRef.name {} -> {}",
            plan.old.name, plan.new.name
        );
        match index {
            Some(i) => {
                files[i].text = after;
                files[i].what.push_str(&format!("; {what}"));
            }
            None => files.push(FileChange {
                path,
                text: after,
                created: false,
                what,
            }),
        }
    }
    Ok(())
}

/// A kustomization that lists the current config's file lists the new one too; with none
/// that does, a note.
fn list_in_kustomization(
    (config_file, new_file): (&Path, &Path),
    root: &Path,
    files: &mut Vec<FileChange>,
    notes: &mut Vec<String>,
) {
    let dir = config_file.parent().unwrap_or(Path::new("."));
    for kustomization in kustomizations(dir, root) {
        let base_dir = kustomization.parent().unwrap_or(Path::new("."));
        let (Some(old), Some(new)) = (
            relative(config_file, base_dir),
            relative(new_file, base_dir),
        ) else {
            continue;
        };
        let text = fs::read_to_string(&kustomization).unwrap_or_default();
        if let Some(after) = list_beside(&text, &old, &new) {
            files.push(FileChange {
                path: kustomization,
                text: after,
                created: false,
                what: format!("resources: {new} added"),
            });
            return;
        }
    }
    if !kustomizations(dir, root).is_empty() {
        notes.push(format!(
            "add {} to your kustomization's resources",
            new_file.display()
        ));
    }
}

/// Plans the rotation of the config `edited` names, in the manifests under `manifests`.
pub fn rotate_manifests(
    settings: &Settings,
    manifests: &str,
    edited_text: &str,
    edited_source: &str,
) -> Result<Change, RotateError> {
    let base = ManifestSet::load(manifests).map_err(|e| RotateError::Input(e.to_string()))?;
    let edited = one_object(edited_text, edited_source)?;
    let key = key_of(&edited);
    let (current, consumers) = current_and_consumers(&base, manifests, &key)?;
    let objects: Vec<&Value> = consumers.iter().map(|m| &m.object).collect();
    let plan = plan::plan(settings, &objects, &current.object, &edited)?;
    let rejected = rejections(settings, &objects, &current.object, &plan);
    if !rejected.is_empty() {
        return Err(RotateError::Refused(format!(
            "the policy would refuse this rotation, so nothing was written: {}",
            rejected.join("; ")
        )));
    }

    let mut files: Vec<FileChange> = Vec::new();
    let mut notes = Vec::new();
    let config_file = Path::new(&current.location.file);
    let dir = config_file.parent().unwrap_or(Path::new("."));
    let new_file = dir.join(format!("{}.yaml", plan.new.name));
    let source = (edited_text, edited_source, key.name.as_str());
    files.extend(new_config_file(&plan, &new_file, source)?);
    repoint_files(&plan, &consumers, &mut files, &mut notes)?;
    let root = base.dir.clone().unwrap_or_else(|| dir.to_path_buf());
    list_in_kustomization((config_file, &new_file), &root, &mut files, &mut notes);
    Ok(Change { plan, files, notes })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::plain("kind: MachinePool\nspec:\n  template:\n    spec:\n      bootstrap:\n        configRef:\n          apiGroup: g\n          kind: K\n          name: a\n", 
                  Some("kind: MachinePool\nspec:\n  template:\n    spec:\n      bootstrap:\n        configRef:\n          apiGroup: g\n          kind: K\n          name: b\n"))]
    #[case::quoted_and_commented(
        "configRef:\n  name: \"a\"  # the config\n  kind: K\n",
        Some("configRef:\n  name: \"b\"  # the config\n  kind: K\n")
    )]
    #[case::single_quoted("configRef:\n  name: 'a'\n", Some("configRef:\n  name: 'b'\n"))]
    #[case::crlf("configRef:\r\n  name: a\r\n", Some("configRef:\r\n  name: b\r\n"))]
    #[case::other_name_first(
        "infrastructureRef:\n  name: a\nconfigRef:\n  name: a\n",
        Some("infrastructureRef:\n  name: a\nconfigRef:\n  name: b\n")
    )]
    #[case::nested_name_is_not_the_ref(
        "configRef:\n  sub:\n    name: a\n  name: a\n",
        Some("configRef:\n  sub:\n    name: a\n  name: b\n")
    )]
    #[case::flow_mapping("configRef: {kind: K, name: a}\n", None)]
    #[case::another_name("configRef:\n  name: c\n", None)]
    #[case::next_document("kind: A\n---\nconfigRef:\n  name: a\n", None)]
    fn repointing(#[case] text: &str, #[case] expected: Option<&str>) {
        assert_eq!(repoint_yaml(text, 1, "a", "b").as_deref(), expected);
    }

    #[test]
    fn the_second_document() {
        let text = "configRef:\n  name: a\n---\nconfigRef:\n  name: a\n";
        assert_eq!(
            repoint_yaml(text, 4, "a", "b").as_deref(),
            Some("configRef:\n  name: a\n---\nconfigRef:\n  name: b\n")
        );
    }

    #[rstest]
    #[case::listed(
        "resources:\n  - ns/a.yaml\n  - ns/b.json\n",
        Some("resources:\n  - ns/a.yaml\n  - ns/a-1.yaml\n  - ns/b.json\n")
    )]
    #[case::quoted(
        "resources:\n- \"ns/a.yaml\"\n",
        Some("resources:\n- \"ns/a.yaml\"\n- \"ns/a-1.yaml\"\n")
    )]
    #[case::not_listed("resources:\n  - ns\n", None)]
    fn kustomization_entries(#[case] text: &str, #[case] expected: Option<&str>) {
        assert_eq!(
            list_beside(text, "ns/a.yaml", "ns/a-1.yaml").as_deref(),
            expected
        );
    }
}
