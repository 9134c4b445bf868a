"""The verification process: loads each revision with the real library and writes its raw outputs.

Run by :mod:`tracker.adapters.verify.runner` as ``python -I worker.py MEMORY CPU`` with the request
as JSON on stdin. It lowers its own address space (``RLIMIT_AS``) and CPU time (``RLIMIT_CPU``)
before it imports torch, so a model that allocates past the cap ends in a MemoryError reported as
one line, and a run that computes for too long is killed by the kernel; the parent kills it at the
wall-clock limit. Hub access is off (``HF_HUB_OFFLINE``): it reads the folders the parent downloaded,
with ``use_safetensors=True`` and ``trust_remote_code=False``.

It imports only the standard library at the top, so that the limits are in force before anything
large is loaded. The answer is one JSON object written to the file the request names (the libraries
print to stdout as they please).
"""

from __future__ import annotations

import gc
import json
import os
import resource
import sys
import time
from importlib import metadata
from typing import Any

LIBRARIES = ("torch", "transformers", "sentence-transformers", "tokenizers", "safetensors")


def _limit(memory_bytes: int, cpu_seconds: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 5))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _versions() -> dict[str, str]:
    found = {}
    for name in LIBRARIES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def _device(name: str) -> Any:
    import torch

    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("no CUDA device is available to this process")
    return torch.device(name)


# -- per kind ------------------------------------------------------------------------------------


def _sentence_transformers(folder: str, texts: list[str], device: str) -> dict[str, Any]:
    from sentence_transformers import SentenceTransformer

    model: Any = SentenceTransformer(folder, device=device, trust_remote_code=False, local_files_only=True,
                                model_kwargs={"use_safetensors": True})
    # The index side is what a store holds (document-side prompts); the query side is encoded at search time.
    if hasattr(model, "encode_document"):
        index = model.encode_document(texts, convert_to_numpy=True)
        query = model.encode_query(texts, convert_to_numpy=True)
    else:  # sentence-transformers 3 and 4
        index = model.encode(texts, convert_to_numpy=True)
        prompt = "query" if "query" in (model.prompts or {}) else None
        query = model.encode(texts, prompt_name=prompt, convert_to_numpy=True)
    dim = int(index.shape[-1])
    return {"index": index.tolist(), "query": query.tolist(), "dim": dim,
            "prompts": dict(model.prompts or {})}


def _tokenizer(folder: str) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder, trust_remote_code=False, local_files_only=True)


def _encoder(folder: str, texts: list[str], device: str, classifier: bool) -> dict[str, Any]:
    import torch
    from transformers import AutoModel, AutoModelForSequenceClassification

    loader = AutoModelForSequenceClassification if classifier else AutoModel
    model: Any = loader.from_pretrained(folder, use_safetensors=True, trust_remote_code=False, local_files_only=True)
    model.to(device).eval()
    batch = _tokenizer(folder)(texts, padding=True, truncation=True, max_length=128, return_tensors="pt").to(device)
    with torch.no_grad():
        out = model(**batch, output_hidden_states=True)
    hidden = out.hidden_states[-1]
    mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)
    result: dict[str, Any] = {"hidden": pooled.float().cpu().tolist(), "dim": int(hidden.shape[-1])}
    if classifier:
        id2label = model.config.id2label
        result["labels"] = [str(id2label.get(int(i), i)) for i in out.logits.argmax(-1).tolist()]
    return result


def _causal_lm(folder: str, prompts: list[str], device: str, reference: list[Any] | None) -> dict[str, Any]:
    """Next-token distributions of each prompt; with ``reference`` (the old side's log-probabilities),
    KL(old || new) per prompt over the vocabulary both share."""
    import torch
    from transformers import AutoModelForCausalLM

    tokenizer = _tokenizer(folder)
    model: Any = AutoModelForCausalLM.from_pretrained(folder, use_safetensors=True, trust_remote_code=False,
                                                 local_files_only=True)
    model.to(device).eval()
    top1: list[str] = []
    logprobs: list[Any] = []
    kls: list[float] = []
    for number, prompt in enumerate(prompts):
        ids = tokenizer(prompt, return_tensors="pt", add_special_tokens=False).to(device)
        with torch.no_grad():
            logits = model(**ids).logits[0, -1].float()
        lp = torch.log_softmax(logits, -1).cpu()
        top1.append(str(tokenizer.convert_ids_to_tokens(int(lp.argmax()))))
        if reference is None:
            logprobs.append(lp)
        else:
            old = reference[number]
            n = min(old.shape[0], lp.shape[0])
            p_old = torch.log_softmax(old[:n], -1)
            p_new = torch.log_softmax(lp[:n], -1)
            kls.append(float((p_old.exp() * (p_old - p_new)).sum()))
    return {"top1": top1, "kl": kls, "dim": int(model.config.vocab_size), "logprobs": logprobs}


def _tokenizer_ids(folder: str, texts: list[str]) -> dict[str, Any]:
    tokenizer = _tokenizer(folder)
    return {"ids": [list(map(int, tokenizer(t)["input_ids"])) for t in texts]}


def _run_side(request: dict[str, Any], side: str, reference: Any = None) -> dict[str, Any]:
    kind, folder, device = request["kind"], request[f"{side}_folder"], request["device"]
    texts = request["texts"]
    if kind == "sentence-transformers":
        return _sentence_transformers(folder, texts, device)
    if kind in ("transformers-encoder", "transformers-classifier"):
        return _encoder(folder, texts, device, kind == "transformers-classifier")
    if kind == "transformers-causal-lm":
        result = _causal_lm(folder, request[f"{side}_prompts"], device, reference)
        return {**result, "rendered": request.get(f"{side}_rendered")}
    if kind == "tokenizer":
        return _tokenizer_ids(folder, texts)
    raise ValueError(f"unknown kind {kind!r}")


def run(request: dict[str, Any]) -> dict[str, Any]:
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(int(request.get("threads") or 1))
    _device(request["device"])
    started = time.monotonic()
    old = _run_side(request, "old")
    reference = old.pop("logprobs", None)
    gc.collect()
    new = _run_side(request, "new", reference)
    new.pop("logprobs", None)
    del reference
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"ok": True, "old": old, "new": new, "libraries": _versions(),
            "seconds": round(time.monotonic() - started, 3), "peak_rss_bytes": peak}


def _failure(exc: BaseException) -> dict[str, Any]:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    memory = isinstance(exc, MemoryError) or "can't allocate memory" in text or "std::bad_alloc" in text
    return {"ok": False, "error": "memory" if memory else "failed", "message": f"{type(exc).__name__}: {text}"[:500]}


def main() -> None:
    memory, cpu = int(sys.argv[1]), int(sys.argv[2])
    _limit(memory, cpu)
    request = json.loads(sys.stdin.read())
    try:
        answer = run(request)
    except (Exception, MemoryError) as exc:  # everything reaches the parent as one line
        answer = _failure(exc)
    with open(request["answer"], "w", encoding="utf-8") as out:
        json.dump(answer, out)
    sys.stdout.flush()
    os._exit(0)  # skip the libraries' exit handlers (thread pools): the answer is written


if __name__ == "__main__":
    main()
