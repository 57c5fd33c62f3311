"""The reference pre-flight health gate as a script torchrun starts (the same as ``python -m chaos.health.preflight``).

    torchrun --nnodes 2 --nproc-per-node 8 ... workloads/preflight.py --ckpt-dir /ckpt --baseline baseline.json

Its coverage of the faults a launch meets is measured by ``chaos coverage ci/gates/preflight-netns.yaml``.
"""

from trainkit import startup

startup.pause()  # the collector off over torch's import, as in every reference workload (trainkit/startup.py)
import torch.distributed  # noqa: E402,F401
from torch.nn.parallel import DistributedDataParallel  # noqa: E402,F401  (imports torch._dynamo with it)

from chaos.health.preflight import run  # noqa: E402

startup.resume()

if __name__ == "__main__":
    run()
