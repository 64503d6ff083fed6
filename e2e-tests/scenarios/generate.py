#!/usr/bin/env python3
"""Writes the e2e scenarios: one directory per scenario with request.json (a raw
AdmissionRequest, exactly what `kwctl run --request-path` takes) and scenario.yaml (settings
and expected verdict). The JSON files are the source of truth for kwctl users; this script
only keeps them consistent. The scenarios are in scenarios_*.py beside it, one module per
family, imported in the order they are written (each request's uid derived from its scenario's
name, so a new scenario changes no other file); their builders are
in scenario_base.py and capi_objects.py. Edit them and run
`python3 e2e-tests/scenarios/generate.py`.

Objects are written as a cluster stores them: ownerReferences set by the MachinePool
controller, the token written by the kubeadm bootstrap controller, status, defaults."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scenario_base import HERE, SCENARIOS  # noqa: E402
import scenarios_rules  # noqa: E402,F401
import scenarios_context_aware  # noqa: E402,F401
import scenarios_templates  # noqa: E402,F401
import scenarios_providers  # noqa: E402,F401
import scenarios_bad_input  # noqa: E402,F401
import scenarios_apiserver  # noqa: E402,F401
import scenarios_stored_versions  # noqa: E402,F401
import scenarios_replace  # noqa: E402,F401
import scenarios_k0smotron  # noqa: E402,F401
import scenarios_content_format  # noqa: E402,F401
import scenarios_infrastructure  # noqa: E402,F401
from scenarios_apiserver import yaml_scalar  # noqa: E402


def write():
    keep = set()
    for name, description, req, expect, settings, session in SCENARIOS:
        keep.add(name)
        d = os.path.join(HERE, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "request.json"), "w") as f:
            json.dump(req, f, indent=2, ensure_ascii=False)
            f.write("\n")
        lines = [f"description: {yaml_scalar(description)}"]
        if settings is not None:
            lines.append(f"settings: {json.dumps(settings)}")
        if session is not None:
            lines.append("contextAware: true")
            lines.append("session: session.yml")
            with open(os.path.join(d, "session.yml"), "w") as f:
                f.write("# kwctl replay session: the cluster's answers to the policy's lookups, in order.\n")
                if not session:
                    f.write("[]\n")
                for exchange in session:
                    f.write("- type: Exchange\n  request: |\n")
                    f.write("".join(f"    {line}\n" for line in exchange["request"].splitlines()))
                    f.write("  response:\n")
                    for k, v in exchange["response"].items():
                        f.write(f"    {k}: {json.dumps(v)}\n")
        lines.append("expect:")
        for key, value in expect.items():
            lines.append(f"  {key}: {json.dumps(value, ensure_ascii=False)}")
        with open(os.path.join(d, "scenario.yaml"), "w") as f:
            f.write("\n".join(lines) + "\n")
    print(f"wrote {len(SCENARIOS)} scenarios")


if __name__ == "__main__":
    write()
