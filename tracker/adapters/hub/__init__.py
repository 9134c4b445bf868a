"""The Hub adapter: the only package that imports huggingface_hub."""

from tracker.adapters.hub.client import (
    ChangeListing,
    CommitListing,
    Head,
    HubClient,
    ListedModel,
    MatchListing,
    OwnerListing,
    RejectedPath,
    RepoInfo,
)

__all__ = ["ChangeListing", "CommitListing", "Head", "HubClient", "ListedModel", "MatchListing", "OwnerListing", "RejectedPath",
           "RepoInfo"]
