"""The bundled all-MiniLM-L6-v2 run by ONNX Runtime instead of torch.

The same fp32 weights and the same arithmetic (mean of the token vectors, normalised): the
vectors equal torch's to about 1e-7, so an index never mixes two schemes. ONNX Runtime
spends about half of torch's CPU on the short texts an index embeds (HotpotQA: see
benchmarks/README.md, "Offline index time"), and a query process loads it without torch.

The ONNX file is exported once from the bundled weights (torch and the ``onnx`` package,
at first use), checked against torch, and cached; nothing is downloaded.
"""
from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from typing import TYPE_CHECKING, Callable, Optional, Sequence

import numpy as np

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

logger = logging.getLogger(__name__)

# An exported model whose vectors differ more than this from torch's is not used.
MAX_DIFFERENCE = 1e-5
# Windows per forward pass, sorted by length first: small batches of like length pad least
# (HotpotQA entity texts: 16 cost 15% less CPU than 32).
BATCH_WINDOWS = 16
WINDOW = 256  # word pieces the model reads, [CLS] and [SEP] included
DIM = 384
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_PROBES = ["A", "Ebenezer Scrooge: a covetous old sinner who keeps Christmas in his own way.",
           "The Thames flows through London " * 12]


def cache_dir() -> str:
    """Where exported models are kept: ``$GRAPHRAG_CACHE_DIR``, else the user's cache."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.environ.get("GRAPHRAG_CACHE_DIR") or os.path.join(base, "filegraphrag")


def onnx_path(model_dir: str) -> str:
    """The cached export of the weights in ``model_dir`` (named by the weights' file, so other
    weights get another file)."""
    weights = os.path.join(model_dir, "model.safetensors")
    stat = os.stat(weights)
    key = hashlib.sha256(f"{os.path.realpath(weights)}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()
    return os.path.join(cache_dir(), f"all-minilm-l6-v2-{key[:16]}.onnx")


def available() -> bool:
    """Whether ONNX Runtime is installed (else the torch model embeds)."""
    import importlib.util

    return importlib.util.find_spec("onnxruntime") is not None


class OnnxEncoder:
    """Embeds windows of word-piece ids (each already framed by [CLS] ... [SEP])."""

    def __init__(self, path: str, model_dir: str) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        options = ort.SessionOptions()
        # Threads that sleep when idle: spinning ones take CPU from the merge beside them.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.inter_op_num_threads = 1
        self._session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        self.tokenizer = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()
        self.cls_id = self.tokenizer.token_to_id("[CLS]")
        self.sep_id = self.tokenizer.token_to_id("[SEP]")

    def framed(self, ids: Sequence[int]) -> list[int]:
        """One window: [CLS], the ids (cut to the model's 256 with the frame), [SEP]."""
        return [self.cls_id, *ids[:WINDOW - 2], self.sep_id]

    def token_ids(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self.tokenizer.encode_batch(texts, add_special_tokens=False)]

    def embed_windows(self, windows: Sequence[list[int]]) -> np.ndarray:
        """One normalised mean-pooled vector per window, in order."""
        order = sorted(range(len(windows)), key=lambda i: len(windows[i]))
        out = np.empty((len(windows), DIM), dtype=np.float32)
        for start in range(0, len(order), BATCH_WINDOWS):
            batch = order[start:start + BATCH_WINDOWS]
            width = max(len(windows[i]) for i in batch)
            ids = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, i in enumerate(batch):
                ids[row, :len(windows[i])] = windows[i]
                mask[row, :len(windows[i])] = 1
            hidden = self._session.run(None, dict(zip(_INPUTS, (ids, mask, np.zeros_like(ids)))))[0]
            weights = mask[..., None].astype(np.float32)
            vectors = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
            out[batch] = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return out


def load(model_dir: str, torch_model: Callable[[], SentenceTransformer]) -> Optional[OnnxEncoder]:
    """The ONNX encoder of the bundled weights, exported first if not cached; None when it
    cannot be had (no ``onnx`` to export with, an unwritable cache, vectors unlike torch's).
    ``torch_model()`` loads the torch model, needed only to export."""
    path = onnx_path(model_dir)
    try:
        if not os.path.exists(path):
            _export(torch_model(), model_dir, path)
        return OnnxEncoder(path, model_dir)
    except Exception as exc:  # the torch model still embeds, only slower
        logger.warning("Could not run the embedding model on ONNX Runtime (%s: %s); embedding with torch",
                       type(exc).__name__, exc)
        return None


def _export(model: SentenceTransformer, model_dir: str, path: str) -> None:
    """Export the transformer of the sentence-transformers ``model`` to ``path``, atomically,
    after checking its vectors against torch's."""
    import warnings

    import torch

    class LastHidden(torch.nn.Module):
        def __init__(self, bert: torch.nn.Module) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
                    ) -> torch.Tensor:
            return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                             token_type_ids=token_type_ids).last_hidden_state

    os.makedirs(os.path.dirname(path), exist_ok=True)
    # A padded example, so the attention mask is traced as an input, not a constant.
    example = (torch.tensor([[101, 7592, 2088, 102], [101, 7592, 102, 0]]),
               torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]]), torch.zeros((2, 4), dtype=torch.long))
    axes = {name: {0: "batch", 1: "tokens"} for name in (*_INPUTS, "last_hidden_state")}
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".onnx.tmp")
    os.close(fd)
    try:
        with warnings.catch_warnings(), torch.inference_mode(False):
            warnings.simplefilter("ignore")
            torch.onnx.export(LastHidden(model[0].auto_model.eval()), example, tmp, input_names=list(_INPUTS),
                              output_names=["last_hidden_state"], dynamic_axes=axes, opset_version=17,
                              dynamo=False)
        encoder = OnnxEncoder(tmp, model_dir)
        expected = model.encode(_PROBES, convert_to_numpy=True, normalize_embeddings=True)
        got = encoder.embed_windows([encoder.framed(ids) for ids in encoder.token_ids(_PROBES)])
        difference = float(np.abs(got - expected).max())
        if difference > MAX_DIFFERENCE:
            raise ValueError(f"its vectors differ from torch's by up to {difference:.1e}")
        os.chmod(tmp, 0o644)  # mkstemp made it private; the cache may be shared
        os.replace(tmp, path)
        logger.info("Exported the embedding model to %s (max difference to torch %.1e)", path, difference)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
