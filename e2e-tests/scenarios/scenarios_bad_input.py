"""Bad input and bad settings: a clear answer, never a crash."""
from scenario_base import *  # noqa: F401,F403
from scenarios_rules import *  # noqa: F401,F403

# --- Bad input and bad settings -----------------------------------------------------------------
odd = request("UPDATE", edited(old, lambda o: o.update(spec="#cloud-config")), old)
scenario("bad-input-spec-not-an-object",
         "a spec that is not an object gets a clear rejection naming spec, not a crash",
         odd, {"allowed": False, "messageContains": ["[spec: Forbidden: changed]"]})
bad_ref = request("CREATE", machine_pool("v1beta2", "workers-spot-8d2f0a1c"))
scenario("bad-input-configref-a-string",
         "a configRef that is a string gets a 400 naming the field",
         bad_ref, {"allowed": False, "code": 400, "messageContains": ["spec.template.spec.bootstrap.configRef: Invalid value: must be an object reference"]})
scenario("settings-typo-refused",
         "a misspelled setting is refused when the policy is loaded, never silently ignored",
         request("UPDATE", edited(old, edit_in_place), old), {"settingsError": "inPlaceEdit: unknown setting"},
         settings={"inPlaceEdit": "allow"})
scenario("settings-bad-path-refused",
         "a malformed path in ignoredPaths is refused, naming the key",
         request("UPDATE", edited(old, edit_in_place), old), {"settingsError": "ignoredPaths.KubeadmConfig[0]"},
         settings={"ignoredPaths": {"KubeadmConfig": ["spec.files[*.content"]}})
