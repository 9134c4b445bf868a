"""``tracker audit``: which model revisions a machine's Hugging Face cache holds, and which carry advisories.

``cache`` walks the cache with huggingface_hub's layout rules, never out of it; the revisions are
looked up through the scan's own door to the tracker (``tracker.pipeline.scan.source``), with the same
suggestion rule (``tracker.pipeline.scan.advice``); ``report`` renders text, JSON and SARIF and decides
the exit status; the CycloneDX ML-BOM is the scan's (``tracker.pipeline.scan.cyclonedx``).
"""
