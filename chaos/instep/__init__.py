"""In-step faults: what puts a fault inside the training step of a rank (a NaN in the loss, a flipped bit in a
parameter, an out-of-memory error) without changing the training script.

The harness arms them through a command folder (``command``); a bootstrap on the ranks' Python path
(``bootstrap/sitecustomize.py``, there only when a run arms an in-step fault) loads ``rank`` as soon as
the rank imports torch's optimizers; ``rank`` acts through torch's own global extension points
(optimizer step hooks, module forward hooks, tensor hooks) and writes an ``instep`` event where each
fault landed. Nothing here is imported by the harness's run loop except ``command``.
"""
