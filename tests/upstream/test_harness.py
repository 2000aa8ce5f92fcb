"""The harness's own pieces, without any checkout: the reader of the start commands
docs/models.md prints (support.docs_command) and benchmarks/upstream.py's table."""

from __future__ import annotations

import sys

import pytest

from tests.upstream import support


def bench():
    from benchmarks import upstream

    return upstream


@pytest.fixture
def page(tmp_path, monkeypatch):
    def write(text: str) -> None:
        (tmp_path / "models.md").write_text(text)
        monkeypatch.setattr(support, "DOCS", tmp_path / "models.md")
    return write


def test_docs_command_reads_an_inline_span_wrapped_across_lines(page):
    page("then `python3 launch_gateway.py --port\n8082 --ssl` (or not)\n\n```sh\n"
         "python3 launch_gateway.py --http\n```\n")
    assert support.docs_command("python3 launch_gateway.py") == \
        ["python3", "launch_gateway.py", "--port", "8082", "--ssl"]


def test_docs_command_reads_a_code_block_line_and_its_continuations(page):
    page("```sh\npython -m x.bridge --host 0.0.0.0 \\\n  --weights /w  # on the GPU box\n```\n"
         "| `m` | `python -m x.bridge --port 1` |\n")
    assert support.docs_command("python -m x.bridge") == \
        ["python", "-m", "x.bridge", "--host", "0.0.0.0", "--weights", "/w"]


def test_docs_commands_lists_every_printed_one_in_page_order(page):
    page("| `m` | `python -m x.bridge --port 1` |\n```sh\npython -m x.bridge --port 2\n```\n")
    assert [argv[-1] for argv in support.docs_commands("python -m x.bridge")] == ["1", "2"]


def test_docs_command_needs_arguments_and_says_when_the_page_has_none(page):
    page("the bridge (`python -m x.bridge`) runs beside the model\n")
    with pytest.raises(AssertionError, match="prints no command starting"):
        support.docs_command("python -m x.bridge")


def test_the_table_has_one_line_per_model_however_many_rows_it_recorded():
    b = bench()
    rows = [{"model": "m", "checked": "o/n@1", "date": "d", "connects": True, "audio": True,
             "notes": "their client"},
            {"model": "m", "checked": "o/n@1", "date": "d", "connects": True, "audio": True,
             "barge_in_stop": True, "onset_err_ms_median": 2.5, "onset_err_ms_max": 3.3,
             "sessions": None, "notes": "their handler"}]
    table = b.render(rows, {})
    lines = [x for x in table.splitlines() if x.startswith("| m |")]
    assert lines == ["| m | yes | yes | n/a | yes | 2.5 / 3.3 | n/a | o/n@1 (d) |"]
    assert "- m: their client; their handler" in table


def test_dir_takes_a_module_and_a_folder(monkeypatch, tmp_path, capsys):
    b = bench()
    monkeypatch.setenv(support.UPSTREAM_ENV, str(tmp_path))
    monkeypatch.setattr(sys, "argv", ["upstream.py", "--dir", "vllm_omni"])
    assert b.main() == 2
    assert "--dir takes MODULE=FOLDER" in capsys.readouterr().err
