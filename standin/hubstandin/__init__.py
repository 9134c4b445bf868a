"""Local stand-in for the Hugging Face Hub: git repos on disk served over the Hub's HTTP API.

Tests of the tracker run the real ``huggingface_hub`` client against it. Start with
:class:`HubStandin` (builder API, request log, fault injection) or the pytest fixture
``hub_standin`` from :mod:`hubstandin.pytest_plugin`; from a shell, run
``python -m hubstandin --root DIR``.
"""

from .gitrepos import Entry, LfsPointer, RepoStore, lfs_pointer
from .hub import Fault, FaultSet, HubStandin, RequestRecord, build_app

__all__ = [
    "Entry",
    "Fault",
    "FaultSet",
    "HubStandin",
    "LfsPointer",
    "RepoStore",
    "RequestRecord",
    "build_app",
    "lfs_pointer",
]
