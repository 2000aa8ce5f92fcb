"""``--duplexact-shard=auto``: which shard this job is, from the job-array engine running it.

Read in this order; the first that is present decides (docs/sharding.md has a working recipe
for each):

==========================  ===============================================================
engine                      environment
==========================  ===============================================================
Slurm job array             ``SLURM_ARRAY_TASK_ID`` with ``SLURM_ARRAY_TASK_COUNT`` and
                            ``SLURM_ARRAY_TASK_MIN`` (and ``_STEP`` for ``--array=0-9:2``)
Kubernetes Indexed Job      ``JOB_COMPLETION_INDEX`` (0-based); N is stated, because a pod
                            is not told its Job's ``completions``: ``auto/N`` or
                            ``DUPLEXACT_SHARD_COUNT``
any CI matrix               ``DUPLEXACT_SHARD_INDEX`` (0-based) and
                            ``DUPLEXACT_SHARD_COUNT``, e.g. from GitHub Actions'
                            ``strategy.job-index`` / ``strategy.job-total``
==========================  ===============================================================

Every engine's index becomes our 1-based K of N; an index outside 1..N is an error naming the
variables it came from.
"""

from __future__ import annotations

import os
from typing import Mapping


class ShardEnvError(ValueError):
    pass


def _int(env: Mapping[str, str], name: str) -> int:
    try:
        return int(env[name])
    except ValueError:
        raise ShardEnvError(f"{name}={env[name]!r} is not an integer") from None


def _checked(k: int, n: int, source: str) -> tuple[int, int]:
    if n < 1 or not 1 <= k <= n:
        raise ShardEnvError(f"{source} gives shard {k} of {n}: not a shard (1 <= K <= N)")
    return k, n


def from_environment(spec: str = "auto", env: Mapping[str, str] | None = None
                     ) -> tuple[int, int]:
    """K, N for ``auto`` or ``auto/N``."""
    env = os.environ if env is None else env
    stated = None
    if spec.startswith("auto/"):
        try:
            stated = int(spec[5:])
        except ValueError:
            raise ShardEnvError(f"--duplexact-shard={spec}: expected auto or auto/N") from None
    elif spec != "auto":
        raise ShardEnvError(f"--duplexact-shard={spec}: expected auto or auto/N")
    if "SLURM_ARRAY_TASK_ID" in env:
        task = _int(env, "SLURM_ARRAY_TASK_ID")
        low = _int(env, "SLURM_ARRAY_TASK_MIN") if "SLURM_ARRAY_TASK_MIN" in env else 0
        step = _int(env, "SLURM_ARRAY_TASK_STEP") if "SLURM_ARRAY_TASK_STEP" in env else 1
        if step < 1:  # Slurm never sets one; a hand-made environment would mis-number shards
            raise ShardEnvError(f"SLURM_ARRAY_TASK_STEP={step}: the array's step must be >= 1")
        if "SLURM_ARRAY_TASK_COUNT" in env:
            n = _int(env, "SLURM_ARRAY_TASK_COUNT")
        elif "SLURM_ARRAY_TASK_MAX" in env:
            n = (_int(env, "SLURM_ARRAY_TASK_MAX") - low) // step + 1
        else:
            raise ShardEnvError("SLURM_ARRAY_TASK_ID is set but neither "
                                "SLURM_ARRAY_TASK_COUNT nor SLURM_ARRAY_TASK_MAX")
        if (task - low) % step:
            raise ShardEnvError(f"SLURM_ARRAY_TASK_ID={task} is not on the array's step "
                                f"({low}, {low + step}, ...)")
        return _checked((task - low) // step + 1, stated or n, "Slurm's job array")
    for index_var, what in (("JOB_COMPLETION_INDEX", "the Indexed Job"),
                            ("DUPLEXACT_SHARD_INDEX", "DUPLEXACT_SHARD_INDEX")):
        if index_var in env:
            n = stated or (_int(env, "DUPLEXACT_SHARD_COUNT")
                           if "DUPLEXACT_SHARD_COUNT" in env else None)
            if n is None:
                raise ShardEnvError(f"{index_var} is set but the shard count is not: use "
                                    "--duplexact-shard=auto/N or set DUPLEXACT_SHARD_COUNT")
            return _checked(_int(env, index_var) + 1, n, what)
    raise ShardEnvError("--duplexact-shard=auto: no job-array environment found (Slurm "
                        "SLURM_ARRAY_TASK_*, Kubernetes JOB_COMPLETION_INDEX, or "
                        "DUPLEXACT_SHARD_INDEX / DUPLEXACT_SHARD_COUNT)")
