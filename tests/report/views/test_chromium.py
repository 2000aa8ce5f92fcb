"""The HTML page in a real browser: headless Chromium renders it without console errors,
every section is there, and the embedded audio decodes. Skipped where Debian's chromium is
not installed (CI: `apt-get install -y chromium`)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_duplexact.report.views import html as html_view
from tests.report.helpers import mixed_report, parsed, write_run_dir

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).is_file(),
    reason="headless Chromium not installed (Debian: apt-get install -y chromium)")

# Flags for root in a machine with no network (docs of this workplace's python machine).
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0"]

# Put into a copy of the page (the page itself has no script): the head part collects every
# script error, console.error and failed resource load from the start; the tail part records
# what the browser made of the page into the DOM, which --dump-dom then prints.
HEAD_PROBE = """<script>
window.__errors = [];
window.addEventListener('error', e => window.__errors.push(
  e.message || ('failed to load ' + (e.target && (e.target.src || e.target.href)))), true);
const _err = console.error;
console.error = (...a) => { window.__errors.push(a.join(' ')); _err(...a); };
</script>"""
PROBE = """<script>
(async () => {
  const out = {sections: [...document.querySelectorAll('section')].map(s => s.id),
               svgs: document.querySelectorAll('svg').length, audio: []};
  for (const a of document.querySelectorAll('audio')) {
    a.preload = 'auto';
    out.audio.push(await new Promise(done => {
      if (a.readyState >= 1) return done({duration: a.duration});
      a.addEventListener('loadedmetadata', () => done({duration: a.duration}));
      a.addEventListener('error', () => done({error: a.error && a.error.code}));
      a.load();
    }));
  }
  out.errors = window.__errors;
  const pre = document.createElement('pre');
  pre.id = 'probe';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"""


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args],
                          capture_output=True, text=True, timeout=120)


def test_page_renders_every_section_and_plays_its_audio(tmp_path):
    rep = mixed_report()
    report_path = write_run_dir(tmp_path / "run", rep)
    page = html_view.render(parsed(rep), report_path=report_path)
    probe = tmp_path / "probe.html"
    probe.write_text(page.replace("<head>", "<head>" + HEAD_PROBE, 1)
                     .replace("</body>", PROBE + "</body>"))
    res = _chromium(tmp_path, "--virtual-time-budget=15000", "--dump-dom", probe.as_uri())
    assert res.returncode == 0, res.stderr[-2000:]
    m = re.search(r'<pre id="probe">(.*?)</pre>', res.stdout, re.S)
    assert m, "the probe script did not finish: " + res.stderr[-2000:]
    got = json.loads(m.group(1).replace("&quot;", '"'))
    assert got["sections"] == [s for s in html_view.SECTIONS if s != "baseline"]
    assert got["svgs"] == 5 + 7  # charts + one timeline per failed instance
    assert len(got["audio"]) == 14
    for a in got["audio"]:
        assert "error" not in a and a["duration"] == pytest.approx(4.0, abs=0.1), a
    assert got["errors"] == []
    # Chromium logs every console message (and uncaught errors) as a CONSOLE line: none
    assert [ln for ln in res.stderr.splitlines() if ":CONSOLE" in ln] == []


def test_screenshot_is_not_blank(tmp_path):
    rep = mixed_report()
    page = tmp_path / "page.html"
    html_view.write(parsed(rep), page, report_path=write_run_dir(tmp_path / "run", rep),
                    audio="none")
    shot = tmp_path / "shot.png"
    res = _chromium(tmp_path, "--hide-scrollbars", "--window-size=1280,2400",
                    f"--screenshot={shot}", page.as_uri())
    assert res.returncode == 0 and shot.is_file(), res.stderr[-2000:]
    from PIL import Image

    img = Image.open(shot).convert("L")
    assert img.size == (1280, 2400)
    # a rendered page has many shades (text, bars, heat map), a blank one a single colour
    assert len(img.getcolors(maxcolors=1 << 16) or []) > 50
