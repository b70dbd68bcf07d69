"""What the report needs to know about a run's components, recorded in the run directory
(``components.json``), so that the report never needs the plugins (docs/design-rationale.md,
"Component declarations").
"""

from __future__ import annotations

import json
from pathlib import Path

from values_seg.orientation import orientation
from values_seg.config.experiment import COMPONENT_LISTS, Experiment
from values_seg.storage.redaction import redacted
from values_seg.storage.run_files import COMPONENTS

VERSION = 1


def declarations(cfg: Experiment) -> dict:
    """``{"version", "components": {kind: [entry, ...]}, "recipe": {field: value}}`` for the
    configured components and the resolved training recipe (preset, then the config's fields)."""
    out: dict = {"version": VERSION, "components": {}, "recipe": cfg.recipe.to_dict()}
    for key, kind in COMPONENT_LISTS.items():
        entries = []
        for ref in cfg.refs(key):
            comp = ref.component()
            entry = {
                "label": ref.label,
                "name": ref.name,
                "display": comp.label if ref.label == ref.name else ref.label,
                "description": comp.description,
                "source": comp.source,
                "params": ref.to_dict()["params"],
            }
            if kind == "prediction_model":
                entry["family"] = ref.create().family
            elif kind == "measure":
                entry["uncertainty_types"] = comp.meta.get("uncertainty_types")
            elif kind == "aggregation":  # fitted on the validation cases' risks or scores: in-sample there
                entry["fit_needs"] = list(getattr(comp.obj, "fit_needs", ()))
                entry["orientation"] = orientation(comp.obj, f"aggregation {ref.name!r}")
            elif kind == "task":
                entry.update(ref.create().declaration())
            elif kind == "dataset":  # the report names classes by them (the pre-flight built it once already)
                entry["class_names"] = list(ref.create().class_names)
            entries.append(entry)
        out["components"][kind] = entries
    return out


def write(cfg: Experiment, run_dir: Path) -> Path:
    """Write ``components.json`` atomically, credentials redacted (:mod:`values_seg.storage.redaction`); returns its path."""
    from values_seg.storage.run_directory import write_owned

    return write_owned(run_dir, Path(run_dir) / COMPONENTS,
                      json.dumps(redacted(declarations(cfg)), indent=1, sort_keys=True))
