"""Orchestration: polling, processing a revision, querying, the cycle, scan and audit."""
