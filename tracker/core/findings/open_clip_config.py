"""open_clip: ``preprocess_cfg`` and ``model_cfg`` in ``open_clip_config.json``. See preprocessing.py."""

from __future__ import annotations

from tracker.core.findings import libraries as lib
from tracker.core.findings import preprocessing
from tracker.core.findings.inputs import RevisionInputs
from tracker.core.findings.libraries import OPEN_CLIP
from tracker.core.findings.registry import analyser
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import Finding, RevisionChange


@analyser(library=lib.OPEN_CLIP, order=180)
def analyse(change: RevisionChange, inputs: RevisionInputs, rules: SeverityRules) -> list[Finding]:
    return preprocessing.analyse_file(change, inputs, rules, path="open_clip_config.json",
                                      sections={"preprocess_cfg": "preprocess_cfg", "model_cfg": "model_cfg"},
                                      library=OPEN_CLIP)
