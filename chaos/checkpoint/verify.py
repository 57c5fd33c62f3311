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
  mmap=True)``; a directory of such files is judged file by file (a torch.save file known by its name
  or by its content, ``checkpoint.pth.tar``: formats.tensor_format, which the value scan shares), and
  a DCP checkpoint in a subfolder of it (``step_20/model/.metadata``) as a plain DCP directory;
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

import os
import re
import time
from pathlib import Path
from typing import Any

from chaos.checkpoint.findings import (ACCELERATE_DONE, ACCELERATE_PARTS, DCP_METADATA, DCP_SHARD_SUFFIX, HF_TRAINER_STATE,
                                       HF_WEIGHTS, STEP_ENTRY, TORCH_SUFFIXES, Report, UnusableInput,
                                       accelerate_gaps, step_of)
from chaos.checkpoint.formats import (_dcp_load, _dcp_structure, _is_accelerate_weights, _looks_like_torch_save,
                                      _torch_problems, dcp_dirs, tensor_format, verify_accelerate_dir, verify_dcp_dir,
                                      verify_hf_dir, verify_torch_dir, verify_torch_file)
from chaos.checkpoint.manifest import LATEST_NAME, MANIFEST_NAME, read_manifest, verify_manifest

__all__ = ["ACCELERATE_DONE", "ACCELERATE_PARTS", "DCP_METADATA", "DCP_SHARD_SUFFIX", "HF_TRAINER_STATE", "HF_WEIGHTS",
           "STEP_ENTRY", "TORCH_SUFFIXES", "Report", "UnusableInput", "accelerate_gaps", "claims_committed",
           "detect_kind", "resolve_latest", "selection_hazards", "step_of", "verify", "verify_accelerate_dir",
           "verify_dcp_dir", "verify_hf_dir", "verify_manifest_dir", "verify_root", "verify_torch_dir",
           "verify_torch_file"]


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
    if any(tensor_format(path / n) == "torch" for n in names) or dcp_dirs(path):
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
            if tensor_format(path / rel) == "torch":
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


# ----------------------------------------------------------------------------------- torch.save


# ----------------------------------------------------------------------------------- HF Trainer


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


