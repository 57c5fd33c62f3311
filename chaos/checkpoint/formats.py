"""The verifier's judgement of each checkpoint format it knows, from the bytes on disk: a plain DCP directory,
torch.save files (their zip CRC-32s and a weights-only load), a Hugging Face Trainer ``checkpoint-N``
directory and an Accelerate ``save_state`` directory (safetensors headers, shard indexes). The formats
themselves and what each check proves are described in chaos.checkpoint.verify."""

from __future__ import annotations

import json
import re
import struct
import zipfile
from pathlib import Path

from chaos.checkpoint.findings import (ACCELERATE_DONE, DCP_METADATA, DCP_SHARD_SUFFIX, HF_TRAINER_STATE, HF_WEIGHTS,
                                       TORCH_SUFFIXES, Report, UnusableInput, size_of, accelerate_gaps, step_of)


def tensor_format(path: Path) -> str | None:
    """How a file's tensors are read: ``"safetensors"``, ``"torch"`` (a torch.save file), or None.

    The one notion of a readable tensor file, shared by the verifier (which judges what it reads) and the
    value scan (chaos.checkpoint.values, which must name every file it does not read): a ``.safetensors``
    name, a torch.save name (TORCH_SUFFIXES), or, under any other name, a zip archive holding a
    torch.save record (``<archive>/data.pkl``): ``checkpoint.pth.tar``, Accelerate's ``.pkl`` states. A
    legacy (non-zip) pickle under a foreign name is None: it could be any pickle, and a file read as
    nothing is named by the scan, never passed over. DCP shards are read through their ``.metadata``
    (dcp_dirs), not one by one."""
    name = path.name
    if name == DCP_METADATA or name.endswith(DCP_SHARD_SUFFIX):
        # A shard concatenates its items, some of them torch.save archives: is_zipfile finds the last one's
        # directory at its end, but only the shard's .metadata knows where each item lies.
        return None
    if name.endswith(".safetensors"):
        return "safetensors"
    if name.endswith(TORCH_SUFFIXES):
        return "torch"
    try:
        if not _is_zip(path) or not zipfile.is_zipfile(path):  # an archive from its first byte, as torch.save writes
            return None
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
    except (OSError, zipfile.BadZipFile, ValueError, EOFError):
        return None
    return "torch" if any(n.count("/") == 1 and n.endswith("/data.pkl") for n in names) else None


def dcp_dirs(path: Path) -> list[Path]:
    """Every DCP checkpoint (a folder holding ``.metadata``) at or below ``path``, at any depth, sorted: a
    trainer may save its model and optimizer as DCP in subfolders (``step_20/model/``, the HF Trainer's
    ``pytorch_model_fsdp_0/``) beside plain files."""
    if not path.is_dir():
        return []
    return sorted({meta.parent for meta in path.rglob(DCP_METADATA) if meta.is_file()})


def verify_dcp_dir(path: Path, *, load: bool = True) -> Report:
    report = Report(str(path), "dcp", step=step_of(path))
    problems, referenced = _dcp_structure(path)
    report.problems = problems
    report.files = len(referenced) + 1
    report.bytes = sum(size_of(path / rel) for rel in referenced) + size_of(path / DCP_METADATA)
    if load and not problems:
        report.problems += _dcp_load(path)
    report.notes.append("plain DCP has no checksums: a flipped bit inside tensor data is undetectable "
                        "without a manifest")
    return report


def _dcp_structure(path: Path) -> tuple[list[str], set[str]]:
    """``.metadata`` against the files: every referenced file present and long enough for every read."""
    try:
        from torch.distributed.checkpoint import FileSystemReader
    except ImportError as exc:
        return [f"cannot read DCP metadata: torch.distributed.checkpoint is unavailable ({exc})"], set()
    try:
        metadata = FileSystemReader(str(path)).read_metadata()
    except Exception as exc:  # a torn pickle raises anything from EOFError to UnpicklingError
        return [f"{DCP_METADATA} unreadable: {type(exc).__name__}: {exc}"], set()
    storage = getattr(metadata, "storage_data", None)
    if not isinstance(storage, dict) or not storage:
        return [f"{DCP_METADATA} references no storage files"], set()
    need: dict[str, int] = {}
    for info in storage.values():
        rel = getattr(info, "relative_path", None)
        if not isinstance(rel, str):
            return [f"{DCP_METADATA} has a storage entry without a file name"], set()
        end = int(getattr(info, "offset", 0)) + int(getattr(info, "length", 0))
        need[rel] = max(need.get(rel, 0), end)
    problems = []
    for rel, end in sorted(need.items()):
        size = size_of(path / rel)
        if size < 0:
            problems.append(f"{rel}: missing ({DCP_METADATA} references it)")
        elif size < end:
            problems.append(f"{rel}: truncated: {size} bytes, {DCP_METADATA} reads up to byte {end}")
    return problems, set(need)


def _dcp_load(path: Path) -> list[str]:
    """Load the whole state into this process's memory with no process group."""
    import warnings

    try:
        from torch.distributed.checkpoint.api import CheckpointException
        from torch.distributed.checkpoint.state_dict_loader import _load_state_dict_from_keys
    except ImportError as exc:
        return [f"cannot load DCP state: {exc}"]
    try:
        with warnings.catch_warnings():
            # "no process group: loading in a single process" is exactly the intent here.
            warnings.simplefilter("ignore", UserWarning)
            _load_state_dict_from_keys(checkpoint_id=str(path))
    except (Exception, CheckpointException) as exc:  # CheckpointException derives from BaseException
        lines = [line for line in str(exc).strip().splitlines() if line.strip()]
        return [f"DCP load failed: {type(exc).__name__}: {lines[-1].strip()[:300] if lines else ''}"]
    return []


def verify_torch_file(path: Path, *, load: bool = True) -> Report:
    report = Report(str(path), "torch-save", files=1, bytes=size_of(path), step=step_of(path))
    report.problems = _torch_problems(path, load, report.notes)
    return report


def verify_torch_dir(path: Path, *, load: bool = True) -> Report:
    report = Report(str(path), "torch-save-dir", step=step_of(path))
    for child in sorted(path.iterdir()):
        if child.is_file() and tensor_format(child) == "torch":
            report.files += 1
            report.bytes += size_of(child)
            report.problems += [f"{child.name}: {p}" for p in _torch_problems(child, load, report.notes)]
    for folder in dcp_dirs(path):  # a model or optimizer saved as DCP in a subfolder beside the files
        rel = str(folder.relative_to(path))
        child = verify_dcp_dir(folder, load=load)
        report.files += child.files
        report.bytes += child.bytes
        report.problems += [f"{rel}: {p}" for p in child.problems]
    report.notes.append("no commit record (manifest or .metadata): each file judged on its own")
    return report


def _torch_problems(path: Path, load: bool, notes: list[str] | None = None) -> list[str]:
    problems = _zip_crc(path)
    if load and not problems:
        problems += _torch_load(path, notes if notes is not None else [])
    return problems


def _looks_like_torch_save(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
    except OSError as exc:
        raise UnusableInput(f"{path}: cannot read: {exc.strerror}") from None
    # A zip archive (torch >= 1.6), a pickle (legacy format), or a torn file whose header survived.
    return head.startswith(b"PK") or head[:1] == b"\x80" or (not head and path.suffix in TORCH_SUFFIXES)


def _zip_crc(path: Path) -> list[str]:
    """Every record's CRC-32, as the zip directory states it (torch.save writes them by default)."""
    if size_of(path) == 0:
        return ["empty file"]
    if not zipfile.is_zipfile(path):
        with open(path, "rb") as fh:
            if fh.read(2) == b"PK":
                return ["torn zip archive: no central directory (truncated?)"]
        return []  # legacy pickle format: only a load can judge it
    try:
        with zipfile.ZipFile(path) as zf:
            bad = zf.testzip()
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
        return [f"corrupt zip archive: {exc}"]
    return [f"CRC mismatch in record {bad}"] if bad else []


def _torch_load(path: Path, notes: list[str]) -> list[str]:
    import pickle

    import torch

    zipped = _is_zip(path)
    try:
        torch.load(path, map_location="cpu", weights_only=True, mmap=zipped)
    except pickle.UnpicklingError as exc:
        if zipped and "Weights only load failed" in str(exc):
            # Not damage: the file pickles objects beyond tensors (numpy RNG state, training arguments),
            # which only weights_only=False would unpickle, running whatever code the file names.
            notes.append(f"{path.name}: holds Python objects beyond tensors: bytes proven by its zip CRC-32s, "
                         "not unpickled (that would run code the file names)")
            return []
        return [f"torch.load failed: {type(exc).__name__}: {_first_line(exc)}"]
    except Exception as exc:  # unpickling a torn or foreign file can raise nearly anything
        return [f"torch.load failed: {type(exc).__name__}: {_first_line(exc)}"]
    return []


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0][:300] if lines else ""


def _is_zip(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == b"PK"


def verify_hf_dir(path: Path, *, load: bool = True) -> Report:
    """A ``transformers.Trainer`` ``checkpoint-N`` directory (see the module's docstring)."""
    report = Report(str(path), "hf-trainer", step=step_of(path))
    names = sorted(p.name for p in path.iterdir())
    state_file = path / HF_TRAINER_STATE
    if not state_file.exists():
        report.problems.append(f"{HF_TRAINER_STATE} missing: the Trainer writes it after the model, optimizer and RNG "
                               "states, so this save never finished (a resume from it fails)")
    else:
        try:
            state = json.loads(state_file.read_text())
            step = state["global_step"]
            if not isinstance(step, int):
                raise TypeError(f"global_step is {step!r}")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            report.problems.append(f"{HF_TRAINER_STATE} unreadable: {type(exc).__name__}: {exc}"[:300])
        else:
            if report.step is not None and step != report.step:
                report.problems.append(f"{HF_TRAINER_STATE} says global_step {step}, the name says {report.step}")
            report.step = step
    weights = [n for n in names if n in HF_WEIGHTS]
    # Under FSDP the Trainer saves the model and optimizer as DCP directories (pytorch_model_fsdp_0/, optimizer_0/).
    dcp_dirs = [n for n in names if (path / n / DCP_METADATA).is_file()]
    if not weights and not any(n.startswith("pytorch_model_fsdp") for n in dcp_dirs):
        report.problems.append(f"no model weights ({', '.join(HF_WEIGHTS[:3])}, ...)")
    for name in dcp_dirs:
        child = verify_dcp_dir(path / name, load=load)
        report.files += child.files
        report.bytes += child.bytes
        report.problems += [f"{name}: {p}" for p in child.problems]
    for name in names:
        if (path / name).is_file():
            _judge_stack_file(path / name, report, load)
    report.notes.append("the Trainer writes no checksums: safetensors headers and extents, zip CRC-32s of the "
                        "torch.save files and the trainer state are what is checked")
    return report


def _judge_stack_file(child: Path, report: Report, load: bool) -> None:
    """One file of a stack's checkpoint directory (HF Trainer, Accelerate), counted and judged by its kind."""
    name = child.name
    report.files += 1
    report.bytes += size_of(child)
    if name.endswith(".safetensors"):
        report.problems += [f"{name}: {p}" for p in _safetensors_problems(child, load)]
    elif tensor_format(child) == "torch":
        report.problems += [f"{name}: {p}" for p in _torch_problems(child, load, report.notes)]
    elif name.endswith(".index.json"):
        report.problems += [f"{name}: {p}" for p in _shard_index_problems(child)]
    elif name.endswith(".pkl"):  # RNG and custom states: torch.save archives, or plain pickles
        if size_of(child) > 0 and _is_zip(child):
            report.problems += [f"{name}: {p}" for p in _torch_problems(child, load, report.notes)]
        elif size_of(child) <= 0:
            report.problems.append(f"{name}: empty file")
        else:
            report.notes.append(f"{name}: a plain pickle: no checksum to check, not unpickled (that would run "
                                "code the file names)")


def _is_accelerate_weights(name: str) -> bool:
    return re.fullmatch(r"(model|pytorch_model)(_\d+)?\.(safetensors|bin)", name) is not None


def verify_accelerate_dir(path: Path, *, load: bool = True) -> Report:
    """An Accelerate ``save_state`` directory (see ACCELERATE_DONE for what marks it finished)."""
    report = Report(str(path), "accelerate", step=step_of(path))
    names = sorted(p.name for p in path.iterdir() if p.is_file())
    if ACCELERATE_DONE not in names:
        report.problems.append(f"{ACCELERATE_DONE} missing: Accelerate writes it after the model, optimizer, "
                               "scheduler and loader states, so this save never finished on process 0 (load_state "
                               "would restore what is there and skip the RNG state with only a log line)")
    elif gaps := accelerate_gaps(path):
        report.problems.append(f"an unfinished save: {', '.join(gaps)} missing (Accelerate writes the registered "
                               "objects' custom_checkpoint_N.pkl after the RNG states, and load_state() refuses a "
                               "directory without them)")
    if not any(_is_accelerate_weights(n) for n in names):
        report.problems.append("no model weights (model.safetensors or pytorch_model.bin)")
    for name in names:  # optimizer.bin, scheduler.bin, sampler.bin, dl_state_dict.bin, RNG and custom .pkl
        _judge_stack_file(path / name, report, load)
    if path.name.startswith("checkpoint_"):
        report.notes.append(f"{path.name}: Accelerate's automatic naming counts saves, not training steps")
    report.notes.append("save_state writes no checksums and no completion record: safetensors extents, zip "
                        f"CRC-32s and the presence of {ACCELERATE_DONE} are what is checked; objects registered with "
                        "register_for_checkpointing (custom_checkpoint_N.pkl) are written after it, so a save "
                        "killed among them is told apart only by the finished checkpoints beside it")
    return report


def _safetensors_problems(path: Path, load: bool) -> list[str]:
    """The header parses and every tensor's bytes lie inside the file, which ends where the last one does."""
    size = size_of(path)
    try:
        with open(path, "rb") as fh:
            head = fh.read(8)
            if len(head) < 8:
                return [f"truncated: {size} bytes, shorter than the 8-byte header length"]
            (length,) = struct.unpack("<Q", head)
            if length > size - 8:
                return [f"truncated: the header says {length} bytes of JSON, the file has {size - 8} after it"]
            header = json.loads(fh.read(length))
    except (OSError, ValueError) as exc:
        return [f"header unreadable: {type(exc).__name__}: {exc}"[:300]]
    end = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            begin, stop = info["data_offsets"]
        except (TypeError, KeyError, ValueError):
            return [f"header entry {name!r} has no data_offsets"]
        end = max(end, int(stop))
        if not 0 <= int(begin) <= int(stop):
            return [f"header entry {name!r} has data_offsets {begin}..{stop}"]
    if 8 + length + end != size:
        return [f"truncated: the header places tensor data up to byte {8 + length + end}, the file has {size}"
                if 8 + length + end > size else
                f"{size - 8 - length - end} bytes past the last tensor (a file written over another?)"]
    if load:
        try:
            from safetensors.torch import load_file
        except ImportError:
            return []
        try:
            load_file(str(path), device="cpu")
        except Exception as exc:  # safetensors raises its own SafetensorError for any malformed file
            return [f"load failed: {type(exc).__name__}: {_first_line(exc)}"]
    return []


def _shard_index_problems(path: Path) -> list[str]:
    """A sharded model's index names shards that are all present."""
    try:
        weight_map = json.loads(path.read_text())["weight_map"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return [f"unreadable: {type(exc).__name__}: {exc}"[:300]]
    return [f"names shard {shard}, which is missing" for shard in sorted(set(weight_map.values()))
            if not (path.parent / shard).is_file()]
