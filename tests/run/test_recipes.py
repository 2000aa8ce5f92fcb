"""The sharding recipes in docs/recipes/ (sbatch array, Kubernetes Indexed Job, GitHub Actions
matrix): what can be checked here is that each engine's environment, as the recipe sets it
up, gives every shard exactly once through --duplexact-shard=auto."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml

from pytest_duplexact.run.shards import from_environment

RECIPES = Path(__file__).resolve().parents[2] / "docs" / "recipes"


def test_sbatch_array_tasks_cover_every_shard_once():
    text = (RECIPES / "slurm-array.sbatch").read_text()
    low, high = map(int, re.search(r"#SBATCH --array=(\d+)-(\d+)", text).groups())
    assert "--duplexact-shard=auto" in text
    n = high - low + 1
    shards = [from_environment("auto", {
        "SLURM_ARRAY_TASK_ID": str(t), "SLURM_ARRAY_TASK_COUNT": str(n),
        "SLURM_ARRAY_TASK_MIN": str(low), "SLURM_ARRAY_TASK_MAX": str(high)})
        for t in range(low, high + 1)]
    assert shards == [(k, n) for k in range(1, n + 1)]


def test_indexed_job_states_its_completions_once_and_covers_every_shard():
    job = yaml.safe_load((RECIPES / "k8s-indexed-job.yaml").read_text())
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed"
    (container,) = spec["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert int(env["DUPLEXACT_SHARD_COUNT"]) == spec["completions"]
    assert "--duplexact-shard=auto" in " ".join(container["args"])
    shards = [from_environment("auto", {**env, "JOB_COMPLETION_INDEX": str(i)})
              for i in range(spec["completions"])]
    assert shards == [(k, spec["completions"]) for k in range(1, spec["completions"] + 1)]


def test_github_matrix_maps_job_index_and_total_and_merges_by_glob():
    wf = yaml.safe_load((RECIPES / "github-matrix.yml").read_text())
    shard = wf["jobs"]["shard"]
    assert shard["env"] == {"DUPLEXACT_SHARD_INDEX": "${{ strategy.job-index }}",
                            "DUPLEXACT_SHARD_COUNT": "${{ strategy.job-total }}"}
    total = len(shard["strategy"]["matrix"]["shard"])
    shards = [from_environment("auto", {"DUPLEXACT_SHARD_INDEX": str(i),
                                        "DUPLEXACT_SHARD_COUNT": str(total)})
              for i in range(total)]  # strategy.job-index is 0-based
    assert shards == [(k, total) for k in range(1, total + 1)]
    steps = " ".join(s.get("run", "") for s in wf["jobs"]["merge"]["steps"])
    assert "duplexact merge 'shards/*/report.json'" in steps
    assert wf["jobs"]["merge"]["needs"] == "shard"


def test_github_matrix_gates_the_merged_run_with_gates_that_parse():
    """The merge job is where the release is gated (each shard's gates judged one shard);
    its gates are ones `duplexact merge --gate` accepts. Every install step takes the
    package from DUPLEXACT_PIP (it is not on PyPI) and torch from the CPU index first."""
    from pytest_duplexact.report.sections.gates import parse

    wf = yaml.safe_load((RECIPES / "github-matrix.yml").read_text())
    merge_step = next(s["run"] for s in wf["jobs"]["merge"]["steps"]
                      if "duplexact merge" in s.get("run", ""))
    words = shlex.split(merge_step)
    gates = [w for before, w in zip(words, words[1:]) if before == "--gate"]
    assert len(gates) >= 2 and all(parse(g) for g in gates)
    installs = [s["run"] for job in wf["jobs"].values() for s in job["steps"]
                if "pip install" in s.get("run", "")]
    assert len(installs) == 2
    for line in installs:
        assert '"$DUPLEXACT_PIP"' in line and line.startswith("pip install $TORCH_CPU && ")
    assert "--index-url https://download.pytorch.org/whl/cpu" in wf["env"]["TORCH_CPU"]
    shard_run = next(s["run"] for s in wf["jobs"]["shard"]["steps"]
                     if "pytest" in s.get("run", ""))
    assert shard_run.endswith("|| [ $? -eq 1 ]")  # only "some missed" goes on to the merge
