"""The GPU cards the estimator sizes against, as data.

Memory and list prices are the issue's (GB are decimal, 1e9 bytes: that is the
unit that reproduces the reference page's serving column exactly, e.g. e5-large
on H200 gives 2404 and not 2583).  Peak dense bf16 tensor throughput and memory
bandwidth are the vendors' datasheet figures; they only feed the roofline cost,
which the page states without numbers, so they are our documented choice:

- T4 has no bf16 tensor cores; its fp16 tensor peak (65 TFLOPS) stands in.
- A10G: AWS/NVIDIA's 70 TFLOPS dense bf16 figure for the cloud SKU, 600 GB/s.
- A100: 312 TFLOPS dense bf16; 1555 GB/s (40 GB) and 2039 GB/s (80 GB SXM).
- L40S: 362 TFLOPS dense bf16, 864 GB/s.  L4: 121 TFLOPS, 300 GB/s.
- H100 SXM: 989 TFLOPS dense bf16, 3350 GB/s.  H200: 989 TFLOPS, 4800 GB/s.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Card:
    """One priced GPU: ``gb`` decimal gigabytes, ``usd_per_hour`` list price per GPU-hour."""

    name: str
    label: str  # how the page names it in the memory table
    gb: int
    usd_per_hour: float
    peak_tflops_bf16: float
    bandwidth_gb_s: float

    @property
    def bytes(self) -> int:
        return self.gb * 10**9


CARDS: tuple[Card, ...] = (
    Card("T4", "T4 16 GB", 16, 0.59, 65.0, 320.0),
    Card("L4", "L4 24 GB", 24, 0.80, 121.0, 300.0),
    Card("A10G", "A10G 24 GB", 24, 1.10, 70.0, 600.0),
    Card("A100-40", "A100 40 GB", 40, 2.10, 312.0, 1555.0),
    Card("L40S", "L40S 48 GB", 48, 1.95, 362.0, 864.0),
    Card("A100-80", "A100 80 GB", 80, 2.50, 312.0, 2039.0),
    Card("H100", "H100 80 GB", 80, 3.95, 989.0, 3350.0),
    Card("H200", "H200 141 GB", 141, 4.54, 989.0, 4800.0),
)

CARDS_BY_NAME = {c.name: c for c in CARDS}
