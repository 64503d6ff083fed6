#!/usr/bin/env python3
"""Regenerates tests/crds/ from upstream CustomResourceDefinition files: a maintainer tool, never run
by the build or the tests.

    python3 tests/crds/regenerate.py FILE_OR_URL...

Each argument is a path or an http(s) URL of a YAML file holding one or more CRDs (multi-document
YAML is fine). For every served version of every CRD it writes <folder>/<Kind>.<version>.json:
the version's openAPIV3Schema without its `description`s and `x-kubernetes-validations`, plus the
CRD's group, kind, plural, scope and the version's name, storage and deprecated flags and
subresources. <folder> is the upstream project (FOLDERS below; any other group's go to providers/). Files of a kind given on the
command line whose version is no longer served are removed; other kinds are left alone, so one
project can be updated at a time. The output is sorted-key JSON with a 2-space indent: the same
inputs always give the same bytes.

Needs PyYAML: `apt-get install python3-yaml` or `pip install pyyaml`.
"""
import argparse
import json
import os
import sys
import urllib.request

try:
    import yaml
except ImportError:
    sys.exit("regenerate.py needs PyYAML: apt-get install python3-yaml (or pip install pyyaml)")

HERE = os.path.dirname(os.path.abspath(__file__))

# (API group, kind) -> folder, the upstream project the CRD comes from; (group, None) matches any
# other kind of the group. README.md names each project's repository and commit.
FOLDERS = {
    ("cluster.x-k8s.io", None): "cluster-api",
    ("bootstrap.cluster.x-k8s.io", "KubeadmConfig"): "cluster-api",
    ("bootstrap.cluster.x-k8s.io", "KubeadmConfigTemplate"): "cluster-api",
    ("bootstrap.cluster.x-k8s.io", None): "providers",
    ("policies.kubewarden.io", None): "kubewarden",
}
# Every other group: a provider's own (a bootstrap provider in a group of its own, an
# infrastructure provider).
OTHER_PROVIDERS = "providers"

# Schema keywords whose values are schemas, or maps or lists of schemas. Every other keyword's
# value (default, enum, example, ...) is data and copied as it is, so a property or a default
# that happens to be called `description` survives.
SCHEMA_MAPS = ("properties", "patternProperties", "definitions")
SCHEMA_LISTS = ("allOf", "anyOf", "oneOf")
SCHEMAS = ("additionalProperties", "items", "not", "additionalItems")
# Dropped keywords: prose, and CEL rules (with their prose messages), which JSON Schema
# validators cannot evaluate.
DROPPED = ("description", "x-kubernetes-validations")


class Loader(yaml.SafeLoader):
    """SafeLoader without YAML 1.1 timestamps: a date-like scalar stays a string, as the API
    server (YAML 1.2 via JSON) reads it."""


Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def structural(schema):
    """The schema without the DROPPED keywords, at every level."""
    if not isinstance(schema, dict):
        return schema  # additionalProperties: true/false
    out = {}
    for key, value in schema.items():
        if key in DROPPED:
            continue
        if key in SCHEMA_MAPS:
            value = {name: structural(sub) for name, sub in value.items()}
        elif key in SCHEMA_LISTS:
            value = [structural(sub) for sub in value]
        elif key in SCHEMAS:
            value = [structural(sub) for sub in value] if isinstance(value, list) else structural(value)
        out[key] = value
    return out


def read(source):
    if source.startswith(("http://", "https://")):
        with urllib.request.urlopen(source, timeout=60) as response:
            return response.read().decode("utf-8")
    with open(source, encoding="utf-8") as f:
        return f.read()


def folder(group, kind):
    for key in ((group, kind), (group, None)):
        if key in FOLDERS:
            return FOLDERS[key]
    return OTHER_PROVIDERS


def crds(source):
    for doc in yaml.load_all(read(source), Loader=Loader):
        if not doc:
            continue
        if doc.get("kind") != "CustomResourceDefinition":
            sys.exit(f"{source}: a {doc.get('kind')!r} document is not a CustomResourceDefinition")
        yield doc


def files(crd):
    """(folder/file name, content) of each served version of a CRD."""
    spec = crd["spec"]
    group, kind = spec["group"], spec["names"]["kind"]
    for version in spec["versions"]:
        if not version.get("served"):
            print(f"skipped {kind} {version['name']}: not served", file=sys.stderr)
            continue
        content = {
            "group": group,
            "kind": kind,
            "plural": spec["names"]["plural"],
            "scope": spec["scope"],
            "version": version["name"],
            "storage": bool(version.get("storage")),
            "deprecated": bool(version.get("deprecated")),
            "subresources": version.get("subresources") or {},
            "openAPIV3Schema": structural(version["schema"]["openAPIV3Schema"]),
        }
        yield os.path.join(folder(group, kind), f"{kind}.{version['name']}.json"), content


def existing(out):
    """(group, kind) -> relative paths of the files out/ already holds."""
    found = {}
    for sub in sorted(os.listdir(out)):
        path = os.path.join(out, sub)
        if not os.path.isdir(path):
            continue
        for name in sorted(os.listdir(path)):
            if name.endswith(".json"):
                with open(os.path.join(path, name), encoding="utf-8") as f:
                    content = json.load(f)
                found.setdefault((content["group"], content["kind"]), []).append(os.path.join(sub, name))
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sources", nargs="+", metavar="FILE_OR_URL", help="upstream CRD YAML files")
    parser.add_argument("--out", default=HERE, help="the folder to write (default: this script's, tests/crds/)")
    args = parser.parse_args()

    written = {}
    kinds = set()
    for source in args.sources:
        for crd in crds(source):
            kinds.add((crd["spec"]["group"], crd["spec"]["names"]["kind"]))
            for rel, content in files(crd):
                if rel in written:
                    sys.exit(f"{source}: {rel} already comes from another input")
                written[rel] = content

    before = existing(args.out) if os.path.isdir(args.out) else {}
    for rel, content in sorted(written.items()):
        path = os.path.join(args.out, rel)
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                group = json.load(f)["group"]
            if group != content["group"]:
                sys.exit(f"{rel} holds {content['kind']}.{group}: a kind of the same name in "
                         f"{content['group']} needs a folder of its own in FOLDERS")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(json.dumps(content, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    for kind in sorted(kinds):
        for rel in before.get(kind, []):
            if rel not in written:
                os.remove(os.path.join(args.out, rel))
                print(f"removed {rel}: its kind was given, this version was not", file=sys.stderr)
    print(f"wrote {len(written)} files for {len(kinds)} kinds into {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
