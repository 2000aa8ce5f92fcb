"""Every pytest command or option a hint prints pastes as printed: `duplexact models` (the
list, each model by name, the paper's routes) and each built-in's not-ready message parse
with the plugin's own options, and none carries a bare ``-o`` (pytest's --override-ini: it
would silently set an ini value and the model would never get its option)."""

from __future__ import annotations

import argparse

import pytest

from pytest_duplexact.cli.model_listing import render
from pytest_duplexact.models import preflight
from pytest_duplexact.models.catalogue.builtins import BUILTINS
from pytest_duplexact.models.catalogue.paper_models import paper_names
from pytest_duplexact.pytest_plugin import options

_TAKES_VALUE = {"--duplexact-model-option", "-o"}  # the value follows as its own word
_KEYS = ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "XAI_API_KEY",
         "DASHSCOPE_API_KEY")


class _Argparse:
    """The plugin's options (options.addoption) on a plain argparse parser: what pytest's
    own parser accepts of them, without pytest's other options (so a bare -o is unknown)."""

    def __init__(self):
        self.parser = argparse.ArgumentParser(add_help=False)
        self.parser.add_argument("paths", nargs="*")

    def getgroup(self, *_a, **_kw):
        return self

    def addoption(self, *flags, **kw):
        self.parser.add_argument(*flags, **kw)

    def addini(self, *_a, **_kw):
        pass


def _plugin_parser() -> argparse.ArgumentParser:
    shim = _Argparse()
    options.addoption(shim)
    return shim.parser


def fragments(text: str) -> list[list[str]]:
    """Each pytest command (from ``pytest``) or run of --duplexact-* options in ``text``, as
    words: from its first word while the words are options, their values and paths."""
    out = []
    for line in text.splitlines():
        words = line.replace("[", " ").split()
        i = 0
        while i < len(words):
            w = words[i]
            if w == "pytest" or w.startswith("--duplexact-"):
                frag = []
                j = i + (w == "pytest")
                while j < len(words):
                    cur = words[j].rstrip("]);,")
                    if cur.startswith("-"):
                        frag.append(cur)
                    elif frag and frag[-1] in _TAKES_VALUE:
                        frag.append(cur)
                    else:
                        break
                    if words[j] != cur:  # the sentence goes on after ")" or ","
                        j += 1
                        break
                    j += 1
                if frag:
                    out.append(frag)
                i = j
            else:
                i += 1
    return out


def check_pasteable(text: str) -> int:
    """Asserts every fragment parses with the plugin's options alone; returns how many."""
    parser = _plugin_parser()
    frags = fragments(text)
    for frag in frags:
        assert "-o" not in frag, f"a bare -o (pytest's --override-ini) in: {' '.join(frag)}"
        _, unknown = parser.parse_known_args(frag)
        assert not unknown, f"not a plugin option: {unknown} in: {' '.join(frag)}"
        ns = parser.parse_args(frag)
        for kv in getattr(ns, options.BY_NAME["model-option"].dest) or ():
            assert "=" in kv and kv.split("=", 1)[0], f"not KEY=VALUE: {kv!r}"
    return len(frags)


def test_the_fragment_reader_catches_the_old_hint():
    old = ("freeze-omni  [not ready: freeze-omni: no server. Start the model's own server "
           "(docs/models.md) and pass its address as --duplexact-model-option "
           "server_url=https://HOST:8081 -o verify=false]")
    with pytest.raises(AssertionError, match="bare -o"):
        check_pasteable(old)
    assert fragments("pass --duplexact-model-option url=ws://HOST:8765 (docs/x.md)") == [
        ["--duplexact-model-option", "url=ws://HOST:8765"]]
    with pytest.raises(AssertionError, match="not a plugin option"):
        check_pasteable("pytest --duplexact-model=x --duplexact-modle-option a=b")


@pytest.mark.parametrize("keys", [False, True], ids=["no keys", "keys"])
def test_every_line_duplexact_models_prints_pastes(monkeypatch, keys):
    for k in _KEYS:
        if keys:
            monkeypatch.setenv(k, "sk-test-not-a-real-key-0123456789")
        else:
            monkeypatch.delenv(k, raising=False)
    text, _ = render()
    for name in [*BUILTINS, *paper_names()]:
        text += render([name])[0]
    assert check_pasteable(text) >= 10, text  # the hints and the paper's routes were read


def test_every_not_ready_message_pastes(monkeypatch):
    for k in _KEYS:
        monkeypatch.delenv(k, raising=False)
    said = []
    for name, req in BUILTINS.items():
        said += req.problems({})
        try:
            preflight(name)
        except Exception as e:  # the adapter's own, user-facing message
            said.append(str(e))
    text = "\n".join(said)
    assert "verify=false" in text  # the socket.io servers' hint is among them
    assert check_pasteable(text) >= 5, text


def test_duplexact_models_takes_an_option_as_pytest_spells_it(capsys):
    """A hint's --duplexact-model-option pastes into `duplexact models NAME` too."""
    from pytest_duplexact.cli import main

    assert main(["models", "lychee-fd", "--duplexact-model-option", "server_url=ftp://x"]) == 1
    assert "server_url 'ftp://x' must start with http:// or https://" in capsys.readouterr().out
