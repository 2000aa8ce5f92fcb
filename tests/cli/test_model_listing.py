"""`duplexact models`: every built-in with what it needs and whether it is here; one model
checked with its options; keys reported as set or missing, never printed."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from pytest_duplexact.cli import main
from pytest_duplexact.models import BUILTINS
from pytest_duplexact.models.catalogue import requirements
from pytest_duplexact.models.catalogue.builtins import RECORDED

SECRET = "sk-test-never-printed-42"


def _models(capsys, *args) -> tuple[int, str]:
    rc = main(["models", *args])
    return rc, capsys.readouterr().out


def _top_level_names(module: str) -> set[str]:
    """What ``module`` defines at its top level, read from its source (nothing imported: the
    adapters' own packages need not be installed)."""
    # found from the package's folder, not importlib's find_spec: that answers from
    # sys.modules, where another test's leftover (a spec without an origin) once made it None
    import pytest_duplexact

    rel = Path(*module.split(".")[1:])
    path = Path(pytest_duplexact.__file__).parent / rel.with_suffix(".py")
    if not path.is_file():
        path = Path(pytest_duplexact.__file__).parent / rel / "__init__.py"
    source = path.read_text(encoding="utf-8")
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def test_every_row_names_a_factory_its_module_defines():
    """The table of built-ins is the one place a built-in is named: a row whose factory path
    is misspelt would only fail when someone runs that model."""
    for name, row in {**BUILTINS, "recorded:DIR": RECORDED}.items():
        module, _, attr = row.factory.partition(":")
        assert module.startswith("pytest_duplexact.models."), name
        assert attr in _top_level_names(module), (name, row.factory)
        assert row.summary and row.kind, name


def test_lists_every_builtin_with_its_needs(capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    real = requirements._importable
    monkeypatch.setattr(requirements, "_importable", lambda m: m != "moshi" and real(m))
    rc, out = _models(capsys)
    assert rc == 0
    heads = {line.split()[0]: line for line in out.splitlines() if not line.startswith(" ")}
    assert set(heads) >= set(BUILTINS) | {"recorded:DIR"}
    for name in ("silent", "oracle", "endpoint", "recorded:DIR"):
        assert heads[name].endswith("[ready]")
    assert heads["gpt-realtime"].endswith("[not ready]")
    assert "env OPENAI_API_KEY" in out and "missing" in out
    assert heads["moshi"].endswith("[not ready]")  # its package is "missing" here
    assert "package moshi ................. missing" in out
    assert "install ....................... pip install --no-deps moshi==0.2.13" in out
    for option in ("mimi_weights", "lm_weights", "tokenizer"):
        assert f"option {option} " in out


def test_the_list_says_what_each_model_says_on_its_own(capsys, monkeypatch):
    """gemini-live's key may be either of two variables and minicpm-o needs a server_url
    option: only their preflights know, and the list runs them too (it showed both [ready]
    with neither set while `duplexact models NAME` said not ready)."""
    for var in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "XAI_API_KEY",
                "DASHSCOPE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    _, listing = _models(capsys)
    heads = {line.split()[0]: line for line in listing.splitlines() if not line.startswith(" ")}
    for name in BUILTINS:
        _, alone = _models(capsys, name)
        state = alone.splitlines()[0].rpartition("  [")[2]
        assert heads[name].endswith("  [" + state), (name, heads[name], state)
    for name in ("gemini-live", "minicpm-o"):
        assert "[not ready: " in heads[name]
    monkeypatch.setenv("GOOGLE_API_KEY", SECRET)  # the second of gemini's two variables
    _, listing = _models(capsys)
    assert SECRET not in listing
    assert [h for h in listing.splitlines() if h.startswith("gemini-live ")][0].endswith(
        "[ready]")


def test_a_set_key_is_reported_not_printed(capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    rc, out = _models(capsys, "gpt-realtime")
    assert rc == 0 and SECRET not in out
    assert out.splitlines()[0].endswith("[ready]")
    assert any(line.split()[:2] == ["env", "OPENAI_API_KEY"] and line.endswith(" set")
               for line in out.splitlines())


def test_moshi_needs_options_until_given(capsys, tmp_path):
    pytest.importorskip("moshi")
    _, out = _models(capsys)
    assert "moshi  (stepped)" in out and "[needs options]" in out
    rc, out = _models(capsys, "moshi", "-o", f"mimi_weights={tmp_path / 'none.safetensors'}",
                      "-o", "lm_weights=hf://kyutai/moshiko-pytorch-bf16/model.safetensors",
                      "-o", "tokenizer=x")
    assert rc == 1 and "[not ready]" in out.splitlines()[0]
    assert "no such file" in out and "nothing is downloaded" in out


def test_moshi_ready_runs_its_preflight(capsys, tmp_path):
    pytest.importorskip("moshi")
    files = {}
    for option in ("mimi_weights", "lm_weights", "tokenizer"):
        files[option] = tmp_path / option
        files[option].write_bytes(b"not read by the check")
    args = [a for k, v in files.items() for a in ("-o", f"{k}={v}")]
    rc, out = _models(capsys, "moshi", *args)
    assert rc == 0 and out.splitlines()[0].endswith("[ready]")
    rc, out = _models(capsys, "moshi", *args, "-o", "dtype=int8")
    assert rc == 1 and "option dtype must be auto or one of" in out.splitlines()[0]


def test_unknown_name_and_bad_option(capsys):
    with pytest.raises(SystemExit, match="not a built-in model"):
        main(["models", "moshi-9000"])
    with pytest.raises(SystemExit, match="exactly one model name"):
        main(["models", "-o", "a=b"])
    with pytest.raises(SystemExit, match="not KEY=VALUE"):
        main(["models", "moshi", "-o", "novalue"])
