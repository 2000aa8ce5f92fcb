"""What `duplexact compare A B` and the baseline gate say when they pass (issue 31, friction):
a pass the sample could not have failed says so (the power note), conditions only in B are
listed as newly measured, and the header names A before B."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

RUN = ("--duplexact-limit=1", "-p", "no:cacheprovider", "-q")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A: oracle, take_turn (3 successes); B: silent, the same 3 instances (3 failures), gated
    against A; C: silent, take_turn and wait (wait is new)."""
    import subprocess

    where = tmp_path_factory.mktemp("cmp")
    out = {}
    for name, model, action, extra in (
            ("a", "oracle", "take_turn", ()),
            ("b", "silent", "take_turn", (f"--duplexact-baseline={where / 'a' / 'report.json'}",)),
            ("c", "silent", "take_turn,wait", ())):
        res = subprocess.run([sys.executable, "-m", "pytest", f"--duplexact-model={model}",
                              f"--duplexact-action={action}", f"--duplexact-run-dir={name}",
                              *RUN, *extra], cwd=where, capture_output=True, text=True,
                             timeout=600)
        out[name] = res
    return where, out


def _compare(where, a: str, b: str):
    return _compare_files(where, f"{a}/report.json", f"{b}/report.json")


def _compare_files(where, a, b):
    import subprocess

    return subprocess.run([sys.executable, "-m", "pytest_duplexact.cli", "compare", str(a),
                           str(b)], cwd=where, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_a_drop_too_small_to_judge_is_too_few_to_tell_never_a_green_pass(runs, tmp_path):
    """take_turn.delayed 3/3 -> 0/3 (every take_turn success lost): no test at these n could
    call it a drop, so it is not called a pass either: "too few to tell", not green (the gate
    and the exit status still do not fail on what could not be judged)."""
    where, out = runs
    gate = out["b"].stdout
    assert "passed baseline" not in gate
    assert "too few to tell: 4 of 4 comparison(s) lower on too few instances to show any " \
        "drop (take_turn.I, " in gate
    res = _compare(where, "a", "b")
    lines = res.stdout.splitlines()
    assert res.returncode == 0, res.stderr
    assert "passed baseline" not in res.stdout
    assert "take_turn.delayed.I" in res.stdout and "100.0 (1)" in res.stdout
    from pytest_duplexact.cli import main

    page = tmp_path / "c.html"
    assert main(["compare", str(where / "a" / "report.json"), str(where / "b" / "report.json"),
                 "--html", str(page), "--audio", "none"]) == 0
    html = page.read_text()
    assert '<p class="unsure">too few to tell: ' in html and '<p class="pass">too few' \
        not in html
    assert lines[0].startswith("A: a/report.json: oracle") and \
        lines[1].startswith("B: b/report.json: silent")
    assert lines[3].startswith("too few to tell: 4 of 4 comparison(s)"), lines
    [power] = [ln for ln in lines if "too few to tell (" in ln]
    assert ("too few to tell (4): even losing every baseline success would not reach alpha "
            "0.05 after Holm (take_turn.I: 3 pairs, at best p 1;") in power
    assert sum("lower, too few to tell" in ln for ln in lines) == 4
    # short, apart from the latency table (one row per timed action and condition)
    start = next(k for k, ln in enumerate(lines) if ln.startswith("Latency per action"))
    end = lines.index("", start) if "" in lines[start:] else len(lines)
    assert len(lines) - (end - start) <= 25 and res.stderr == ""


def test_conditions_only_in_b_are_newly_measured(runs):
    where, _ = runs
    res = _compare(where, "a", "c")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert ("newly measured in B (not in A): wait.I 100.0% (n 3), "
            "wait.inter_sentential_pause.I 100.0% (n 1)") in out
    assert "not compared: wait" not in out  # said once, as what it is
    assert out.splitlines()[0].startswith("A: a/report.json")


LAYOUT_PROBE = """<script>
window.addEventListener('load', () => {
  const out = [];
  for (const label of document.querySelectorAll('.pair label')) {
    const r = document.createRange();
    r.selectNodeContents(label.firstChild);
    const t = r.getBoundingClientRect(), a = label.querySelector('audio').getBoundingClientRect();
    out.push({text: label.firstChild.textContent.trim(),
              beside: t.top < a.bottom && t.bottom > a.top && t.right <= a.left + 1});
  }
  const pre = document.createElement('pre');
  pre.id = 'probe';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def test_each_player_s_label_stays_beside_its_player(runs, tmp_path):
    """The flip card's "output" label wrapped onto the line of the input player (in a
    half-page column both players do not fit on one line): each label now sits beside its
    own player, in a real browser at a laptop's width."""
    import json
    import re
    import subprocess

    from tests.report.views.test_chromium import CHROMIUM, FLAGS

    if not Path(CHROMIUM).is_file():
        pytest.skip("headless Chromium not installed (Debian: apt-get install -y chromium)")
    where, _ = runs
    res = subprocess.run([sys.executable, "-m", "pytest_duplexact.cli", "compare",
                          "a/report.json", "b/report.json", "--html", "page.html", "--audio",
                          "link"], cwd=where, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    page = (where / "page.html").read_text()
    assert "<h1>DuplexAct comparison: A oracle vs B silent</h1>" in page  # A first, as typed
    probe = where / "probe.html"
    probe.write_text(page.replace("</body>", LAYOUT_PROBE + "</body>"))
    got = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
                          "--window-size=1280,900", "--virtual-time-budget=5000",
                          "--dump-dom", probe.as_uri()],
                         capture_output=True, text=True, timeout=120)
    m = re.search(r'<pre id="probe">(.*?)</pre>', got.stdout, re.S)
    assert m, got.stderr[-2000:]
    labels = json.loads(m.group(1).replace("&quot;", '"'))
    assert len(labels) == 3 * 2 * 2  # 3 flips, both runs, input and output
    assert {lab["text"] for lab in labels} == {"input", "output"}
    assert all(lab["beside"] for lab in labels), labels


@pytest.mark.slow
def test_a_run_compared_with_itself_is_warned_of(runs, tmp_path):
    """`compare runs/a runs/a` (a typo) passed as "no change" with nothing to say."""
    import shutil

    where, _ = runs
    shutil.copy(where / "a" / "report.json", tmp_path / "copy.json")
    for other, said in ((f"{where}/a/report.json", "the same file"),
                        (tmp_path / "copy.json", "two copies of one report (the same bytes)")):
        res = _compare_files(where, "a/report.json", other)
        assert f"warning: A and B are {said}: nothing can differ; give the two runs to " \
            "compare" in res.stdout, res.stdout + res.stderr

