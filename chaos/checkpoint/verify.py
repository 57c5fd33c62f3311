"""The checkpoint verifier: judges manifest directories, plain DCP directories, torch.save files and checkpoint roots.

One entry point, ``verify(path)``, shared by ``chaos verify-checkpoint`` and the
``checkpoint_integrity`` check. It trusts nothing a writer says about itself beyond what it can
re-derive from the bytes on disk:

* a manifest directory (``MANIFEST.json``): every listed file present with its size and xxh3-128,
  nothing unlisted, and every ``torch.save`` file's zip CRC-32s (the checksums only prove the bytes
  are the ones sealed: a file torn before the seal matches them); a DCP checkpoint (``.distcp``
  shards, ``.metadata`` listed, or format ``dcp`` in the manifest's meta) must hold ``.metadata``,
  and its DCP structure is checked too;
* a plain DCP directory (``.metadata`` and no manifest): every storage file ``.metadata``
  references exists and is long enough for every (offset, length) it references, and the state
  loads into memory with no process group (DCP has no checksums: a flipped bit inside tensor data
  is invisible without a manifest, and the report says so);
* a ``torch.save`` file: the zip CRC-32 of every record, then ``torch.load(weights_only=True,
  mmap=True)``; a directory of such files is judged file by file;
* a Hugging Face Trainer ``checkpoint-N`` directory (``trainer_state.json``): the trainer state
  parses and names step N, the model weights are there (safetensors: the header parses and every
  tensor lies inside the file; no checksums exist in that format), and every torch.save file in
  it (optimizer, scheduler, RNG states) is judged as above. The Trainer writes
  ``trainer_state.json`` after everything else, so a directory without it is a save that never
  finished;
* an Accelerate ``save_state`` directory (``random_states_0.pkl``, or ``optimizer.bin`` beside the
  weights): the weights as above, every torch.save file (optimizer, scheduler, sampler, the
  StatefulDataLoader's ``dl_state_dict.bin``) by its CRC-32s and a load; process 0's RNG state is
  written after all of those, so a directory without it is a save that never finished, and so is one
  that lacks an RNG state or a registered object's ``custom_checkpoint_N.pkl`` a finished directory
  beside it has (those objects are written last);
* a checkpoint root: the ``latest`` pointer and every ``step_*`` / ``checkpoint-N`` /
  ``checkpoint_N`` entry, each judged as above.

A torch.save file that holds Python objects beyond tensors (an RNG state, a Lightning
checkpoint's hyper-parameters) is not unpickled with ``weights_only=False``, since that would run
whatever code the file names: its zip CRC-32s prove its bytes, and the report says it was not loaded.
"""

from __future__ import annotations

import json
import os
import re
import struct
import time
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from chaos.checkpoint.manifest import LATEST_NAME, MANIFEST_NAME, read_manifest, verify_manifest
from chaos.errors import UsageError

DCP_METADATA = ".metadata"
DCP_SHARD_SUFFIX = ".distcp"
STEP_ENTRY = re.compile(r"^(?:step|checkpoint)[_-]?(\d+)(\.[A-Za-z0-9]+)?$")
"""A checkpoint's entry in its root: ``step_N`` (this harness's workloads), ``checkpoint-N`` (HF Trainer)."""
HF_TRAINER_STATE = "trainer_state.json"
ACCELERATE_DONE = "random_states_0.pkl"
"""Accelerate's ``save_state`` writes each process's RNG state after the model, optimizer, scheduler and
loader states: process 0's is the nearest thing to a completion record its directories have."""
HF_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json",
              "adapter_model.safetensors", "adapter_model.bin")
TORCH_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt")


class UnusableInput(UsageError):
    """The path is not something the verifier can judge (missing, unreadable, not a checkpoint): exit 2."""


@dataclass
class Report:
    """The verdict on one checkpoint (or a root of several): what it is, and every problem found."""

    path: str
    kind: str
    """manifest | dcp | torch-save | torch-save-dir | hf-trainer | accelerate | root"""
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """Facts that are not problems (what was not checked and why, in-progress saves skipped)."""
    files: int = 0
    bytes: int = 0
    seconds: float = 0.0
    step: int | None = None
    children: list["Report"] = field(default_factory=list)
    latest: str | None = None
    """For a root: the entry ``latest`` names (as written in the pointer)."""

    @property
    def ok(self) -> bool:
        return not self.problems and all(c.ok for c in self.children)

    def all_problems(self) -> list[str]:
        """Own problems, then each child's prefixed with its name."""
        out = list(self.problems)
        for child in self.children:
            out += [f"{Path(child.path).name}: {p}" for p in child.all_problems()]
        return out

    def summary(self) -> str:
        """One line: what is wrong (first problems), for check reasons and logs."""
        problems = self.all_problems()
        if not problems:
            return "valid"
        more = f" (+{len(problems) - 3} more)" if len(problems) > 3 else ""
        return "; ".join(problems[:3]) + more

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["ok"] = self.ok
        data["children"] = [c.to_json() for c in self.children]
        return data


def verify(path: str | os.PathLike[str], *, load: bool | None = None) -> Report:
    """Judge ``path``; raises UnusableInput when it is not a checkpoint at all.

    ``load``: also load the state into memory. Default: yes where nothing else proves the bytes
    (plain DCP, torch.save files), no where manifest checksums already do.
    """
    path = Path(path)
    if not path.exists():
        raise UnusableInput(f"{path}: no such file or directory")
    started = time.perf_counter()
    kind = detect_kind(path)
    if kind == "manifest":
        report = verify_manifest_dir(path, load=bool(load))
    elif kind == "dcp":
        report = verify_dcp_dir(path, load=True if load is None else load)
    elif kind == "torch-save":
        report = verify_torch_file(path, load=True if load is None else load)
    elif kind == "torch-save-dir":
        report = verify_torch_dir(path, load=True if load is None else load)
    elif kind == "hf-trainer":
        report = verify_hf_dir(path, load=True if load is None else load)
    elif kind == "accelerate":
        report = verify_accelerate_dir(path, load=True if load is None else load)
    else:
        report = verify_root(path, load=load)
    report.seconds = round(time.perf_counter() - started, 6)
    return report


def detect_kind(path: Path) -> str:
    """What ``path`` is, from its shape alone; raises UnusableInput when it is none of the known kinds."""
    try:
        if path.is_file():
            if not _looks_like_torch_save(path):
                raise UnusableInput(f"{path}: not a torch.save file (neither a zip archive nor a pickle)")
            return "torch-save"
        if not path.is_dir():
            raise UnusableInput(f"{path}: not a regular file or directory")
        names = set(os.listdir(path))
    except PermissionError as exc:
        raise UnusableInput(f"{path}: cannot read: {exc.strerror}") from None
    if MANIFEST_NAME in names:
        return "manifest"
    if DCP_METADATA in names:
        return "dcp"
    if HF_TRAINER_STATE in names or (path.name.startswith("checkpoint-") and names & set(HF_WEIGHTS)):
        return "hf-trainer"
    if any(n.startswith("random_states_") for n in names) or (
            "optimizer.bin" in names and any(_is_accelerate_weights(n) for n in names)):
        return "accelerate"
    if LATEST_NAME in names or any(STEP_ENTRY.match(n) for n in names):
        return "root"
    if any(n.endswith(TORCH_SUFFIXES) for n in names):
        return "torch-save-dir"
    raise UnusableInput(f"{path}: not a checkpoint: no {MANIFEST_NAME}, {DCP_METADATA}, '{LATEST_NAME}', "
                        f"step_* entries or torch.save files inside")


def claims_committed(path: Path) -> bool:
    """Does this entry present itself as a finished checkpoint (a commit record, or a single file)?"""
    if path.is_file():
        return True
    if any((path / name).exists() for name in (MANIFEST_NAME, DCP_METADATA, HF_TRAINER_STATE)):
        return True
    try:
        return detect_kind(path) == "accelerate" and (path / ACCELERATE_DONE).exists() and not accelerate_gaps(path)
    except UnusableInput:
        return False


ACCELERATE_PARTS = re.compile(r"^(?:random_states|custom_checkpoint)_\d+\.pkl$")
"""Files one save writes per process (RNG states) and per registered object (after the RNG states)."""


def accelerate_gaps(path: Path) -> list[str]:
    """Per-process and per-object files that this ``save_state`` directory lacks and a finished sibling has.

    The objects registered with ``register_for_checkpointing`` are written after the RNG states,
    so a save killed among them has every file ``ACCELERATE_DONE`` looks for. Only the number of
    objects tells it apart, and the directories beside it, written by the same loop, know it."""
    try:
        own = {p.name for p in path.iterdir()}
        siblings = [e for e in path.parent.iterdir() if e != path and e.is_dir() and (e / ACCELERATE_DONE).exists()]
    except OSError:
        return []
    gaps: dict[str, str] = {}  # the missing file -> the first sibling that has it
    for sibling in sorted(siblings, key=lambda e: step_of(e) or 0):
        for name in sorted(n for n in os.listdir(sibling) if ACCELERATE_PARTS.match(n) and n not in own):
            gaps.setdefault(name, sibling.name)
    return [f"{name} (which {where} beside it has)" for name, where in gaps.items()]


def step_of(path: Path) -> int | None:
    match = STEP_ENTRY.match(path.name)
    return int(match.group(1)) if match else None


# ----------------------------------------------------------------------------------- manifest


def verify_manifest_dir(path: Path, *, load: bool = False) -> Report:
    report = Report(str(path), "manifest", step=step_of(path))
    report.problems = verify_manifest(path)
    try:
        manifest = read_manifest(path)
    except ValueError:
        return report
    files = manifest["files"]
    report.files = len(files)
    report.bytes = sum(int(info.get("size", 0)) for info in files.values())
    if isinstance(manifest.get("step"), int):
        if report.step is not None and manifest["step"] != report.step:
            report.problems.append(f"{MANIFEST_NAME} says step {manifest['step']}, the name says {report.step}")
        report.step = manifest["step"]
    dcp = _is_dcp(manifest)
    if dcp and (path / DCP_METADATA).exists():
        report.problems += _dcp_structure(path)[0]
    elif dcp and DCP_METADATA not in files:  # when listed, verify_manifest already named it missing
        report.problems.append(f"{DCP_METADATA}: missing: a sealed DCP checkpoint cannot be loaded without it")
    if not report.problems:
        for rel in sorted(files):
            if rel.endswith(TORCH_SUFFIXES):
                report.problems += [f"{rel}: {p}" for p in _torch_problems(path / rel, load, report.notes)]
    if dcp and load and not report.problems:
        report.problems += _dcp_load(path)
    if not load:
        report.notes.append("bytes proven by the manifest checksums; state not loaded (pass --load)")
    return report


def _is_dcp(manifest: dict[str, Any]) -> bool:
    """Does the manifest seal a DCP checkpoint (which is unloadable without its ``.metadata``)?"""
    files = manifest["files"]
    meta = manifest.get("meta")
    fmt = str(meta.get("format", "")) if isinstance(meta, dict) else ""
    return (DCP_METADATA in files or any(rel.endswith(DCP_SHARD_SUFFIX) for rel in files)
            or "dcp" in re.split(r"[^a-z0-9]+", fmt.lower()))


# ----------------------------------------------------------------------------------- DCP


def verify_dcp_dir(path: Path, *, load: bool = True) -> Report:
    report = Report(str(path), "dcp", step=step_of(path))
    problems, referenced = _dcp_structure(path)
    report.problems = problems
    report.files = len(referenced) + 1
    report.bytes = sum(_size(path / rel) for rel in referenced) + _size(path / DCP_METADATA)
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
        size = _size(path / rel)
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


# ----------------------------------------------------------------------------------- torch.save


def verify_torch_file(path: Path, *, load: bool = True) -> Report:
    report = Report(str(path), "torch-save", files=1, bytes=_size(path), step=step_of(path))
    report.problems = _torch_problems(path, load, report.notes)
    return report


def verify_torch_dir(path: Path, *, load: bool = True) -> Report:
    report = Report(str(path), "torch-save-dir", step=step_of(path))
    for child in sorted(path.iterdir()):
        if child.is_file() and child.name.endswith(TORCH_SUFFIXES):
            report.files += 1
            report.bytes += _size(child)
            report.problems += [f"{child.name}: {p}" for p in _torch_problems(child, load, report.notes)]
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
    if _size(path) == 0:
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


# ----------------------------------------------------------------------------------- HF Trainer


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
    report.bytes += _size(child)
    if name.endswith(".safetensors"):
        report.problems += [f"{name}: {p}" for p in _safetensors_problems(child, load)]
    elif name.endswith(TORCH_SUFFIXES):
        report.problems += [f"{name}: {p}" for p in _torch_problems(child, load, report.notes)]
    elif name.endswith(".index.json"):
        report.problems += [f"{name}: {p}" for p in _shard_index_problems(child)]
    elif name.endswith(".pkl"):  # RNG and custom states: torch.save archives, or plain pickles
        if _size(child) > 0 and _is_zip(child):
            report.problems += [f"{name}: {p}" for p in _torch_problems(child, load, report.notes)]
        elif _size(child) <= 0:
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
    size = _size(path)
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


# ----------------------------------------------------------------------------------- root


def verify_root(path: Path, *, load: bool | None = None) -> Report:
    """Every committed-looking ``step_*`` entry, and what ``latest`` names."""
    report = Report(str(path), "root")
    entries = sorted((p for p in path.iterdir() if STEP_ENTRY.match(p.name)), key=lambda p: step_of(p) or 0)
    for entry in entries:
        if not claims_committed(entry):
            report.notes.append(f"{entry.name}: no commit record ({MANIFEST_NAME}, {DCP_METADATA}, "
                                f"{HF_TRAINER_STATE} or {ACCELERATE_DONE}): an unfinished save, not judged")
            continue
        try:
            child = verify(entry, load=load)
        except UnusableInput as exc:
            child = Report(str(entry), "unknown", problems=[str(exc).removeprefix(f"{entry}: ")])
        report.children.append(child)
        report.files += child.files
        report.bytes += child.bytes
    report.problems += selection_hazards(path)
    hidden = [p.name for p in path.iterdir() if p.name.startswith(".")]
    if hidden:
        report.notes.append(f"ignored in-progress or hidden entries: {', '.join(sorted(hidden)[:5])}")
    pointer = path / LATEST_NAME
    if pointer.exists() or pointer.is_symlink():
        report.latest, problem = resolve_latest(path)
        if problem:
            report.problems.append(problem)
        else:
            named = next((c for c in report.children if Path(c.path).name == Path(report.latest or "").name), None)
            if named is None:
                report.problems.append(f"'{LATEST_NAME}' names {report.latest}, which has no commit record")
            elif not named.ok:
                report.problems.append(f"'{LATEST_NAME}' names {report.latest}, which is invalid: {named.summary()}")
    elif not report.children:
        report.problems.append("no committed checkpoint in this directory")
    valid = [c for c in report.children if c.ok]
    if valid:
        report.step = max((c.step or 0) for c in valid)
    return report


def selection_hazards(root: Path) -> list[str]:
    """Unfinished saves that a stack's own resume rule would still pick (no ``latest`` pointer to steer it).

    transformers' ``get_last_checkpoint`` (what ``resume_from_checkpoint=True`` and the examples use)
    takes the highest ``checkpoint-N`` directory, and Accelerate's ``load_state()`` under
    ``automatic_checkpoint_naming`` the highest ``checkpoint_N``, finished or not."""
    out = []
    for prefix, who, marker, fix in (
            ("checkpoint-", "get_last_checkpoint and Trainer.train(resume_from_checkpoint=True) pick it, and the "
             "resume fails", HF_TRAINER_STATE, "chaos.integrations.hf.last_complete_checkpoint"),
            ("checkpoint_", "Accelerator.load_state() with automatic_checkpoint_naming picks it", ACCELERATE_DONE,
             "chaos.integrations.accelerate.last_complete_checkpoint")):
        try:
            entries = sorted((e for e in root.iterdir() if e.is_dir() and e.name.startswith(prefix)
                              and step_of(e) is not None), key=lambda e: step_of(e) or 0)
        except OSError:
            return []
        if entries and not claims_committed(entries[-1]):
            gaps = accelerate_gaps(entries[-1]) if (entries[-1] / marker).exists() else []
            lacks = f"it lacks {', '.join(gaps)}" if gaps else f"no {marker}"
            out.append(f"{entries[-1].name} is an unfinished save ({lacks}) and the newest {prefix}N: {who}; "
                       f"resume from the newest finished one ({fix}) or delete it")
    return out


def resolve_latest(root: Path) -> tuple[str | None, str]:
    """What the ``latest`` pointer (a text file or a symlink) names, and a problem when it names nothing usable."""
    pointer = root / LATEST_NAME
    if pointer.is_symlink():
        target = os.readlink(pointer)
    else:
        try:
            target = pointer.read_text().strip()
        except (OSError, UnicodeDecodeError) as exc:
            return None, f"'{LATEST_NAME}' unreadable: {exc}"
    if not target:
        return None, f"'{LATEST_NAME}' is empty"
    resolved = (root / target).resolve()
    try:
        resolved.relative_to(root.resolve())
    except ValueError:
        return target, f"'{LATEST_NAME}' names {target}, outside the checkpoint directory"
    if not resolved.exists():
        return target, f"'{LATEST_NAME}' names {target}, which does not exist"
    return target, ""


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1
