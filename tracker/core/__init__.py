"""The pure core: diffing, findings, the estimator, advisories. No I/O."""
