//! The causes of a pool's drift: an edit of its config since the data Secret was written,
//! and a rotation its infrastructure did not roll.

use serde_json::Value;

use super::managed_fields::{leaf_paths, Entry};
use super::{
    plural, Cause, CauseKind, Data, Instance, Judgement, Level, PathsAre, Pool, StaleBecause,
    RECONCILE_BOUND, TOKEN_ROTATION_BOUND, TOPOLOGY_MANAGER,
};
use crate::drift::records::{Bootstrap, Effect, Rendering};
use crate::drift::time;

/// An edit of the config after its data Secret was created: who, when, which paths, whether
/// the data has it, and which instances never got it.
pub(super) fn edit_cause(p: &Pool, d: &Data, edit: &Entry, j: &mut Judgement) {
    let (kind, config_name, instances, pool) = (&p.kind, &p.config_name, &p.instances, p.pool);
    let (infra, infra_label, ns) = (&p.infra, &p.infra_label, &p.ns);
    let (config, secret_created, content_written) = (d.config, d.secret_created, d.content_written);
    let at = edit.time.unwrap_or_default();
    let in_secret = content_written >= at;
    let topology_patch = edit.manager == TOPOLOGY_MANAGER;
    let mut summary = format!(
        "{} of {kind} {config_name} by {} ({}) at {}",
        if topology_patch {
            "topology patch"
        } else {
            "in-place edit"
        },
        edit.manager,
        edit.operation,
        time::format(at)
    );
    let paths = leaf_paths(&edit.fields, "spec");
    // Instances launched before the edit never got it.
    for i in instances
        .iter()
        .filter(|i| i.launched < at && i.launched >= secret_created)
    {
        j.mark(i, StaleBecause::Edit, true);
    }
    let token_discovery = config
        .pointer("/spec/joinConfiguration/discovery/bootstrapToken")
        .is_some()
        && config
            .pointer("/spec/joinConfiguration/discovery/file")
            .is_none();
    let node_refs = pool
        .pointer("/status/nodeRefs")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    let mut rerendered = in_secret;
    if in_secret {
        summary.push_str(&format!(
            "; in the data Secret since {} at the latest",
            time::format(content_written)
        ));
        render_window(p, d, at, token_discovery, j);
    } else {
        summary.push_str(&format!(
            "; not in the data Secret (last written {})",
            time::format(content_written)
        ));
        rerendered = render_pending(p, at, token_discovery, node_refs, j);
    }
    let edit_stale = !j.stale.is_empty() || j.every_future;
    if edit_stale {
        let refreshes = infra
            .as_ref()
            .is_some_and(|i| i.on_content_change == Effect::ReplacesExisting);
        if refreshes && rerendered {
            j.wait.push(format!(
                "# {infra_label} replaces every instance once the data Secret changes: wait for it (kubectl get {} -n {ns})",
                infra_label.to_lowercase()
            ));
        } else {
            j.reissue = true;
        }
        if !rerendered {
            // Nothing will put the edit into the data: only a rotation does.
            j.reissue = true;
        }
    }
    j.causes.push(Cause {
        kind: if topology_patch {
            CauseKind::TopologyPatch
        } else {
            CauseKind::InPlaceEdit
        },
        manager: Some(edit.manager.clone()),
        operation: Some(edit.operation.clone()),
        time: edit.time,
        paths_are: if edit.operation == "Apply" {
            PathsAre::AppliedSet
        } else {
            PathsAre::Owned
        },
        paths,
        in_data_secret: Some(in_secret),
        replaced_by_provider: false,
        summary,
    });
}

/// An edit already in the data Secret: the instances launched between the edit and the write
/// that carried it have the old data or the new.
fn render_window(p: &Pool, d: &Data, at: i64, token_discovery: bool, j: &mut Judgement) {
    let (bootstrap, instances, content_written) = (p.bootstrap, &p.instances, d.content_written);
    // Launched between the edit and the write that carried it: old data or new.
    let window_end = match bootstrap.map(|b| b.rendering) {
        Some(Rendering::AtTokenRotation) if token_discovery => {
            content_written.min(at + TOKEN_ROTATION_BOUND)
        }
        _ => content_written,
    };
    let window: Vec<&Instance> = instances
        .iter()
        .filter(|i| i.launched >= at && i.launched < window_end)
        .collect();
    for i in &window {
        j.mark(i, StaleBecause::RenderWindow, false);
    }
    if !window.is_empty() {
        j.levels.push((
            Level::Bounded,
            format!(
                "{} launched between the edit ({}) and the data Secret's write (by {}): each has the old data or the new",
                plural(window.len(), "instance", "instances"),
                time::format(at),
                time::format(window_end)
            ),
        ));
    }
}

/// An edit not in the data Secret: every instance launched since runs without it, and whether
/// (and by when) the bootstrap provider writes it. Returns whether it will be re-rendered.
fn render_pending(
    p: &Pool,
    at: i64,
    token_discovery: bool,
    node_refs: bool,
    j: &mut Judgement,
) -> bool {
    let (kind, bootstrap, instances, now) = (&p.kind, p.bootstrap, &p.instances, p.now);
    let mut rerendered = false;
    for i in instances {
        if i.launched >= at {
            j.mark(i, StaleBecause::DataWithoutEdit, true);
        }
    }
    match bootstrap {
        Some(Bootstrap {
            rendering: Rendering::Once,
            provider,
        }) => {
            j.every_future = true;
            j.levels.push((
                Level::Exact,
                format!("{kind} ({provider}) renders its data Secret once: the edit reaches no instance, not even new ones, until a rotation"),
            ));
        }
        Some(Bootstrap {
            rendering: Rendering::AtTokenRotation,
            ..
        }) => {
            if !(node_refs && token_discovery) {
                j.every_future = true;
                j.levels.push((
                    Level::Exact,
                    format!(
                        "CABPK re-renders a MachinePool's data Secret only at a token rotation, while the pool has nodeRefs and uses token discovery; this pool {}: no instance, now or future, gets the edit until a rotation",
                        if !token_discovery { "uses file discovery" } else { "has no nodeRefs" }
                    ),
                ));
            } else if now < at + TOKEN_ROTATION_BOUND {
                rerendered = true;
                j.levels.push((
                    Level::Bounded,
                    format!(
                        "CABPK writes the edit into the data Secret at its next token rotation, by {} (10-12.5 min after the edit); instances launched until then take the old data too",
                        time::format(at + TOKEN_ROTATION_BOUND)
                    ),
                ));
            } else {
                j.every_future = true;
                j.levels.push((
                    Level::Unknown,
                    format!(
                        "CABPK should have re-rendered the data Secret by {} and has not: is its controller running?",
                        time::format(at + TOKEN_ROTATION_BOUND)
                    ),
                ));
            }
        }
        Some(Bootstrap {
            rendering: Rendering::EveryReconcile,
            ..
        }) => {
            if now < at + RECONCILE_BOUND {
                rerendered = true;
                j.levels.push((
                    Level::Bounded,
                    format!(
                        "{kind} writes the edit into the data Secret at its next reconcile, by about {}",
                        time::format(at + RECONCILE_BOUND)
                    ),
                ));
            } else {
                // No write: the rendered bytes did not change, or nothing reconciles.
                for i in instances {
                    if let Some(s) = j.stale.get_mut(&i.name) {
                        s.certain = false;
                    }
                }
                j.levels.push((
                    Level::Unknown,
                    format!(
                        "{kind} re-renders on every reconcile and writes only changed bytes: no write since the edit means it changed nothing in the data (a field the provider ignores) or its controller is not reconciling"
                    ),
                ));
            }
        }
        None => {
            j.every_future = true;
            j.levels.push((
                Level::Unknown,
                format!("{kind}'s bootstrap provider is not in the records: when it renders an edit is not known"),
            ));
        }
    }
    rerendered
}

/// A rotation the infrastructure did not roll: instances older than the data Secret.
pub(super) fn rotation_cause(p: &Pool, d: &Data, j: &mut Judgement) {
    let (instances, infra, infra_ref, infra_label) =
        (&p.instances, &p.infra, &p.infra_ref, &p.infra_label);
    let (name, ns, config_name) = (&p.name, &p.ns, &p.config_name);
    let (secret_name, secret_created) = (&d.secret_name, d.secret_created);
    let before: Vec<&Instance> = instances
        .iter()
        .filter(|i| i.launched < secret_created)
        .collect();
    if !before.is_empty() {
        for i in &before {
            j.mark(i, StaleBecause::Rotation, true);
        }
        let effect = infra.as_ref().map(|i| i.on_rotation);
        let replaced = effect == Some(Effect::ReplacesExisting);
        let mut summary = format!(
            "rotation to {config_name} (data Secret {secret_name} created {}): {} launched before it",
            time::format(secret_created),
            plural(before.len(), "instance", "instances")
        );
        let how = infra
            .as_ref()
            .and_then(|i| i.replaced_with)
            .map_or(String::new(), |with| format!(" ({with})"));
        match effect {
            Some(Effect::ReplacesExisting) => {
                summary.push_str(&format!("; {infra_label} replaces them itself{how}"));
                j.wait.push(format!(
                    "# {infra_label} replaces them itself{how}: wait, and watch kubectl get {} {} -n {ns}",
                    infra_label.to_lowercase(),
                    infra_ref.as_ref().map(|r| r.2.as_str()).unwrap_or(name)
                ));
            }
            Some(_) => {
                summary.push_str(&format!(
                    "; {infra_label} replaces no existing instance on a rotation"
                ));
                j.roll = true;
            }
            None => {
                summary.push_str(&format!(
                    "; what {infra_label} does on a rotation is not in the records"
                ));
                j.levels.push((Level::Unknown, format!("{infra_label} is not in the infrastructure records: whether it replaces instances itself is not known")));
                j.roll = true;
            }
        }
        j.causes.push(Cause {
            kind: CauseKind::RotationNotRolled,
            manager: None,
            operation: None,
            time: Some(secret_created),
            paths: Vec::new(),
            paths_are: PathsAre::Owned,
            in_data_secret: None,
            replaced_by_provider: replaced,
            summary,
        });
    }
}
