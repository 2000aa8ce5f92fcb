"""The lock card (``<run>/.lock``) outlives a killed run and is shown to the next one: it is
0600 like the other run files, and the command line it keeps has URL passwords, keys and
secret-looking option values masked, in the file and in the "in use" message."""

from __future__ import annotations

import json
import os
import stat
import sys

import pytest

from pytest_duplexact.run.runlock import LOCK_FILE, RunDirLocked, RunLock, masked_command

PASSWORD = "hunter2-pass"
KEY = "sk-live-0123456789"
ARGV = ["pytest", "--duplexact-model=lychee-fd", "--duplexact-model-option",
        f"server_url=wss://alice:{PASSWORD}@gpu.example:8080/ws",
        f"--duplexact-model-option=api_key={KEY}", "--token", "tok-abcdef", "-k", "take_turn"]


def test_the_card_is_private_and_masks_every_secret_of_the_command(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ARGV)
    lock = RunLock.acquire(tmp_path)
    try:
        path = tmp_path / LOCK_FILE
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        text = path.read_text()
        for secret in (PASSWORD, KEY, "tok-abcdef"):
            assert secret not in text
        command = json.loads(text)["command"]
        assert "wss://***@gpu.example:8080/ws" in command and "api_key=***" in command
        assert "-k take_turn" in command  # what is no secret stays readable
        with pytest.raises(RunDirLocked) as refused:
            RunLock.acquire(tmp_path)
        message = str(refused.value)
        assert "in use by another run" in message and "lychee-fd" in message
        assert PASSWORD not in message and KEY not in message
    finally:
        lock.release()


def test_a_card_an_older_release_left_is_masked_in_the_message_and_made_private(
        tmp_path, monkeypatch):
    path = tmp_path / LOCK_FILE
    path.write_text(json.dumps({"pid": 1, "host": "h", "started": "t",
                                "command": " ".join(ARGV)}))
    os.chmod(path, 0o644)
    import fcntl

    holder = os.open(path, os.O_RDWR)  # the older run, still holding the folder
    fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        with pytest.raises(RunDirLocked) as refused:
            RunLock.acquire(tmp_path)
    finally:
        os.close(holder)
    assert PASSWORD not in str(refused.value) and KEY not in str(refused.value)
    monkeypatch.setattr(sys, "argv", ARGV)
    RunLock.acquire(tmp_path).release()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


@pytest.mark.parametrize("given, shown", [
    ("--duplexact-keyword x --duplexact-max-cost=3", "--duplexact-keyword x --duplexact-max-cost=3"),
    ("-o OPENAI_API_KEY=abc --password zz", "-o OPENAI_API_KEY=*** --password ***"),
    ("--auth-token=abc --authority=x", "--auth-token=*** --authority=x"),
    ("http://u:p@h/ --model-option=secret=s", "http://***@h/ --model-option=secret=***"),
])
def test_masked_command(given, shown):
    assert masked_command(given) == shown
