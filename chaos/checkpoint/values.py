"""What a checkpoint's numbers are: every tensor it holds loaded and scanned for non-finite values.

Checksums prove that bytes are the bytes that were sealed; they cannot tell a NaN that training wrote
from a good weight. After a fault inside the step (chaos.instep) a stack may commit a checkpoint whose
every byte is intact and whose weights are NaN, and a resume from it carries the NaN on. The witness
(chaos.evidence.witness) scans each committed checkpoint with ``scan`` when a check needs it
(``no_corrupt_commit``). Tensors are loaded with ``weights_only=True`` (nothing a file names is run);
a file that holds more than tensors and plain containers is named as not scanned, never passed over.
Every file of the checkpoint is accounted for: read (the formats the verifier reads, chaos.checkpoint.formats:
torch.save files by name or by content, safetensors, DCP checkpoints at any depth), skipped as holding no
trained values (NOT_STATE, JSON_RECORD), or named as unscanned.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

from chaos.checkpoint.findings import DCP_METADATA, DCP_SHARD_SUFFIX
from chaos.checkpoint.formats import _dcp_structure, _is_zip, dcp_dirs, tensor_format

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
    (re.compile(r"random_states_\d+\.pkl"), lambda names: bool(names) and names <= NUMPY_RNG,
     "Accelerate's RNG states: numpy arrays, no trained values"),
)
"""Files of a known format that hold no trained values and pickle objects that a weights_only load refuses:
recognised by their name *and* by the globals they name (never unpickled to find out), listed in ``skipped``
and not a gap in the scan. Numpy is never unpickled: its dtype and array reconstruction accept states that
corrupt memory, and a checkpoint may come from anywhere. A file that names anything else is ``unscanned``."""


def scan(path: str | Path) -> dict[str, Any]:
    """``{"tensors", "values", "nonfinite", "bad": [first tensors with one], "unscanned": [files not loaded],
    "skipped": [files holding no trained values], "digest"}``. ``digest`` is a hash of everything loaded (every
    tensor's name, dtype, shape and bytes, every plain value), in the order the files hold them: two runs that
    computed the same state at the same step (a deterministic workload, its fault-free run) have the same digest;
    a flipped bit anywhere changes it. Skipped files are not in it (JSON_RECORD)."""
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

    def load(rel: str, state: Any) -> None:
        if isinstance(state, dict):
            for key, value in state.items():
                visit(f"{rel}.{key}", value, bookkeeping=key in BOOKKEEPING)
        else:
            visit(rel, state)

    # Every file of the checkpoint is read, or named: as ``skipped`` (known to hold no trained values) or as
    # ``unscanned`` (its numbers unknown, which the check never counts as finite). Nothing is passed over:
    # a NaN model saved where the scan does not look, beside a clean file it does read, must not be proven
    # clean. What can be read is what the verifier reads (chaos.checkpoint.formats: tensor_format, dcp_dirs).
    # A dangling link is listed too (and named unscanned): what it stood for cannot be read.
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*")
                                                  if p.is_file() or (p.is_symlink() and not p.exists()))
    read_by_dcp: set[Path] = set()
    for folder in dcp_dirs(path):  # the checkpoint itself, or a model/optimizer saved as DCP in a subfolder
        rel = path.name if folder == path else str(folder.relative_to(path))
        problems, referenced = _dcp_structure(folder)
        # .metadata and the shards it references are read by the load (or named with the folder when it
        # fails); any other file in the folder is judged on its own below.
        read_by_dcp |= {folder / DCP_METADATA} | {folder / r for r in referenced}
        state = None if problems else _dcp_state(folder)
        if state is None:
            read_by_dcp |= {f for f in folder.iterdir() if f.name.endswith(DCP_SHARD_SUFFIX)}
            out["unscanned"].append(f"{rel} (DCP state could not be loaded{': ' + problems[0] if problems else ''})")
        elif folder == path:
            visit("", state)  # names as before: the golden run's digests were made by the same scan
        else:
            for key, value in state.items():
                visit(f"{rel}/{key}", value)
    for file in files:
        if file in read_by_dcp:
            continue
        rel = file.name if file == path else str(file.relative_to(path))
        why = _not_state(file)
        if why is not None:
            out["skipped"].append(f"{rel} ({why})")
            continue
        fmt = tensor_format(file)
        if fmt is None and not file.name.endswith(".json") and _is_text(file):
            # Only under a name no tensor format claims: text where a .pt or .bin should be is a broken file, and a
            # .json that does not parse is no record (JSON_RECORD).
            out["skipped"].append(f"{rel} ({TEXT_NOTE})")
            continue
        if fmt is None:
            out["unscanned"].append(f"{rel} (not a file the scan can read: no torch.save, safetensors or DCP "
                                    f"checkpoint; its numbers are unknown)")
            continue
        try:
            if fmt == "safetensors":
                from safetensors.torch import load_file

                state = load_file(str(file))
            else:
                state = torch.load(file, map_location="cpu", weights_only=True, mmap=_is_zip(file))
        except Exception as exc:  # objects beyond tensors, a torn file: named, never counted as finite
            out["unscanned"].append(f"{rel} ({type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''})")
            continue
        load(rel, state)
    if not files:
        out["unscanned"].append(f"{path.name} (no tensor file found)")
    out["digest"] = h.hexdigest()[:32]
    return out


JSON_RECORD = "JSON: settings or bookkeeping, no tensors"
"""Why a ``.json`` file that parses is skipped, not a gap: every stack writes some (a model's config.json, the HF
Trainer's trainer_state.json, a sharded model's index, Accelerate loops' own state, this harness's MANIFEST.json),
none keeps trained tensors in JSON, and none resumes weights from one; naming them all unscanned would make every
such checkpoint INCONCLUSIVE and the check useless there. Their numbers are not judged: a NaN loss a guarded run
logged into trainer_state.json is history, not state a resume loads. A ``.json`` that does not parse is unscanned
(named): data under that name is not what this rule excuses. Nor are they in the digest (MANIFEST.json holds its
creation time, a config its run's paths): the fault-free run's would differ with no corruption."""


TEXT_NOTE = "text: a marker, settings or a vocabulary, no tensors"
"""Why a small text file is skipped, not a gap: managers mark a finished save with one (a COMMITTED or .done file
holding the step, orbax's commit_success.txt), and checkpoints carry tokenizer vocabularies, merges and scripts; no
stack saves or resumes trained tensors as text (torch.save, safetensors and DCP all write binary). Text is UTF-8 with
no NUL byte, under a name no tensor format claims (text in a .pt or .bin is a broken file, named), and only up to
TEXT_MAX_BYTES: a large text file is not what this rule excuses, and is named."""
TEXT_MAX_BYTES = 16 * 1024 * 1024


def _is_text(file: Path) -> bool:
    try:
        if file.stat().st_size > TEXT_MAX_BYTES:
            return False
        data = file.read_bytes()
    except OSError:
        return False
    if b"\0" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _not_state(file: Path) -> str | None:
    """Why ``file`` holds no trained values (NOT_STATE: its name and the globals it names, read without
    unpickling; JSON_RECORD), or None."""
    if file.name.endswith(".json"):
        import json

        try:
            json.loads(file.read_bytes())
        except (OSError, ValueError):
            return None
        return JSON_RECORD
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
