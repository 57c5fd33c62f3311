"""What a checkpoint's numbers are: every tensor it holds loaded and scanned for non-finite values.

Checksums prove that bytes are the bytes that were sealed; they cannot tell a NaN that training wrote
from a good weight. After a fault inside the step (chaos.instep) a stack may commit a checkpoint whose
every byte is intact and whose weights are NaN, and a resume from it carries the NaN on. The witness
(chaos.evidence.witness) scans each committed checkpoint with ``scan`` when a check needs it
(``no_corrupt_commit``). Tensors are loaded with ``weights_only=True`` (nothing a file names is run);
a file that holds more than tensors and plain containers is named as not scanned, never passed over.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

from chaos.checkpoint.findings import DCP_METADATA, TORCH_SUFFIXES

MAX_NAMED = 5
NUMPY_RNG = {"numpy._core.multiarray._reconstruct", "numpy.core.multiarray._reconstruct", "numpy.ndarray",
             "numpy.dtype"}
BOOKKEEPING = ("callbacks",)
"""Top-level keys of a torch.save checkpoint that hold a trainer's bookkeeping (Lightning's callback states)."""
NOT_STATE: tuple[tuple[re.Pattern[str], Callable[[set[str]], bool], str], ...] = (
    (re.compile(r"training_args\.bin"), lambda names: "transformers.training_args.TrainingArguments" in names,
     "the HF Trainer's TrainingArguments: the run's settings, no trained values"),
    (re.compile(r"rng_state(_\d+)?\.pth"), lambda names: bool(names) and names <= NUMPY_RNG,
     "the HF Trainer's RNG states: numpy arrays, no trained values"),
)
"""Files of a known format that hold no trained values and pickle objects that a weights_only load refuses:
recognised by their name *and* by the globals they name (never unpickled to find out), listed in ``skipped``
and not a gap in the scan. Numpy is never unpickled: its dtype and array reconstruction accept states that
corrupt memory, and a checkpoint may come from anywhere. A file that names anything else is ``unscanned``."""


def scan(path: str | Path) -> dict[str, Any]:
    """``{"tensors", "values", "nonfinite", "bad": [first tensors with one], "unscanned": [files not loaded],
    "digest"}``. ``digest`` is a hash of everything loaded (every tensor's name, dtype, shape and bytes, every
    plain value), in the order the files hold them: two runs that computed the same state at the same step
    (a deterministic workload, its fault-free run) have the same digest; a flipped bit anywhere changes it."""
    import hashlib

    import torch

    path = Path(path)
    out: dict[str, Any] = {"tensors": 0, "values": 0, "nonfinite": 0, "bad": [], "unscanned": [], "skipped": []}
    h = hashlib.sha256()

    def visit(name: str, obj: Any, bookkeeping: bool = False) -> None:
        """``bookkeeping``: under a Lightning checkpoint's ``callbacks``, where a score that starts at -inf/+inf
        by design (ModelCheckpoint's best and k-th, EarlyStopping's) is one 0-d infinite tensor: only those are
        excused; a NaN, or any tensor of more than one value (StochasticWeightAveraging keeps a whole model
        there), is judged as a weight."""
        if isinstance(obj, torch.Tensor):
            out["tensors"] += 1
            out["values"] += obj.numel()
            t = obj.detach().contiguous()
            h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
            try:
                h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
            except (RuntimeError, TypeError):  # a layout with no plain bytes (sparse, quantized): its values
                h.update(repr(t.tolist()).encode())
            score = bookkeeping and obj.dim() == 0 and bool(torch.isinf(obj.detach()).all())
            if (obj.is_floating_point() or obj.is_complex()) and not score:
                count = int((~torch.isfinite(obj.detach())).sum())
                if count:
                    out["nonfinite"] += count
                    if len(out["bad"]) < MAX_NAMED:
                        out["bad"].append(f"{name} ({count} of {obj.numel()})")
        elif isinstance(obj, dict):
            for key, value in obj.items():
                visit(f"{name}.{key}" if name else str(key), value, bookkeeping)
        elif isinstance(obj, (list, tuple)):
            for i, value in enumerate(obj):
                visit(f"{name}[{i}]", value, bookkeeping)
        elif obj is None or isinstance(obj, (bool, int, float, str, bytes)):
            h.update(f"{name}={obj!r}|".encode())

    if path.is_dir() and (path / DCP_METADATA).exists():
        state = _dcp_state(path)
        if state is None:
            out["unscanned"].append(f"{path.name} (DCP state could not be loaded)")
        else:
            visit("", state)
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file()
                                                  and p.name.endswith(TORCH_SUFFIXES + (".safetensors",)))
    for file in files:
        rel = file.name if file == path else str(file.relative_to(path))
        why = _not_state(file)
        if why is not None:
            out["skipped"].append(f"{rel} ({why})")
            continue
        try:
            if file.name.endswith(".safetensors"):
                from safetensors.torch import load_file

                state = load_file(str(file))
            else:
                state = torch.load(file, map_location="cpu", weights_only=True, mmap=True)
        except Exception as exc:  # objects beyond tensors, a torn file: named, never counted as finite
            out["unscanned"].append(f"{rel} ({type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''})")
            continue
        if isinstance(state, dict):
            for key, value in state.items():
                visit(f"{rel}.{key}", value, bookkeeping=key in BOOKKEEPING)
        else:
            visit(rel, state)
    if not files and not (path.is_dir() and (path / DCP_METADATA).exists()):
        out["unscanned"].append(f"{path.name} (no tensor file found)")
    out["digest"] = h.hexdigest()[:32]
    return out


def _not_state(file: Path) -> str | None:
    """Why ``file`` holds no trained values (NOT_STATE: its name and the globals it names, read without
    unpickling), or None."""
    rules = [(test, why) for pattern, test, why in NOT_STATE if pattern.fullmatch(file.name)]
    if not rules:
        return None
    import torch

    try:
        names = set(torch.serialization.get_unsafe_globals_in_checkpoint(str(file)))
    except Exception:
        return None
    return next((why for test, why in rules if test(names)), None)


def _dcp_state(path: Path) -> dict[str, Any] | None:
    import warnings

    try:
        from torch.distributed.checkpoint.state_dict_loader import _load_state_dict_from_keys

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return _load_state_dict_from_keys(checkpoint_id=str(path))
    except BaseException:  # CheckpointException derives from BaseException
        return None
