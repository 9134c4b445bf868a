"""diffusers pipelines: ``model_index.json`` and each component's own config and weights.

A diffusers repo is a pipeline (``model_index.json``: ``_class_name`` and one
``[library, class]`` pair per component) whose components live in folders: ``scheduler/``
(``scheduler_config.json``), ``unet/`` or ``transformer/``, ``vae/``, ``text_encoder*/`` (transformers
configs), ``safety_checker/``. A text-model diff sees none of it. Codes (category ``diffusers``):

* ``pipeline_class_changed``, ``components_changed``: another pipeline or component class loads,
  or a component appeared or disappeared;
* ``safety_checker_removed``: the safety checker component is gone (or ``requires_safety_checker``
  turned off);
* ``prediction_type_changed``, ``scheduler_changed``: the scheduler's prediction type, class, beta
  schedule, timestep spacing, training timesteps;
* ``denoiser_changed`` (unet/transformer ``sample_size``, channels, ``cross_attention_dim``),
  ``vae_changed`` (``scaling_factor``, latent channels), ``config_value_changed`` (any other key);
* ``component_weights_changed``: which component's weights were replaced in place;
* ``pipeline_memory_changed``: the serving memory of the pipeline (the bytes of every component's
  default safetensors weights, from their headers; see :mod:`tracker.core.estimate.pipeline`) changed;
* ``malformed``: ``model_index.json`` or a component config cannot be read.

Text encoder configs get the ``config.*`` codes, at their own path; tokenizer folders (``tokenizer/``,
``tokenizer_2/``, ...) get the repo root's tokenizer findings (``tokenizer.*``), at their own path. Bounded: 1 MiB per file,
64 components. Pure: reads only through ``inputs``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tracker.core.estimate.checkpoint import ImplausibleHeader
from tracker.core.estimate.pipeline import component_bytes, fmt_bytes
from tracker.core.findings import libraries as lib
from tracker.core.findings import sentencepiece, slow_tokenizer, tokenizer
from tracker.core.findings.config import (
    Unreadable,
    change_summary,
    diff_configs,
    file_changed,
    flat_diff,
    json_value,
    read_side_json,
)
from tracker.core.findings.inputs import RevisionInputs
from tracker.core.findings.registry import analyser
from tracker.core.findings.rules import SeverityRules
from tracker.core.findings.weights import measured_resave
from tracker.core.model import Finding, RevisionChange, Snapshot

CATEGORY = "diffusers"
INDEX = "model_index.json"
MAX_BYTES = 1024 * 1024
MAX_COMPONENTS = 64
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".ckpt", ".pt")
SCHEDULER_KEYS = {"_class_name", "beta_schedule", "beta_start", "beta_end", "timestep_spacing",
                  "num_train_timesteps", "steps_offset", "clip_sample", "rescale_betas_zero_snr", "set_alpha_to_one"}
DENOISER_KEYS = {"sample_size", "in_channels", "out_channels", "cross_attention_dim", "attention_head_dim",
                 "num_attention_heads", "block_out_channels", "layers_per_block", "patch_size", "num_layers",
                 "joint_attention_dim", "pooled_projection_dim", "_class_name"}
VAE_KEYS = {"scaling_factor", "shift_factor", "latent_channels", "block_out_channels", "sample_size", "_class_name"}
TEXT_ENCODERS = ("text_encoder", "text_encoder_2", "text_encoder_3")


def _load(inputs: RevisionInputs, snapshot: Snapshot, side: str, path: str) -> dict[str, Any] | None:
    loaded: dict[str, Any] | None = read_side_json(inputs, snapshot, side, path, max_bytes=MAX_BYTES)
    return loaded


def components(index: dict[str, Any]) -> dict[str, str]:
    """``{component: "library.Class"}`` from a parsed model_index.json; a null pair is ``"(none)"``."""
    out = {}
    for name, value in index.items():
        if name.startswith("_") or not isinstance(value, list) or len(value) != 2:
            continue
        library, cls = value
        out[str(name)[:100]] = f"{library}.{cls}" if library and cls else "(none)"
    if len(out) > MAX_COMPONENTS:
        raise Unreadable(f"{INDEX} lists {len(out):,} components, over the limit of {MAX_COMPONENTS}; not read")
    return out


def _finding(rules: SeverityRules, code: str, summary: str, path: str, *, before: Any = None, after: Any = None,
             **evidence: Any) -> Finding:
    return rules.finding(code, CATEGORY, summary, path=path, before=before, after=after, evidence=evidence)


def _compare_index(old: dict[str, Any], new: dict[str, Any], rules: SeverityRules) -> list[Finding]:
    out = []
    if old.get("_class_name") != new.get("_class_name"):
        out.append(_finding(rules, "diffusers.pipeline_class_changed",
                            f"{INDEX}: {change_summary('_class_name', old.get('_class_name'), new.get('_class_name'))}",
                            INDEX, before=old.get("_class_name"), after=new.get("_class_name")))
    a, b = components(old), components(new)
    for name in list(a) + [n for n in b if n not in a]:
        before, after = a.get(name), b.get(name)
        if before == after:
            continue
        if name == "safety_checker" and before not in (None, "(none)") and after in (None, "(none)"):
            out.append(_finding(rules, "diffusers.safety_checker_removed",
                                f"{INDEX}: safety_checker removed (was {before}): images are no longer screened",
                                INDEX, before=before, after=after, component=name))
            continue
        what = (f"{name} added: {after}" if before is None else f"{name} removed (was {before})" if after is None
                else f"{name}: {before} → {after}")
        out.append(_finding(rules, "diffusers.components_changed", f"{INDEX}: {what}", INDEX, before=before, after=after,
                            component=name))
    if old.get("requires_safety_checker") is True and new.get("requires_safety_checker") is False:
        out.append(_finding(rules, "diffusers.safety_checker_removed",
                            f"{INDEX}: requires_safety_checker: true → false", INDEX, before=True, after=False,
                            key="requires_safety_checker"))
    return out


def _compare_component(name: str, path: str, old: dict[str, Any], new: dict[str, Any],
                       rules: SeverityRules) -> list[Finding]:
    out = []
    if name in TEXT_ENCODERS:
        return [dataclasses.replace(f, path=path, summary=f"{path}: {f.summary}") for f in diff_configs(old, new, rules)]
    for key, before, after in flat_diff(old, new):
        top = key.split(".", 1)[0]
        if top in ("_diffusers_version",):
            continue
        if name == "scheduler" and top == "prediction_type":
            code = "diffusers.prediction_type_changed"
        elif name == "scheduler" and top in SCHEDULER_KEYS:
            code = "diffusers.scheduler_changed"
        elif name in ("unet", "transformer", "prior") and top in DENOISER_KEYS:
            code = "diffusers.denoiser_changed"
        elif name.startswith("vae") and top in VAE_KEYS:
            code = "diffusers.vae_changed"
        else:
            code = "diffusers.config_value_changed"
        out.append(_finding(rules, code, f"{path}: {change_summary(key, before, after)}", path,
                            before=json_value(before), after=json_value(after), key=key, component=name))
    return out


def _config_path(snapshot: Snapshot, name: str) -> str | None:
    for candidate in (f"{name}/scheduler_config.json", f"{name}/config.json"):
        if snapshot.get(candidate) is not None:
            return candidate
    return None


def _weights(change: RevisionChange, inputs: RevisionInputs, name: str, rules: SeverityRules) -> list[Finding]:
    """The component's weight files replaced in place, but for those measured as re-saved with the same values."""
    assert change.old is not None
    replaced = []
    for entry in change.new.files:
        if entry.path.startswith(f"{name}/") and entry.path.endswith(WEIGHT_SUFFIXES):
            before = change.old.get(entry.path)
            if before is not None and before.content_id != entry.content_id \
                    and not measured_resave(change, inputs, entry.path):
                replaced.append(entry.path)
    if not replaced:
        return []
    return [_finding(rules, "diffusers.component_weights_changed",
                     f"{name} weights replaced in place: {', '.join(replaced[:4])}"
                     + (f" and {len(replaced) - 4} more" if len(replaced) > 4 else ""),
                     replaced[0], component=name, files=replaced[:100])]


def pipeline_memory(snapshot: Snapshot, inputs: RevisionInputs, side: str,
                    names: list[str]) -> dict[str, int] | None:
    """``{component: bytes}`` of the components with default safetensors weights; None if a header is unreadable."""
    paths = [f.path for f in snapshot.files]
    out = {}
    for name in names:
        files = [p for p in paths if p.startswith(f"{name}/") and p.endswith(".safetensors")]
        if not files:
            continue
        headers = {p: inputs.safetensors_header(side, p) for p in files if p.count("/") == 1}
        try:
            size = component_bytes(files, name, headers)
        except ImplausibleHeader:
            return None  # the weights analyser reports the header itself
        if size is not None:
            out[name] = size
        elif any(h is None for h in headers.values()):
            return None
    return out


def _memory(change: RevisionChange, inputs: RevisionInputs, names: list[str],
            rules: SeverityRules) -> list[Finding]:
    assert change.old is not None
    if not any(file_changed(change, p) for p in {f.path for f in change.old.files} | {f.path for f in change.new.files}
               if p.endswith(".safetensors") and p.split("/", 1)[0] in names):
        return []
    before = pipeline_memory(change.old, inputs, "old", names)
    after = pipeline_memory(change.new, inputs, "new", names)
    if not before or not after or before == after:
        return []
    changed = [n for n in names if before.get(n) != after.get(n)]

    def size(sizes: dict[str, int], name: str) -> str:
        return fmt_bytes(sizes[name]) if name in sizes else "(none)"

    total_before, total_after = sum(before.values()), sum(after.values())
    parts = ", ".join(f"{n} {size(before, n)} → {size(after, n)}" for n in changed)
    return [_finding(rules, "diffusers.pipeline_memory_changed",
                     f"serving memory {fmt_bytes(total_before)} → {fmt_bytes(total_after)} ({parts})",
                     INDEX, before=total_before, after=total_after, components={n: [before.get(n), after.get(n)] for n in changed})]


def folder_view(snapshot: Snapshot, folder: str) -> Snapshot:
    """The files directly inside ``folder``, renamed as if at the root."""
    prefix = f"{folder}/"
    return Snapshot(files=tuple(dataclasses.replace(f, path=f.path[len(prefix):]) for f in snapshot.files
                                if f.path.startswith(prefix) and "/" not in f.path[len(prefix):]))


TOKENIZER_ANALYSERS = (tokenizer.analyse, slow_tokenizer.analyse, sentencepiece.analyse)


def _tokenizers(change: RevisionChange, inputs: RevisionInputs, folders: list[str],
                rules: SeverityRules) -> list[Finding]:
    """The tokenizer findings of each tokenizer folder, with the folder in their path and summary."""
    out = []
    for folder in folders:
        old = folder_view(change.old, folder) if change.old is not None else None
        new = folder_view(change.new, folder)
        if old is not None and old.by_path() == new.by_path():
            continue
        if not inputs.allows(f"the tokenizer folder {folder}/"):
            continue
        view = dataclasses.replace(change, old=old, new=new)
        folder_sources = inputs.in_folder(folder, old, new)
        for analyse_folder in TOKENIZER_ANALYSERS:
            for f in analyse_folder(view, folder_sources, rules):
                path = f"{folder}/{f.path}" if f.path else folder
                summary = (f"{folder}/{f.summary}" if f.path and f.summary.startswith(f.path)
                           else f"{path}: {f.summary}")
                out.append(dataclasses.replace(f, path=path, summary=summary))
    return out


@analyser(library=lib.DIFFUSERS, order=160)
def analyse(change: RevisionChange, inputs: RevisionInputs, rules: SeverityRules) -> list[Finding]:
    try:
        new_index = _load(inputs, change.new, "new", INDEX)
        new_components = components(new_index) if new_index is not None else {}
    except Unreadable as exc:
        return [_finding(rules, "diffusers.malformed", f"{exc}; DiffusionPipeline.from_pretrained fails", INDEX,
                         error=str(exc))]
    folders = [n for n in new_components if n.startswith("tokenizer")]
    tokenizer_findings = _tokenizers(change, inputs, folders, rules)
    if change.old is None or {f.path: f.content_id for f in change.old.files} == \
            {f.path: f.content_id for f in change.new.files}:
        return tokenizer_findings
    try:
        old_index = _load(inputs, change.old, "old", INDEX)
        old_components = components(old_index) if old_index is not None else {}
    except Unreadable:
        return tokenizer_findings  # the index was reported at the revision that broke it
    out: list[Finding] = tokenizer_findings
    if old_index is not None and new_index is not None:
        out += _compare_index(old_index, new_index, rules)
    for name in [n for n in new_components if n in old_components]:
        old_path, new_path = _config_path(change.old, name), _config_path(change.new, name)
        if old_path and new_path and change.old.get(old_path) != change.new.get(new_path):
            try:
                old_cfg = _load(inputs, change.old, "old", old_path)
                new_cfg = _load(inputs, change.new, "new", new_path)
            except Unreadable as exc:
                out.append(_finding(rules, "diffusers.malformed", f"{exc}; the {name} component fails to load",
                                    new_path, error=str(exc), component=name))
                continue
            if old_cfg is not None and new_cfg is not None:
                out += _compare_component(name, new_path, old_cfg, new_cfg, rules)
        out += _weights(change, inputs, name, rules)
    names = list(old_components) + [n for n in new_components if n not in old_components]
    out += _memory(change, inputs, names[:MAX_COMPONENTS], rules)
    return out
