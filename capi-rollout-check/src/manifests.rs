//! Reading one side (base or head) of the comparison: a manifest file, a directory of them, or
//! stdin, as multi-document YAML or JSON, into a set of objects keyed the way the API server
//! knows them: group, kind, namespace, name.

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use capi_bootstrap_rollout_policy::capi::config_ref::{ref_identity_of, RefIdentity};
use capi_bootstrap_rollout_policy::capi::kinds::group_of_api_version;
use capi_bootstrap_rollout_policy::settings::parse::type_name;
use serde_json::Value;

/// The namespace of an object whose manifest names none. Tools applying the manifests put it
/// into their own target namespace; `kubectl apply` uses `default`, and so does this tool.
pub const DEFAULT_NAMESPACE: &str = "default";

/// Groups whose documents are build instructions, not cluster objects (kustomization.yaml).
const SKIPPED_GROUPS: [&str; 1] = ["kustomize.config.k8s.io"];

/// Where a document starts: the file as given on the command line (joined with the path found
/// below a directory), the 1-based index of the document in that file, and the 1-based line of
/// its first content.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Location {
    pub file: String,
    pub document: usize,
    pub line: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{} (document {})",
            self.file, self.line, self.document
        )
    }
}

/// The identity that pairs a base object with its head version.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    pub group: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}

#[derive(Clone, Debug)]
pub struct Manifest {
    pub object: Value,
    pub location: Location,
}

/// One side of the comparison.
#[derive(Debug, Default)]
pub struct ManifestSet {
    pub objects: BTreeMap<Key, Manifest>,
    /// The directory given on the command line, when it was one.
    pub dir: Option<PathBuf>,
}

/// Unreadable input: names the file, and the document and line when known.
#[derive(Debug)]
pub struct InputError {
    pub file: String,
    pub document: Option<usize>,
    pub line: Option<usize>,
    pub message: String,
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(document) = self.document {
            write!(f, " (document {document})")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for InputError {}

fn error(file: &str, document: Option<usize>, line: Option<usize>, message: String) -> InputError {
    InputError {
        file: file.to_string(),
        document,
        line,
        message,
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Yaml,
    Json,
}

/// The display name of stdin.
pub const STDIN: &str = "<stdin>";

impl ManifestSet {
    /// Reads `-` (stdin), a file, or every `*.yaml`, `*.yml`, `*.json` below a directory
    /// (recursively, in path order, skipping names that start with a dot).
    /// Where a file of this set lived in `other` (a directory too): the same path below it.
    pub fn moved_to(&self, file: &str, other: &ManifestSet) -> Option<String> {
        let rest = Path::new(file).strip_prefix(self.dir.as_ref()?).ok()?;
        Some(other.dir.as_ref()?.join(rest).display().to_string())
    }

    pub fn load(path: &str) -> Result<ManifestSet, InputError> {
        let mut set = ManifestSet::default();
        if path == "-" {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|e| error(STDIN, None, None, format!("cannot read: {e}")))?;
            set.add_text(STDIN, &text, None)?;
            return Ok(set);
        }
        let root = Path::new(path);
        let metadata =
            fs::metadata(root).map_err(|e| error(path, None, None, format!("cannot read: {e}")))?;
        if metadata.is_dir() {
            set.dir = Some(root.to_path_buf());
            let mut files = Vec::new();
            collect(root, &mut files)
                .map_err(|(p, e)| error(&p.display().to_string(), None, None, e))?;
            for file in files {
                set.add_file(&file)?;
            }
        } else {
            set.add_file(root)?;
        }
        Ok(set)
    }

    fn add_file(&mut self, path: &Path) -> Result<(), InputError> {
        let name = path.display().to_string();
        let bytes =
            fs::read(path).map_err(|e| error(&name, None, None, format!("cannot read: {e}")))?;
        let text = String::from_utf8(bytes)
            .map_err(|e| error(&name, None, None, format!("not UTF-8 text: {e}")))?;
        self.add_text(&name, &text, format_of(path))
    }

    /// Parses `text` (YAML or JSON; sniffed when `format` is `None`) and adds its objects.
    pub fn add_text(
        &mut self,
        file: &str,
        text: &str,
        format: Option<Format>,
    ) -> Result<(), InputError> {
        for (location, item, object) in objects_in(file, text, format)? {
            self.insert(object, location, item)?;
        }
        Ok(())
    }

    /// Adds one object read elsewhere (a cluster, a plan), as if it were the only document of
    /// `file`.
    pub fn add_object(&mut self, object: Value, file: &str) -> Result<(), InputError> {
        let location = Location {
            file: file.to_string(),
            document: 1,
            line: 1,
        };
        self.insert(object, location, None)
    }

    /// Adds one object; `item` is its index when it came from a `List`.
    fn insert(
        &mut self,
        object: Value,
        location: Location,
        item: Option<usize>,
    ) -> Result<(), InputError> {
        let at = |message: String| {
            let message = match item {
                Some(i) => format!("items[{i}]: {message}"),
                None => message,
            };
            error(
                &location.file,
                Some(location.document),
                Some(location.line),
                message,
            )
        };
        let text = |keys: &[&str]| -> Option<&str> {
            keys.iter()
                .try_fold(&object, |v, k| v.get(k))
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
        };
        let Some(api_version) = text(&["apiVersion"]) else {
            return Err(at("the object has no apiVersion".into()));
        };
        let Some(kind) = text(&["kind"]) else {
            return Err(at("the object has no kind".into()));
        };
        let group = group_of_api_version(api_version);
        if SKIPPED_GROUPS.contains(&group) {
            return Ok(());
        }
        let Some(name) = text(&["metadata", "name"]) else {
            return Err(at(format!("the {kind} has no metadata.name")));
        };
        let key = Key {
            group: group.to_string(),
            kind: kind.to_string(),
            namespace: text(&["metadata", "namespace"])
                .unwrap_or(DEFAULT_NAMESPACE)
                .to_string(),
            name: name.to_string(),
        };
        if let Some(first) = self.objects.get(&key) {
            return Err(at(format!(
                "duplicate object {key} ({}), first defined at {}",
                if key.group.is_empty() {
                    "core"
                } else {
                    &key.group
                },
                first.location
            )));
        }
        // As the API server does: an object without a namespace lands in the default one.
        let mut object = object;
        if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.insert("namespace".into(), Value::String(key.namespace.clone()));
        }
        self.objects.insert(key, Manifest { object, location });
        Ok(())
    }
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) -> Result<(), (PathBuf, String)> {
    let entries =
        fs::read_dir(dir).map_err(|e| (dir.to_path_buf(), format!("cannot read: {e}")))?;
    let mut paths: Vec<PathBuf> = entries
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(|e| (dir.to_path_buf(), format!("cannot read: {e}")))?;
    paths.sort();
    for path in paths {
        let hidden = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with('.'));
        if hidden {
            continue;
        }
        // Directories are entered only when they are real ones (no symlink loops).
        let is_dir = fs::symlink_metadata(&path)
            .map(|m| m.is_dir())
            .unwrap_or(false);
        if is_dir {
            collect(&path, files)?;
        } else if matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml" | "json")
        ) {
            files.push(path);
        }
    }
    Ok(())
}

/// The format a file's extension names (`None`: sniffed from the text).
pub fn format_of(path: &Path) -> Option<Format> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("json") => Some(Format::Json),
        Some("yaml" | "yml") => Some(Format::Yaml),
        _ => None,
    }
}

/// The objects of `text` (YAML or JSON; sniffed when `format` is `None`) in document order:
/// each with where its document starts and, for an item of a `List`, its index. Empty
/// documents give none.
pub fn objects_in(
    file: &str,
    text: &str,
    format: Option<Format>,
) -> Result<Vec<(Location, Option<usize>, Value)>, InputError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let format = format.unwrap_or_else(|| match text.trim_start().chars().next() {
        Some('{' | '[') => Format::Json,
        _ => Format::Yaml,
    });
    let documents = match format {
        Format::Yaml => yaml_documents(file, text)?,
        Format::Json => json_documents(file, text)?,
    };
    let mut objects = Vec::new();
    for (location, value) in documents {
        for (item, object) in objects_of(&location, value)? {
            objects.push((location.clone(), item, object));
        }
    }
    Ok(objects)
}

/// Whether a line separates YAML documents (`---`, `--- <content>`, or the end marker `...`).
fn separator(line: &str) -> Option<&str> {
    for marker in ["---", "..."] {
        if let Some(rest) = line.strip_prefix(marker) {
            if rest.is_empty() || rest.starts_with([' ', '\t', '\r']) {
                return Some(if marker == "---" { rest } else { "" });
            }
        }
    }
    None
}

fn is_content(line: &str) -> bool {
    let t = line.trim();
    !t.is_empty() && !t.starts_with('#')
}

/// Splits a YAML stream into documents by hand, so each keeps its starting line (yaml_serde
/// does not report where a document starts). Documents with nothing but comments (Helm renders
/// those for empty templates) are dropped without taking a number.
fn yaml_documents(file: &str, text: &str) -> Result<Vec<(Location, Value)>, InputError> {
    // (first line number of the chunk, its lines)
    let mut chunks: Vec<(usize, Vec<String>)> = vec![(1, Vec::new())];
    for (i, line) in text.lines().enumerate() {
        match separator(line) {
            Some(rest) => chunks.push((i + 1, vec![format!("   {rest}")])),
            None => chunks.last_mut().unwrap().1.push(line.to_string()),
        }
    }
    let mut documents = Vec::new();
    let mut index = 0;
    for (first_line, lines) in chunks {
        let Some(offset) = lines.iter().position(|l| is_content(l)) else {
            continue;
        };
        index += 1;
        let location = Location {
            file: file.to_string(),
            document: index,
            line: first_line + offset,
        };
        let chunk = lines.join("\n");
        // On error, parsed again padded with empty lines, so that the parser's own message
        // gives lines of the file.
        let parsed = yaml_serde::from_str::<yaml_serde::Value>(&chunk).map_err(|e| {
            let padded = "\n".repeat(first_line - 1) + &chunk;
            yaml_serde::from_str::<yaml_serde::Value>(&padded)
                .err()
                .unwrap_or(e)
        });
        let mut value = parsed.map_err(|e| {
            let line = e.location().map(|l| l.line());
            error(
                file,
                Some(index),
                line.or(Some(location.line)),
                format!("not valid YAML: {e}"),
            )
        })?;
        value.apply_merge().map_err(|e| {
            error(
                file,
                Some(index),
                Some(location.line),
                format!("not valid YAML: {e}"),
            )
        })?;
        let json = serde_json::to_value(value).map_err(|e| {
            error(
                file,
                Some(index),
                Some(location.line),
                format!("not representable as JSON: {e}"),
            )
        })?;
        documents.push((location, json));
    }
    Ok(documents)
}

/// One or more concatenated JSON values.
fn json_documents(file: &str, text: &str) -> Result<Vec<(Location, Value)>, InputError> {
    let line_of = |offset: usize| text[..offset].matches('\n').count() + 1;
    let mut documents = Vec::new();
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    let mut index = 0;
    loop {
        let end = stream.byte_offset();
        let start = end + (text[end..].len() - text[end..].trim_start().len());
        match stream.next() {
            None => break,
            Some(Ok(value)) => {
                index += 1;
                documents.push((
                    Location {
                        file: file.to_string(),
                        document: index,
                        line: line_of(start),
                    },
                    value,
                ));
            }
            Some(Err(e)) => {
                return Err(error(
                    file,
                    Some(index + 1),
                    Some(e.line()),
                    format!("not valid JSON: {e}"),
                ))
            }
        }
    }
    Ok(documents)
}

/// The objects of one document: none (empty), itself, or the items of a `List` (with their
/// index).
fn objects_of(
    location: &Location,
    value: Value,
) -> Result<Vec<(Option<usize>, Value)>, InputError> {
    let at = |message: String| {
        error(
            &location.file,
            Some(location.document),
            Some(location.line),
            message,
        )
    };
    let object = match value {
        Value::Null => return Ok(Vec::new()),
        Value::Object(map) => map,
        other => {
            return Err(at(format!(
                "a manifest must be an object, got {}",
                type_name(&other)
            )))
        }
    };
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    let is_list = kind == "List" || (kind.ends_with("List") && object.contains_key("apiVersion"));
    let Some(Value::Array(items)) = object.get("items").filter(|_| is_list) else {
        return Ok(vec![(None, Value::Object(object))]);
    };
    // A typed list (`MachinePoolList`) may leave kind and apiVersion out of its items.
    let item_kind = kind.strip_suffix("List").filter(|k| !k.is_empty());
    let api_version = object.get("apiVersion").cloned();
    items
        .iter()
        .enumerate()
        .map(|(i, item)| match item {
            Value::Object(map) => {
                let mut map = map.clone();
                if let (Some(kind), false) = (item_kind, map.contains_key("kind")) {
                    map.insert("kind".into(), Value::String(kind.to_string()));
                    if let (Some(v), false) = (&api_version, map.contains_key("apiVersion")) {
                        map.insert("apiVersion".into(), v.clone());
                    }
                }
                Ok((Some(i), Value::Object(map)))
            }
            other => Err(at(format!(
                "items[{i}] of the {kind} must be an object, got {}",
                type_name(other)
            ))),
        })
        .collect()
}

/// `spec.template.spec.bootstrap.configRef` of a MachinePool, MachineDeployment or MachineSet,
/// in either API version (`apiGroup` in v1beta2, `apiVersion` in v1beta1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigRef {
    pub group: String,
    pub kind: String,
    pub name: String,
}

/// The `{group, kind, name}` of a ref as the policy read it, `None` unless it names all three.
pub fn named(reference: RefIdentity) -> Option<(String, String, String)> {
    let RefIdentity {
        group, kind, name, ..
    } = reference;
    (!group.is_empty() && !kind.is_empty() && !name.is_empty()).then_some((group, kind, name))
}

impl ConfigRef {
    /// `None` unless the ref names a group, a kind and a name.
    pub fn of(consumer: &Value) -> Option<ConfigRef> {
        let (group, kind, name) = named(ref_identity_of(consumer)?)?;
        Some(ConfigRef { group, kind, name })
    }

    /// Whether this ref names `key` (a config or template in the consumer's namespace).
    pub fn names(&self, key: &Key) -> bool {
        self.group == key.group && self.kind == key.kind && self.name == key.name
    }
}

/// The identity of a manifest, as `capi-rollout-check` pairs objects.
pub fn key_of(object: &Value) -> Key {
    let text = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let namespace = text("/metadata/namespace");
    Key {
        group: group_of_api_version(&text("/apiVersion")).to_string(),
        kind: text("/kind"),
        namespace: if namespace.is_empty() {
            DEFAULT_NAMESPACE.to_string()
        } else {
            namespace
        },
        name: text("/metadata/name"),
    }
}
