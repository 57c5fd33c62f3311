"""Reference DDP workload: a seeded MLP on synthetic data, atomic checkpoints, chaos events.

    torchrun --standalone --nproc-per-node 2 --max-restarts 3 workloads/ddp.py --steps 60 --ckpt-every 10
"""

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # trainkit, from any cwd
if importlib.util.find_spec("chaos") is None:
    sys.path.insert(1, str(HERE.parent))  # chaos.sdk from the source tree when not installed

from trainkit import startup  # noqa: E402

startup.pause()  # before torch is imported; Trainer.run resumes it once the model is wrapped

from trainkit.config import TrainConfig, parse_config  # noqa: E402
from trainkit.exit import exit_fast  # noqa: E402
from trainkit.trainer import Trainer  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    cfg = parse_config(TrainConfig, argv, description=__doc__.splitlines()[0])
    return Trainer(cfg).run()


if __name__ == "__main__":
    exit_fast(main())
