"""OSV advisories for upstream changes: ids, builders, commit-graph semantics, validation, export.

Everything in this package is pure (no I/O, no clock): the store, the Hub
adapter and the API feed it data and persist what it returns.
"""

from tracker.core.advisory.affected import (
    affected_commits,
    ancestors,
    commit_affected,
    record_affected_commits,
)
from tracker.core.advisory.build import (
    CLASSIFICATION,
    REPO_EVENTS,
    advisory_events,
    build_revision_advisories,
    build_revision_advisory,
    classify,
    format_timestamp,
    mark_fixed,
    range_events,
    repo_event_advisory,
    split_findings,
    with_versions,
    withdraw,
)
from tracker.core.advisory.export import build_all_zip, export_files
from tracker.core.advisory.ids import advisory_id, inherited_id, is_advisory_id, repo_event_id
from tracker.core.advisory.validate import AdvisoryValidationError, validate

__all__ = [
    "CLASSIFICATION",
    "REPO_EVENTS",
    "AdvisoryValidationError",
    "advisory_events",
    "advisory_id",
    "affected_commits",
    "ancestors",
    "commit_affected",
    "build_all_zip",
    "build_revision_advisories",
    "build_revision_advisory",
    "classify",
    "export_files",
    "format_timestamp",
    "inherited_id",
    "is_advisory_id",
    "mark_fixed",
    "range_events",
    "record_affected_commits",
    "repo_event_advisory",
    "repo_event_id",
    "split_findings",
    "validate",
    "with_versions",
    "withdraw",
]
