"""Benchmark: diffing two 256k-token BPE tokenizer.json files that differ in 100 tokens.

Measures, in the same run and on the same two parsed documents:
  * ours    -- ``tracker.core.findings.tokenizer.diff_tokenizer_json`` (vocab, merges, added tokens,
               components; set/dict operations),
  * deepdiff -- ``DeepDiff(old, new)`` on the same two parsed dicts (whole documents), run in a
               child process with a cutoff; if it hits the cutoff the ratio printed is a lower bound.
Also printed, for context (not part of the ratio): json.loads of both files.

Drift (issue 14): tokenization drift per change, as polling meets it: the old side was
encoded when its own revision was analysed (each content is encoded once), so a change
costs one pruned load and encode of the new side plus the comparison. Printed beside it:
the first revision (both sides cold) and the full-file ``Tokenizer.from_str`` it replaces.

Goals: ours under 2 s and at least 50x faster than DeepDiff (issue 3); drift under 0.5 s per
change at 256k tokens (issue 14).

    python bench/bench_tokenizer_diff.py [--tokens 256000] [--changed 100] [--cutoff 300]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tracker.core.findings import tokenizer as tok
from tracker.core.findings.rules import SeverityRules
from tracker.core.findings.tokenizer import diff_tokenizer_json, encode_sample, measure_drift


def build(n_tokens: int, seed: int = 0) -> dict:
    """A byte-level-BPE-like tokenizer.json: 256 byte tokens, then merged tokens with one merge each."""
    rng = random.Random(seed)
    alphabet = [chr(c) for c in range(ord("a"), ord("z") + 1)] + ["Ġ" + chr(c) for c in range(ord("a"), ord("z") + 1)]
    vocab: dict[str, int] = {}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for ch in alphabet:
        vocab.setdefault(ch, len(vocab))
    tokens = list(alphabet)
    merges: list[str] = []
    letters = alphabet[:26]
    while len(vocab) < n_tokens:
        left, right = rng.choice(tokens), rng.choice(letters)
        merged = left + right
        if merged in vocab or len(merged) > 12:
            continue
        vocab[merged] = len(vocab)
        merges.append(f"{left} {right}")
        tokens.append(merged)
    added = [{"id": n_tokens + i, "content": f"<|reserved_{i}|>", "single_word": False, "lstrip": False,
              "rstrip": False, "normalized": False, "special": True} for i in range(256)]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }


def modify(doc: dict, changed: int, seed: int = 1) -> dict:
    """Copy with ``changed`` tokens differing: 40% re-numbered (swapped in pairs), 30% removed
    (leaf tokens, with the merge that made them), 30% added (with a new merge each)."""
    rng = random.Random(seed)
    new = json.loads(json.dumps(doc))
    vocab, merges = new["model"]["vocab"], new["model"]["merges"]
    used_left = {m.split(" ", 1)[0] for m in merges}
    leaves = [m.replace(" ", "") for m in merges if m.replace(" ", "") not in used_left]
    n_renumber = (changed * 4 // 10) // 2 * 2
    n_remove = (changed - n_renumber) // 2
    n_add = changed - n_renumber - n_remove
    picked = rng.sample(leaves, n_renumber + n_remove)
    renumber, remove = picked[:n_renumber], picked[n_renumber:]
    for a, b in zip(renumber[::2], renumber[1::2]):
        vocab[a], vocab[b] = vocab[b], vocab[a]
    gone = set(remove)
    for token in remove:
        del vocab[token]
    new["model"]["merges"] = [m for m in merges if m.replace(" ", "") not in gone]
    next_id = max(vocab.values()) + 1 + len(new["added_tokens"])
    for added in rng.sample([t for t in vocab if len(t) < 8 and not t.startswith("<") and t + "q" not in vocab], n_add):
        token = added + "q"
        vocab[token] = next_id
        next_id += 1
        new["model"]["merges"].append(f"{added} q")
    return new


def _deepdiff_child(old: dict, new: dict, queue) -> None:
    from deepdiff import DeepDiff

    start = time.perf_counter()
    result = DeepDiff(old, new)
    queue.put((time.perf_counter() - start, len(result.get("values_changed", {})),
               len(result.get("dictionary_item_added", [])), len(result.get("dictionary_item_removed", []))))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=256_000)
    parser.add_argument("--changed", type=int, default=100)
    parser.add_argument("--cutoff", type=float, default=300.0, help="seconds before DeepDiff is stopped")
    args = parser.parse_args()

    old = build(args.tokens)
    new = modify(old, args.changed)
    old_text, new_text = json.dumps(old), json.dumps(new)
    print(f"tokenizer.json: {len(old['model']['vocab'])} vocab + {len(old['added_tokens'])} added tokens, "
          f"{len(old['model']['merges'])} merges; {len(old_text) / 1e6:.1f} MB each; {args.changed} tokens differ")

    start = time.perf_counter()
    old_doc, new_doc = json.loads(old_text), json.loads(new_text)
    parse_s = time.perf_counter() - start

    rules = SeverityRules.default()
    runs = []
    for _ in range(3):
        start = time.perf_counter()
        findings = diff_tokenizer_json(old_doc, new_doc, rules)
        runs.append(time.perf_counter() - start)
    ours = min(runs)
    print(f"ours      diff_tokenizer_json on parsed dicts: {ours:.3f} s (best of 3: "
          + ", ".join(f"{r:.3f}" for r in runs) + ")")
    for f in findings:
        print(f"          {f.severity.value:8} {f.code}: {f.summary}")
    print(f"context   json.loads of both files: {parse_s:.3f} s")
    old_bytes, new_bytes = old_text.encode(), new_text.encode()
    tok.parse_tokenizer_json(old_bytes), tok.parse_tokenizer_json(new_bytes)  # the diff parsed both already
    tok.forget_encodings()
    start = time.perf_counter()
    drift = measure_drift(old_text, new_text)
    cold = time.perf_counter() - start
    per_change = []
    for i in range(3):  # a new side never seen, the old side encoded at its own revision
        variant = new_bytes + b" " * (i + 1)  # same tokenizer, another content id
        tok.parse_tokenizer_json(variant)
        encode_sample(old_bytes)
        start = time.perf_counter()
        drift = measure_drift(old_text, variant.decode())
        per_change.append(time.perf_counter() - start)
    drift_s = min(per_change)
    print(f"drift     per change (new side pruned, loaded and encoded; old side cached): {drift_s:.3f} s "
          f"(best of 3: {', '.join(f'{r:.3f}' for r in per_change)}), {drift.changed}/{drift.total} samples changed")
    print(f"drift     first revision (both sides cold): {cold:.3f} s")
    from tokenizers import Tokenizer

    start = time.perf_counter()
    Tokenizer.from_str(new_text)
    print(f"context   one full Tokenizer.from_str of the new file (what drift paid twice before): "
          f"{time.perf_counter() - start:.3f} s")
    drift_ok = drift_s < 0.5
    print("goal      drift < 0.5 s per change at 256k tokens: " + ("met" if drift_ok else "NOT met"))

    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=_deepdiff_child, args=(old_doc, new_doc, queue))
    start = time.perf_counter()
    proc.start()
    proc.join(args.cutoff)
    if proc.is_alive():
        proc.kill()
        proc.join()
        elapsed = time.perf_counter() - start
        print(f"deepdiff  DeepDiff(old, new) on the same parsed dicts: stopped after {elapsed:.1f} s (cutoff)")
        print(f"ratio     >= {elapsed / ours:.0f}x (lower bound)")
        ok = ours < 2 and elapsed / ours >= 50
    else:
        dd, changed, added, removed = queue.get()
        print(f"deepdiff  DeepDiff(old, new) on the same parsed dicts: {dd:.3f} s "
              f"({changed} values changed, {added} keys added, {removed} keys removed)")
        print(f"ratio     {dd / ours:.0f}x")
        ok = ours < 2 and dd / ours >= 50
    print("goal      ours < 2 s and >= 50x faster: " + ("met" if ok else "NOT met"))
    return 0 if ok and drift_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
