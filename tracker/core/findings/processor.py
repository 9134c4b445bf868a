"""Multimodal processor configs: what the model now sees of an image, a video or a sound.

``processor_config.json``, ``preprocessor_config.json`` (image processors and audio
feature extractors) and ``video_preprocessor_config.json`` decide how pixels and
samples become the tensors and placeholder tokens a multimodal model receives.
A text-model diff never looks at them, yet changing the number of image tokens,
the patch size, the feature-selection strategy or the normalisation silently
changes every multimodal prompt. Each changed key is one finding; its code says
what it changes:

* ``processor.image_tokens_changed`` (high): how many placeholder tokens an image
  takes (``num_image_tokens``, ``image_seq_length``, ``mm_tokens_per_image``...);
  prompts built for the old count no longer line up with the features;
* ``processor.image_token_changed`` (high): the placeholder token itself
  (``image_token``, ``image_token_index``, ``boi_token``...);
* ``processor.patch_size_changed`` (high): ``patch_size``, ``merge_size``,
  ``temporal_patch_size``: the grid the vision tower sees;
* ``processor.feature_selection_changed`` (high): ``vision_feature_select_strategy``,
  ``vision_feature_layer``;
* ``processor.normalisation_changed`` (high): ``image_mean``/``image_std``,
  ``rescale_factor``, ``do_normalize``...: other pixel values reach the model;
* ``processor.audio_features_changed`` (high): sampling rate, mel bins, FFT, hop;
* ``processor.image_size_changed`` (moderate): resize, crop, pixel budgets, tiling;
* ``processor.video_sampling_changed`` (moderate): frames sampled per video;
* ``processor.class_changed`` (moderate): another processor class loads;
* ``processor.value_changed`` (low): any other key;
* ``processor.malformed`` (high): the file no longer parses; loading the processor fails.

Keys nested in a combined ``processor_config.json`` (``image_processor.size``) are
judged by their last component. Pure: reads only through ``inputs``.
"""

from __future__ import annotations

from typing import Any

from tracker.core.findings import libraries as lib
from tracker.core.findings.config import (
    JsonProblem,
    change_summary,
    file_changed,
    flat_diff,
    json_value,
    load_json_object,
)
from tracker.core.findings.inputs import RevisionInputs
from tracker.core.findings.registry import analyser
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import Finding, RevisionChange

CATEGORY = "processor"
PATHS = ("processor_config.json", "preprocessor_config.json", "video_preprocessor_config.json")
MAX_BYTES = 4 * 1024 * 1024

_GROUPS: dict[str, tuple[str, ...]] = {
    "processor.image_tokens_changed": (
        "num_image_tokens", "image_seq_length", "image_seq_len", "mm_tokens_per_image", "num_query_tokens",
        "tokens_per_image", "num_additional_image_tokens", "max_image_tiles", "image_token_count",
        "num_video_tokens", "video_seq_length", "tokens_per_frame",
    ),
    "processor.image_token_changed": (
        "image_token", "image_token_index", "image_token_id", "video_token", "video_token_index",
        "video_token_id", "boi_token", "eoi_token", "image_start_token", "image_end_token",
        "vision_start_token", "vision_end_token", "image_break_token", "image_end_token_id",
        "fake_image_token", "global_image_token",
    ),
    "processor.patch_size_changed": ("patch_size", "merge_size", "temporal_patch_size", "spatial_merge_size"),
    "processor.feature_selection_changed": ("vision_feature_select_strategy", "vision_feature_layer"),
    "processor.normalisation_changed": (
        "image_mean", "image_std", "do_normalize", "rescale_factor", "do_rescale", "do_convert_rgb",
        "norm_mean", "norm_std",
    ),
    "processor.audio_features_changed": (
        "sampling_rate", "feature_size", "n_fft", "hop_length", "num_mel_bins", "chunk_length", "n_samples",
        "nb_max_frames", "padding_value", "win_length", "mel_floor",
    ),
    "processor.image_size_changed": (
        "size", "crop_size", "image_size", "shortest_edge", "longest_edge", "height", "width", "min_pixels",
        "max_pixels", "do_resize", "do_center_crop", "resample", "do_pad", "do_pan_and_scan",
        "pan_and_scan_min_crop_size", "pan_and_scan_max_num_crops", "pan_and_scan_min_ratio_to_activate",
        "do_image_splitting", "image_grid_pinpoints", "max_image_size", "max_dynamic_patch", "min_dynamic_patch",
        "use_thumbnail", "crop_to_patches", "min_patches", "max_patches",
    ),
    "processor.video_sampling_changed": ("fps", "num_frames", "max_frames", "min_frames", "do_sample_frames"),
    "processor.class_changed": (
        "processor_class", "image_processor_type", "feature_extractor_type", "video_processor_type",
        "image_processor_class",
    ),
}
CODE_OF_KEY = {key: code for code, keys in _GROUPS.items() for key in keys}
# chat templates carried in processor_config.json belong to the chat template analyser
SKIPPED = frozenset({"chat_template"})


def code_for(dotted: str) -> str:
    """The finding code for a changed key path: by its last component that has a meaning here.

    ``size.shortest_edge`` and ``image_processor.size`` are image-size changes;
    an unknown leaf under a known parent (``size.foo``) takes the parent's code.
    """
    for part in reversed(dotted.split(".")):
        if part in CODE_OF_KEY:
            return CODE_OF_KEY[part]
    return "processor.value_changed"


@analyser(library=lib.TRANSFORMERS, order=110)
def analyse(change: RevisionChange, inputs: RevisionInputs, rules: SeverityRules) -> list[Finding]:
    findings: list[Finding] = []
    for path in PATHS:
        if not file_changed(change, path):
            continue
        new = _load(inputs, "new", path, rules, findings)
        if new is None or change.old is None:
            continue
        old = _load(inputs, "old", path, None, findings)
        if old is None:
            continue  # added now, or the old one was broken (reported then): nothing to compare
        findings += diff_processor(path, old, new, rules)
    return findings


def _load(inputs: RevisionInputs, side: str, path: str, rules: SeverityRules | None,
          findings: list[Finding]) -> dict[str, Any] | None:
    data = inputs.text(side, path)
    if data is None:
        return None
    try:
        return load_json_object(data, max_bytes=MAX_BYTES)
    except JsonProblem as exc:
        if rules is not None:
            findings.append(rules.finding(
                "processor.malformed", CATEGORY, f"{path} cannot be parsed: {exc}; loading the processor fails",
                path=path, evidence={"error": str(exc)},
            ))
        return None


def diff_processor(path: str, old: dict[str, Any], new: dict[str, Any], rules: SeverityRules) -> list[Finding]:
    """One finding per changed key of two parsed processor configs."""
    out: list[Finding] = []
    for key, before, after in flat_diff(
        {k: v for k, v in old.items() if k not in SKIPPED}, {k: v for k, v in new.items() if k not in SKIPPED}
    ):
        out.append(rules.finding(
            code_for(key), CATEGORY, f"{path}: {change_summary(key, before, after)}",
            path=path, before=json_value(before), after=json_value(after), evidence={"key": key},
        ))
    return out
