"""The Hub adapter: the only package that imports huggingface_hub."""

from tracker.hub.client import CommitListing, Head, HubClient, OwnerListing, RejectedPath, RepoInfo

__all__ = ["CommitListing", "Head", "HubClient", "OwnerListing", "RejectedPath", "RepoInfo"]
