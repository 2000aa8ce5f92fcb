"""Behaviour equivalence of two versions of the package (a restructuring must not
change a single result).

    python -m benchmarks.equivalence record REF_DIR        # runs with the package on PYTHONPATH
    python -m benchmarks.equivalence compare REF_DIR NEW_DIR
    python -m benchmarks.equivalence check REF_DIR         # record into a temp dir, compare

A recording is five plugin runs over the bundled fixture set, serial, from a scratch folder:
the built-in ``silent``, ``oracle`` and ``endpoint`` models offline, and ``oracle`` and
``endpoint`` judged (text judge, audio judge, LLM simulator) against the fake OpenAI server of
the tests on 127.0.0.1. ``compare`` checks, per run, ``report.json`` without its volatile keys
(``created``; the bundled dataset's path is masked, its fingerprint kept), the terminal
output (durations dropped, the run folder masked) and every file under ``instances/`` byte for
byte (in JSON files the fake judge server's port and the measured wall time are masked: they
differ between any two runs of the same code), and, for the judged runs, the
chat requests the judges and the simulator sent (``requests.json``: model, messages and schema
name, in order; audio parts replaced by a digest of their bytes).

The reference is made once from the original code (e.g. ``git worktree add /tmp/orig 700ed09``
and ``PYTHONPATH=/tmp/orig python -m benchmarks.equivalence record REF``) and kept outside the
repository. A ``compare`` prints every difference and exits 1 when there is one.

Known, intended difference: from the commit "Segment keeps its words" on, a model segment that
straddles the instant a judge prompt is cut at (cue start / cue end / distractor end) is split
by its timed words, as docs/judges.md promised (``model_words``), where the original code,
never given the words, split it in proportion to time. ``--allow-model-words`` accepts files
that differ only in the judges' prompt fields (``evidence.fields``), the request keys hashed
from them and the requests' user messages; verdicts, timings and every other byte must match.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

KEY = "sk-equivalence-fake-0000000000"
VOLATILE = ("created",)
# What differs between any two runs of the same code: the fake judge server's port (in the
# judges' endpoint_url) and the wall time a run measured (its figure and its unit).
_PORT = re.compile(r"127\.0\.0\.1:\d+")
_WALL = re.compile(r"(wall_s\": |wall )[0-9.]+( (s|min|h)\b)?")


_PROGRESS = re.compile(r"duplexact \d+/\d+ \|")


def _mask(text: str) -> str:
    return _WALL.sub(r"\g<1>0", _PORT.sub("127.0.0.1:<port>", text))
OFFLINE = ("silent", "oracle", "endpoint")
JUDGED = ("oracle", "endpoint")


def _env(pythonpath: str | None) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_XDIST", "PYTEST_ADDOPTS", "DUPLEXACT_"))}
    env.pop("OPENAI_BASE_URL", None)
    env["OPENAI_API_KEY"] = KEY
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return env


def _pytest(home: Path, run_dir: Path, model: str, extra: list[str], env: dict) -> None:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
           f"--duplexact-model={model}", f"--duplexact-run-dir={run_dir}", *extra]
    res = subprocess.run(cmd, cwd=home, env=env, capture_output=True, text=True, timeout=1800)
    (run_dir.parent / f"{run_dir.name}.log").write_text(res.stdout + res.stderr)
    if res.returncode not in (0, 1):  # 1: the model missed some instances
        raise SystemExit(f"{' '.join(cmd)} exited {res.returncode}:\n{res.stdout[-3000:]}"
                         f"{res.stderr[-3000:]}")


def _digest_audio(obj):
    """Requests with every base64 audio part replaced by the SHA-256 of its text."""
    if isinstance(obj, dict):
        if obj.get("type") == "input_audio" and isinstance(obj.get("input_audio"), dict):
            data = obj["input_audio"].get("data", "")
            return {**obj, "input_audio": {**obj["input_audio"],
                                           "data": hashlib.sha256(data.encode()).hexdigest()}}
        return {k: _digest_audio(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_digest_audio(v) for v in obj]
    return obj


def record(out: Path, pythonpath: str | None = None) -> None:
    from tests.fakes import FakeOpenAI

    out.mkdir(parents=True, exist_ok=True)
    env = _env(pythonpath)
    with tempfile.TemporaryDirectory(prefix="duplexact-equiv-") as home:
        home = Path(home)
        for model in OFFLINE:
            print(f"recording {model} ...", flush=True)
            _pytest(home, out / model, model, [], env)
        for model in JUDGED:
            print(f"recording judged-{model} ...", flush=True)
            with FakeOpenAI() as server:
                run = out / f"judged-{model}"
                # the fake's port changes every time: it reaches the clients through the
                # environment, so it is in no setting, fingerprint or report
                _pytest(home, run, model,
                        ["--duplexact-judge=gpt-5.4", "--duplexact-audio-judge=gpt-audio-1.5",
                         "--duplexact-simulator=llm"],
                        {**env, "DUPLEXACT_JUDGE_BASE_URL": server.url,
                         "OPENAI_BASE_URL": server.url})
                reqs = [{"endpoint": r.endpoint, "status": r.status,
                         "body": _digest_audio(r.json)} for r in server.requests]
            (run / "requests.json").write_text(json.dumps(reqs, indent=1, sort_keys=True))


def _report(path: Path, strip_fields: bool = False) -> str:
    """The report without its volatile keys; the dataset's path (the checkout's bundled
    fixtures, which moves with the checkout) is masked, its content fingerprint kept."""
    rep = json.loads(_mask(path.read_text(encoding="utf-8")))
    rep = {k: v for k, v in rep.items() if k not in VOLATILE}
    if isinstance(rep.get("settings"), dict) and "dataset" in rep["settings"]:
        rep["settings"] = {**rep["settings"], "dataset": "<bundled>"}
    return json.dumps(_strip(rep) if strip_fields else rep, indent=1, sort_keys=True)


def _strip(obj):
    """``obj`` without what the model's words change: the judges' prompt fields and the
    request keys hashed from them (in ``evidence``), and the user message of a request."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if k == "evidence" and isinstance(v, dict):
                v = {ek: ev for ek, ev in v.items() if ek not in ("fields", "request_key")}
            if k == "messages" and isinstance(v, list):
                v = [m for m in v if not (isinstance(m, dict) and m.get("role") == "user")]
            out[k] = _strip(v)
        return out
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj


def _terminal(log: Path, run_root: Path) -> list[str]:
    """pytest's output of a run (failure reasons, timelines, the Table 4 / 16 summaries)
    without its durations and with the run's own folder masked. The live progress lines are
    left out: they are printed by the clock (every tenth of the run or every minute) and carry
    its elapsed time and time left, which differ between any two runs of the same code; what
    they tally is compared in report.json."""
    if not log.is_file():
        return []
    return [_mask(line.replace(str(run_root), "<runs>")) for line in log.read_text().splitlines()
            if not re.search(r" in [0-9.]+s\b", line) and not _PROGRESS.match(line)]


def _same_file(a: Path, b: Path, strip_fields: bool) -> bool:
    if a.read_bytes() == b.read_bytes():
        return True
    if a.suffix == ".json":
        ta, tb = _mask(a.read_text()), _mask(b.read_text())
        if ta == tb:
            return True
        if strip_fields and a.name == "outcome.json":
            return _strip(json.loads(ta)) == _strip(json.loads(tb))
    return False


def compare(ref: Path, new: Path, allow_model_words: bool = False) -> bool:
    """Prints every difference; with ``allow_model_words`` a difference only in the judges'
    prompt fields (and so their request keys and user messages) is counted, not failed."""
    same, files, intended = True, 0, 0
    for run in sorted(p for p in ref.iterdir() if p.is_dir()):
        other = new / run.name
        if not other.is_dir():
            print(f"MISSING run {run.name}")
            same = False
            continue
        files += 1
        a_rep, b_rep = _report(run / "report.json"), _report(other / "report.json")
        if a_rep != b_rep:
            if allow_model_words and (_report(run / "report.json", True)
                                      == _report(other / "report.json", True)):
                intended += 1
            else:
                print(f"DIFF {run.name}/report.json")
                same = False
        files += 1
        if _terminal(ref / f"{run.name}.log", ref) != _terminal(new / f"{run.name}.log", new):
            if not allow_model_words:  # the judges' reasons print their fields' effect
                print(f"DIFF {run.name}.log (terminal output)")
                same = False
        a = {p.relative_to(run): p for p in (run / "instances").rglob("*") if p.is_file()}
        b = {p.relative_to(other): p for p in (other / "instances").rglob("*") if p.is_file()}
        for rel in sorted(set(a) | set(b)):
            files += 1
            if rel not in a or rel not in b:
                print(f"{'EXTRA' if rel not in a else 'MISSING'} {run.name}/{rel}")
                same = False
            elif not _same_file(a[rel], b[rel], False):
                if _same_file(a[rel], b[rel], allow_model_words):
                    intended += 1
                else:
                    print(f"DIFF {run.name}/{rel}")
                    same = False
        if (run / "requests.json").exists():
            files += 1
            ra = json.loads((run / "requests.json").read_text())
            rb = json.loads((other / "requests.json").read_text())
            if ra != rb:
                changed = sum(x != y for x, y in zip(ra, rb)) + abs(len(ra) - len(rb))
                if allow_model_words and _strip(ra) == _strip(rb):
                    print(f"requests {run.name}: {changed} of {len(ra)} differ in their user "
                          "message only (the model's words)")
                    intended += 1
                else:
                    print(f"DIFF {run.name}/requests.json: {changed} of {len(ra)} requests")
                    same = False
    extra = f" ({intended} differ only in the judges' prompt fields)" if intended else ""
    print(f"compared {files} files: {'identical' if same else 'DIFFERENT'}{extra}")
    return same


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("out", type=Path)
    c = sub.add_parser("compare")
    c.add_argument("ref", type=Path)
    c.add_argument("new", type=Path)
    k = sub.add_parser("check")
    k.add_argument("ref", type=Path)
    k.add_argument("--keep", type=Path, help="record here instead of a temp dir")
    for p in (c, k):
        p.add_argument("--allow-model-words", action="store_true",
                       help="accept judge requests that differ only by the model's words")
    args = ap.parse_args(argv)
    here = os.environ.get("PYTHONPATH") or str(ROOT)
    if args.cmd == "record":
        record(args.out, here)
        return 0
    if args.cmd == "compare":
        return 0 if compare(args.ref, args.new, args.allow_model_words) else 1
    if args.keep:
        record(args.keep, here)
        return 0 if compare(args.ref, args.keep, args.allow_model_words) else 1
    with tempfile.TemporaryDirectory(prefix="duplexact-equiv-new-") as tmp:
        record(Path(tmp), here)
        return 0 if compare(args.ref, Path(tmp), args.allow_model_words) else 1


if __name__ == "__main__":
    sys.exit(main())
