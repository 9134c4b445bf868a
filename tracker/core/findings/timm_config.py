"""timm: ``pretrained_cfg`` (and the head's ``num_classes``) in ``config.json``. See preprocessing.py."""

from __future__ import annotations

from tracker.core.findings import libraries as lib
from tracker.core.findings import preprocessing
from tracker.core.findings.inputs import RevisionInputs
from tracker.core.findings.libraries import TIMM
from tracker.core.findings.registry import analyser
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import Finding, RevisionChange


@analyser(library=lib.TIMM, order=170)
def analyse(change: RevisionChange, inputs: RevisionInputs, rules: SeverityRules) -> list[Finding]:
    return preprocessing.analyse_file(change, inputs, rules, path="config.json",
                                      sections={"pretrained_cfg": "pretrained_cfg", "": ""}, library=TIMM,
                                      report_malformed=False)  # config.malformed says it
