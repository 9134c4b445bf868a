"""The Hub adapter: the only package that imports huggingface_hub. What it answers are values of
``tracker.core.hub_types``."""

from tracker.adapters.hub.client import HubClient

__all__ = ["HubClient"]
