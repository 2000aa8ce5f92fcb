"""A hub that misbehaves never holds the run and never shows the token: one that accepts and
never answers, one that drips a byte at a time, one that refuses quoting the request headers
(fake hub on 127.0.0.1, tests/fakes/hf_hub.py); the download's deadline and Ctrl-C."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pytest_duplexact.released import ReleasedDataError, hub
from pytest_duplexact.released.snapshot import _download, parse_spec
from tests.fakes.hf_hub import FakeHub
from tests.support.tracebacks import shown_with_locals

REPO = "LincolnD/DuplexAct"
TOKEN = "hf_testLEAKCHECK0123456789abcdefABCDEF"


@pytest.fixture
def hub_env(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HUB_DOWNLOAD_TIMEOUT", "1")
    monkeypatch.setenv(hub.DEADLINE_ENV, "60")
    return tmp_path


def test_a_hub_that_never_answers_is_cut_at_the_read_timeout(hub_env, monkeypatch):
    lines = []
    with FakeHub(REPO, hub_env, misbehave="silent") as fake:
        monkeypatch.setenv("HF_ENDPOINT", fake.endpoint)
        with pytest.raises(ReleasedDataError, match="cannot reach the hub.*ReadTimeout"):
            _download(REPO, None, lines.append)
        assert fake.requests  # it was asked, and never answered
    assert any("downloading the parquet files of" in ln for ln in lines)


def test_a_dripping_hub_is_cut_at_the_download_deadline(hub_env, monkeypatch):
    monkeypatch.setenv(hub.DEADLINE_ENV, "2")  # each byte comes well within the read timeout
    with FakeHub(REPO, hub_env, misbehave="drip", drip_s=0.2) as fake:
        monkeypatch.setenv("HF_ENDPOINT", fake.endpoint)
        with pytest.raises(ReleasedDataError, match=f"no answer within 2 s.*{hub.DEADLINE_ENV}"):
            _download(REPO, None)


def test_ctrl_c_during_the_wait_kills_the_download_and_propagates():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                             stdout=subprocess.PIPE)
    said = []

    def log(line):  # the user presses Ctrl-C while the progress line is shown
        said.append(line)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        hub.wait(child, deadline=120, log=log, what="downloading x", every=0.05)
    assert child.poll() is not None  # killed, not left running
    assert said and said[0].startswith("duplexact: still downloading x") and "Ctrl-C" in said[0]


@pytest.mark.parametrize("refusal", ["echo401", "echo400"])
def test_a_refusal_quoting_the_token_is_scrubbed(hub_env, monkeypatch, capfd, refusal):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    with FakeHub(REPO, hub_env, misbehave=refusal) as fake:
        monkeypatch.setenv("HF_ENDPOINT", fake.endpoint)
        with pytest.raises(ReleasedDataError, match="request headers were") as refused:
            _download(REPO, None, print)
    printed = capfd.readouterr()
    assert "Bearer <" in str(refused.value)  # the quote is there, masked
    for text in (str(refused.value), shown_with_locals(refused.value), printed.out,
                 printed.err):
        assert TOKEN not in text


def test_the_deadline_variable_is_checked():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(hub.DEADLINE_ENV, "soon")
        with pytest.raises(ReleasedDataError, match=f"{hub.DEADLINE_ENV}='soon'"):
            hub.deadline_s()


def test_an_unknown_home_folder_is_a_clear_error(capsys):
    with pytest.raises(ReleasedDataError, match="no home folder for '~nonexist-duplexact-user'"):
        parse_spec("~nonexist-duplexact-user/data")
    from pytest_duplexact.cli import main

    assert main(["inspect", "hf:~nonexist-duplexact-user/data"]) == 1  # the source said once
    assert capsys.readouterr().err == "duplexact inspect: hf:~nonexist-duplexact-user/data: no " \
        "home folder for '~nonexist-duplexact-user'\n"


def test_a_pytest_run_shows_the_download_and_stops_at_the_hubs_silence(pytester, hub_env,
                                                                        monkeypatch):
    with FakeHub(REPO, hub_env, misbehave="silent") as fake:
        monkeypatch.setenv("HF_ENDPOINT", fake.endpoint)
        res = pytester.runpytest(f"--duplexact-data=hf:{REPO}", "--duplexact-model=silent",
                                 "-p", "no:randomly", "-p", "no:cacheprovider")
    shown = res.stdout.str() + res.stderr.str()
    assert res.ret == 4, shown  # a usage error, no INTERNALERROR
    assert "duplexact: downloading the parquet files of LincolnD/DuplexAct" in shown
    assert "cannot reach the hub" in shown and "INTERNALERROR" not in shown
