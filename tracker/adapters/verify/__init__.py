"""Running the real library on two revisions of a repo: the edge behind ``tracker verify``.

* :mod:`.fetching` decides what may be downloaded (safetensors only, no remote code, within
  ``[verify] max_bytes`` and ``max_params``) and downloads it with huggingface_hub into a private cache;
* :mod:`.prompts` renders the sample conversations through each revision's chat template, in the
  tracker's template sandbox;
* :mod:`.runner` runs :mod:`.worker` in a subprocess with address-space, CPU-time and wall-clock
  limits and reads back its raw outputs;
* :mod:`.verifying` puts them together; the verdicts are pure (:mod:`tracker.core.verify`).

torch, transformers and sentence-transformers (the ``verify`` extra) are imported by the worker
process only: nothing here imports them.
"""
