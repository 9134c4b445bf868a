"""``tracker verify REPO OLD NEW``: run both revisions with the real library and say what moved.

The command parses and prints; the run is :func:`tracker.adapters.verify.verifying.verify_revisions`
(docs/verify.md). Exit status: 0 with a measurement (whatever its verdict, "not verifiable" included),
1 when the run could not happen (the extra is missing, a limit was breached), 2 on bad usage.
"""

from __future__ import annotations

import re

import click

from tracker.core import verify
from tracker.surfaces.cli import Context, emit_json, fail_cleanly, main, parse_repo_id

_PARAMS_RE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmbt]?)", re.IGNORECASE)
_SCALE = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9, "t": 10**12}


def parse_params(text: str) -> int:
    """``1B``, ``500M``, ``1.5b`` or a plain count of parameters."""
    match = _PARAMS_RE.fullmatch(text.strip())
    if not match or float(match.group(1)) <= 0:
        raise click.BadParameter(f"{text!r:.40} is not a parameter count: use e.g. 1B, 500M or 7000000")
    return int(float(match.group(1)) * _SCALE[match.group(2).lower()])


def _side_lines(name: str, side: verify.SideMeasure) -> list[str]:
    return [f"{name}: mean cosine {side.mean_cosine:.6f}, minimum {side.min_cosine:.6f}, "
            f"largest relative L2 change {side.max_relative_l2:.6f}, "
            f"{side.moved} of {side.samples} samples moved"]


def text_lines(result: verify.Measurement) -> list[str]:
    """The measurement as the command prints it without ``--json``."""
    lines = [f"verdict: {result.verdict}"]
    if result.reason:
        lines.append(f"why: {result.reason}")
    if not result.verifiable:
        return lines
    lines.append(f"measured: {result.kind} on {result.samples} samples ({result.device})")
    for name, side in result.sides.items():
        lines += _side_lines({"index": "index side", "query": "query side", "hidden": "hidden states"}[name], side)
    if result.dimension is not None and result.kind == verify.SENTENCE_TRANSFORMERS:
        lines.append(f"dimension: {result.dimension[0]} -> {result.dimension[1]}")
    for key, value in result.figures.items():
        shown = f"{value:.6f}" if isinstance(value, float) else value
        lines.append(f"{key.replace('_', ' ')}: {shown}")
    lines.append("libraries: " + ", ".join(f"{k} {v}" for k, v in sorted(result.libraries.items())))
    return lines


@main.command("verify")
@click.argument("repo")
@click.argument("old")
@click.argument("new")
@click.option("--json", "as_json", is_flag=True, help="Print the measurement as JSON.")
@click.option("--samples", type=click.IntRange(1, 1000), default=None,
              help="Sample texts or prompts to run (default: [verify] samples).")
@click.option("--max-params", "max_params", default=None, metavar="COUNT",
              help="Largest model to run, e.g. 1B or 500M (default: [verify] max_params).")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default=None,
              help="Where to run the models (default: [verify] device).")
@click.pass_obj
@fail_cleanly
def verify_command(obj: Context, *, repo: str, old: str, new: str, as_json: bool, samples: int | None,
                   max_params: str | None, device: str | None) -> None:
    """Run revisions OLD and NEW of REPO with the library it is loaded with and measure what moved.

    Downloads safetensors weights only (never a pickle), never runs the repo's own code, and runs the
    models in a process limited in memory, CPU time and wall clock ([verify] in the config).
    """
    from tracker.services.verifying import VerifyAsked, verify

    repo_id = parse_repo_id(repo)
    asked = VerifyAsked(samples=samples, device=device,
                        max_params=parse_params(max_params) if max_params is not None else None)
    result = verify(obj.settings, repo_id, old, new, asked)  # ConfigError: a bad OLD or NEW, exit 2
    if as_json:
        emit_json(result.to_json())
        return
    click.echo(f"{repo_id}: {result.old_sha[:12]} -> {result.new_sha[:12]}")
    for line in text_lines(result.measurement):
        click.echo(line)
