"""Licence and access terms from the README's YAML front matter.

The Hub takes a model's licence, gating prompt and lineage from the block
between the README's leading ``---`` lines. A change there can make a model a
user ships unusable for them (``apache-2.0`` → ``cc-by-nc-4.0``) without a
single weight changing, so it is tracked like code:

* ``licence.more_restrictive`` (high): the licence moved to a stricter tier
  of :data:`LICENCE_TIERS` (permissive < share-alike < restricted-use).
* ``licence.relaxed`` (low): the licence moved to a looser tier.
* ``licence.changed`` (moderate): any other change of ``license``,
  ``license_name`` or ``license_link`` (within a tier).
* ``licence.gating_added/removed/changed``: ``extra_gated_*`` fields, the
  terms a user must accept before downloading.
* ``licence.base_model_changed``: the declared lineage (which also decides
  whose licence terms are inherited).
* ``licence.pipeline_tag_changed`` / ``licence.library_name_changed`` (info).
* ``licence.front_matter_malformed``: the block does not parse; the Hub then
  shows no metadata at all, so a licence silently disappears.
* ``licence.detected`` (info): the terms on the first revision read.

The YAML is parsed by :func:`tracker.core.bounded.load_yaml`: a safe loader (no
Python tags) that bounds nesting depth and the expanded size of the document,
aliases and merge keys (``<<``) counted in full, so an alias bomb (tiny on disk,
exponential to walk), wherever its aliases sit (values, mapping keys, merges),
is refused as it is composed; over-long numbers stay text. The block is also
size-capped. Pure: reads only through ``inputs``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from tracker.core.bounded import UntrustedInput, load_yaml
from tracker.core.findings.inputs import RevisionInputs
from tracker.core.findings.registry import analyser
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import Finding, RevisionChange

CATEGORY = "licence"
README = "README.md"
MAX_FRONT_MATTER_BYTES = 256 * 1024
"""Real model cards' front matter is a few kB; long dataset lists stay far below this."""

PERMISSIVE, SHARE_ALIKE, RESTRICTED = 0, 1, 2
TIER_NAMES = {PERMISSIVE: "permissive", SHARE_ALIKE: "share-alike", RESTRICTED: "restricted"}

# Hub licence ids by tier. Permissive: use for anything, keep the notice.
# Share-alike: use for anything, derivatives under the same terms.
# Restricted: everything else: non-commercial, no-derivatives, use-based
# restrictions (RAIL), vendor licences (llama*, gemma), "other" and "unknown".
# Ids not listed here are treated as restricted and marked "unclassified".
LICENCE_TIERS: dict[str, int] = {
    **dict.fromkeys(
        ("apache-2.0", "mit", "afl-3.0", "artistic-2.0", "bsl-1.0", "bsd", "bsd-2-clause", "bsd-3-clause",
         "bsd-3-clause-clear", "cc0-1.0", "cc-by-2.0", "cc-by-2.5", "cc-by-3.0", "cc-by-4.0",
         "cdla-permissive-1.0", "cdla-permissive-2.0", "wtfpl", "ecl-2.0", "etalab-2.0", "isc", "ms-pl",
         "odc-by", "openmdw-1.0", "postgresql", "ncsa", "unlicense", "zlib", "pddl"),
        PERMISSIVE,
    ),
    **dict.fromkeys(
        ("cc-by-sa-3.0", "cc-by-sa-4.0", "cdla-sharing-1.0", "epl-1.0", "epl-2.0", "eupl-1.1", "eupl-1.2",
         "agpl-3.0", "gfdl", "gpl", "gpl-2.0", "gpl-3.0", "lgpl", "lgpl-2.1", "lgpl-3.0", "lppl-1.3c",
         "mpl-2.0", "odbl", "osl-3.0", "ofl-1.1"),
        SHARE_ALIKE,
    ),
    **dict.fromkeys(
        ("openrail", "openrail++", "bigscience-openrail-m", "creativeml-openrail-m", "bigscience-bloom-rail-1.0",
         "bigcode-openrail-m", "cc-by-nc-2.0", "cc-by-nc-3.0", "cc-by-nc-4.0", "cc-by-nd-4.0", "cc-by-nc-nd-3.0",
         "cc-by-nc-nd-4.0", "cc-by-nc-sa-2.0", "cc-by-nc-sa-3.0", "cc-by-nc-sa-4.0", "c-uda", "cc",
         "apple-ascl", "apple-amlr", "intel-research", "h-research", "lgpl-lr", "deepfloyd-if-license",
         "fair-noncommercial-research-license", "llama2", "llama3", "llama3.1", "llama3.2", "llama3.3", "llama4",
         "gemma", "other", "unknown"),
        RESTRICTED,
    ),
}

LICENCE_KEYS = ("license", "license_name", "license_link")
INFO_KEYS = {"pipeline_tag": "licence.pipeline_tag_changed", "library_name": "licence.library_name_changed"}


def front_matter(readme: bytes) -> tuple[dict[str, Any], str | None]:
    """``(metadata, problem)``: the parsed block ({} if none) and why it is unusable, if it is."""
    try:
        text = readme.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return {}, f"README is not valid UTF-8 ({exc.reason} at byte {exc.start})"
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return {}, None  # no front matter: nothing declared, nothing malformed
    size = 0
    for i, line in enumerate(lines[1:], start=1):
        if line.strip() == "---":
            block = "".join(lines[1:i])
            break
        size += len(line.encode())
        if size > MAX_FRONT_MATTER_BYTES:
            return {}, f"front matter larger than {MAX_FRONT_MATTER_BYTES:,} bytes"
    else:
        return {}, "front matter has no closing '---' line"
    try:
        data = load_yaml(block, max_bytes=MAX_FRONT_MATTER_BYTES)
    except UntrustedInput as exc:
        return {}, f"YAML refused: {exc}"
    except yaml.YAMLError as exc:
        return {}, f"YAML error: {' '.join(str(exc).split())[:300]}"
    except (ValueError, RecursionError) as exc:  # a last line of defence: the loader bounds both
        return {}, f"YAML unreadable: {type(exc).__name__}"
    if data is None:
        return {}, None
    if not isinstance(data, dict):
        return {}, f"front matter is a {type(data).__name__}, not a mapping"
    return {str(k): v for k, v in data.items()}, None


def tier(licence: Any) -> tuple[int, bool]:
    """``(tier, classified)``; a list of licences (a choice) takes the least restrictive; none = restricted."""
    if licence is None or licence == [] or licence == "":
        return RESTRICTED, True  # no licence grants no rights
    ids = licence if isinstance(licence, list) else [licence]
    tiers = [LICENCE_TIERS.get(str(i).strip().lower()) for i in ids]
    known = [t for t in tiers if t is not None]
    return (min(known) if known else RESTRICTED), len(known) == len(tiers)


def _show(value: Any) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, list):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value)


def _json(value: Any) -> Any:
    """YAML may yield dates and sets; findings must be JSON-able."""
    if isinstance(value, Mapping):
        return {str(k): _json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_json(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


@analyser(library=None, order=130)
def analyse(change: RevisionChange, inputs: RevisionInputs, rules: SeverityRules) -> list[Finding]:
    old_entry = change.old.get(README) if change.old is not None else None
    new_entry = change.new.get(README)
    if change.old is not None and (
        (old_entry is None and new_entry is None)
        or (old_entry is not None and new_entry is not None and old_entry.content_id == new_entry.content_id)
    ):
        return []
    out: list[Finding] = []
    new_meta: dict[str, Any] = {}
    problem: str | None = None
    if new_entry is not None:
        raw = inputs.text("new", README)
        if raw is None:
            return []  # unreadable: the reader recorded why; do not guess
        new_meta, problem = front_matter(raw)
    if problem:
        out.append(rules.finding(
            "licence.front_matter_malformed", CATEGORY,
            f"README.md front matter unusable, so the Hub shows no licence or metadata: {problem}",
            path=README, after=problem,
        ))
    if change.old is None:
        return out + _detected(new_meta, rules)
    old_meta: dict[str, Any] = {}
    if old_entry is not None:
        raw_old = inputs.text("old", README)
        if raw_old is None:
            return out
        old_meta, _ = front_matter(raw_old)  # a malformed old block showed no metadata either
    return out + _compare(_json(old_meta), _json(new_meta), rules)


def _detected(meta: Mapping[str, Any], rules: SeverityRules) -> list[Finding]:
    meta = _json(meta)
    licence = meta.get("license")
    t, classified = tier(licence)
    gated = sorted(k for k in meta if k.startswith("extra_gated_"))
    return [rules.finding(
        "licence.detected", CATEGORY,
        f"licence: {_show(licence)} ({TIER_NAMES[t]}{'' if classified else ', unclassified'})"
        + ("; gated" if gated else ""),
        path=README, after=licence,
        evidence={"tier": TIER_NAMES[t], "gating_fields": gated,
                  **{k: meta.get(k) for k in ("license_name", "license_link", "base_model") if k in meta}},
    )]


def _compare(old: Mapping[str, Any], new: Mapping[str, Any], rules: SeverityRules) -> list[Finding]:
    out: list[Finding] = []
    changed = [k for k in LICENCE_KEYS if old.get(k) != new.get(k)]
    if changed:
        t_old, c_old = tier(old.get("license"))
        t_new, c_new = tier(new.get("license"))
        code = ("licence.more_restrictive" if t_new > t_old else "licence.relaxed" if t_new < t_old
                else "licence.changed")
        parts = [f"{k}: {_show(old.get(k))} → {_show(new.get(k))}" for k in changed]
        summary = "; ".join(parts)
        if t_new != t_old:
            summary += f" ({TIER_NAMES[t_old]} → {TIER_NAMES[t_new]})"
        out.append(rules.finding(
            code, CATEGORY, summary, path=README,
            before={k: old.get(k) for k in LICENCE_KEYS if k in old},
            after={k: new.get(k) for k in LICENCE_KEYS if k in new},
            evidence={"tier_before": TIER_NAMES[t_old], "tier_after": TIER_NAMES[t_new],
                      "classified": c_old and c_new, "changed_keys": changed},
        ))
    gate_old = {k: v for k, v in old.items() if k.startswith("extra_gated_")}
    gate_new = {k: v for k, v in new.items() if k.startswith("extra_gated_")}
    if gate_old != gate_new:
        keys = sorted(k for k in set(gate_old) | set(gate_new) if gate_old.get(k) != gate_new.get(k))
        if not gate_old:
            code, summary = "licence.gating_added", f"access gating introduced: {', '.join(sorted(gate_new))}"
        elif not gate_new:
            code, summary = "licence.gating_removed", f"access gating removed: {', '.join(sorted(gate_old))}"
        else:
            code, summary = "licence.gating_changed", f"access gating terms changed: {', '.join(keys)}"
        out.append(rules.finding(code, CATEGORY, summary, path=README, before=gate_old or None,
                                 after=gate_new or None, evidence={"changed_keys": keys}))
    if old.get("base_model") != new.get("base_model"):
        out.append(rules.finding(
            "licence.base_model_changed", CATEGORY,
            f"base_model: {_show(old.get('base_model'))} → {_show(new.get('base_model'))}",
            path=README, before=old.get("base_model"), after=new.get("base_model"),
        ))
    for key, code in INFO_KEYS.items():
        if old.get(key) != new.get(key):
            out.append(rules.finding(
                code, CATEGORY, f"{key}: {_show(old.get(key))} → {_show(new.get(key))}",
                path=README, before=old.get(key), after=new.get(key),
            ))
    return out
