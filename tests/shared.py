"""Where the real-data fixtures live (copied from the project's shared material, with provenance)."""

from pathlib import Path

SHARED = Path(__file__).resolve().parent / "fixtures" / "shared"
REALDATA = SHARED / "realdata"
INCIDENTS = REALDATA / "incidents"
CONFIGS = REALDATA / "configs"
OSV_RECORDS = SHARED / "osv" / "pypi"
OSV_EXAMPLES = SHARED / "osv" / "examples"
SEED_PAGE = SHARED / "seed" / "000_c006f5c1dcac5663.txt"
