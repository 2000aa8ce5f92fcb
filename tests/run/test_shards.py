"""--duplexact-shard=auto from the job-array engines users run (env parsing only: no engine is
started), and duplexact merge over globs of shard outputs."""

from __future__ import annotations

import pytest

from pytest_duplexact.run.selection import SelectionError, parse_shard
from pytest_duplexact.run.shards import ShardEnvError, from_environment


@pytest.mark.parametrize("env,expected", [
    # sbatch --array=0-3: four tasks, ids 0..3
    ({"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "4",
      "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "3"}, (1, 4)),
    ({"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_COUNT": "4",
      "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "3"}, (4, 4)),
    # sbatch --array=1-8 (1-based ids)
    ({"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_MIN": "1",
      "SLURM_ARRAY_TASK_MAX": "8"}, (5, 8)),
    # sbatch --array=0-9:3 -> ids 0, 3, 6, 9
    ({"SLURM_ARRAY_TASK_ID": "6", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "9",
      "SLURM_ARRAY_TASK_STEP": "3", "SLURM_ARRAY_TASK_COUNT": "4"}, (3, 4)),
    # Kubernetes Indexed Job, completions stated by the user
    ({"JOB_COMPLETION_INDEX": "0", "DUPLEXACT_SHARD_COUNT": "5"}, (1, 5)),
    # a CI matrix (GitHub Actions: strategy.job-index / job-total)
    ({"DUPLEXACT_SHARD_INDEX": "2", "DUPLEXACT_SHARD_COUNT": "3"}, (3, 3)),
])
def test_auto_reads_each_engine(env, expected):
    assert from_environment("auto", env) == expected
    assert parse_shard("auto", env) == expected


def test_auto_slash_n_states_the_count_for_an_indexed_job():
    assert from_environment("auto/8", {"JOB_COMPLETION_INDEX": "7"}) == (8, 8)


@pytest.mark.parametrize("env,message", [
    ({}, "no job-array environment found"),
    ({"JOB_COMPLETION_INDEX": "1"}, "auto/N or set DUPLEXACT_SHARD_COUNT"),
    ({"DUPLEXACT_SHARD_INDEX": "3", "DUPLEXACT_SHARD_COUNT": "3"}, "shard 4 of 3"),
    ({"SLURM_ARRAY_TASK_ID": "x", "SLURM_ARRAY_TASK_COUNT": "2"}, "not an integer"),
    ({"SLURM_ARRAY_TASK_ID": "1"}, "neither SLURM_ARRAY_TASK_COUNT"),
    ({"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "9",
      "SLURM_ARRAY_TASK_STEP": "3"}, "not on the array's step"),
    ({"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_MAX": "9", "SLURM_ARRAY_TASK_STEP": "0"},
     "SLURM_ARRAY_TASK_STEP=0: the array's step must be >= 1"),
    ({"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_COUNT": "5", "SLURM_ARRAY_TASK_STEP": "-2"},
     "SLURM_ARRAY_TASK_STEP=-2: the array's step must be >= 1"),
])
def test_auto_errors_say_what_is_missing(env, message):
    with pytest.raises(ShardEnvError, match=message):
        from_environment("auto", env)
    with pytest.raises(SelectionError, match=message):
        parse_shard("auto", env)


def test_auto_shards_partition_the_set():
    """The K/N taken from an engine is the same deterministic split as an explicit one."""
    from pytest_duplexact.data.instance import bundled_root, load_dataset
    from pytest_duplexact.rules import requires
    from pytest_duplexact.run.selection import Selection, select

    data = load_dataset(bundled_root(), requires=requires).instances
    parts = [select(data, Selection(shard=parse_shard(
        "auto", {"SLURM_ARRAY_TASK_ID": str(k), "SLURM_ARRAY_TASK_COUNT": "3",
                 "SLURM_ARRAY_TASK_MIN": "0"}))) for k in range(3)]
    ids = [i.id for p in parts for i in p]
    assert sorted(ids) == sorted(i.id for i in select(data, Selection()))
