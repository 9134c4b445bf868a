"""The Hub adapter: the only package that imports huggingface_hub."""

from tracker.hub.client import (
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
