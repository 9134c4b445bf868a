"""upstream-tracker: watch model repositories on the Hugging Face Hub and report what changed."""

__version__ = "0.1.0"
