"""The network adapters refuse a non-positive timeout or chunk size before connecting, naming
the option (model_options.require_positive), the first one in the adapter's order."""

from __future__ import annotations

import pytest

from pytest_duplexact.models.model_options import ModelConfigError
from pytest_duplexact.models.providers import lychee_fd, mini_omni2, socketio_omni
from pytest_duplexact.models.providers import minicpm_o as minicpm_duplex

CASES = [
    ("lychee-fd", lychee_fd.factory, {"server_url": "http://127.0.0.1:7860"},
     ("connect_timeout", "request_timeout", "event_timeout", "chunk_ms")),
    ("mini-omni2", mini_omni2.factory, {"server_url": "http://127.0.0.1:60808"},
     ("stream_stride", "max_tokens", "vad_chunk_s", "connect_timeout", "read_timeout", "chunk_ms")),
    ("freeze-omni", socketio_omni.freeze_omni, {"server_url": "https://127.0.0.1:8081"},
     ("chunk_ms", "connect_timeout", "prompt_timeout")),
    ("minicpm-o", minicpm_duplex.factory, {"server_url": "ws://127.0.0.1:8006"},
     ("connect_timeout", "queue_timeout", "prepare_timeout")),
]


@pytest.mark.parametrize("label, factory, base, names", CASES, ids=[c[0] for c in CASES])
def test_a_non_positive_option_is_refused_by_name(label, factory, base, names):
    factory(**base)  # the defaults are valid
    for name in names:
        for bad in ("0", "-1"):
            with pytest.raises(ModelConfigError, match=f"^{label}: {name} must be positive$"):
                factory(**base, **{name: bad})
    # two at once: the first in the adapter's order is named
    with pytest.raises(ModelConfigError, match=f"^{label}: {names[0]} must be positive$"):
        factory(**base, **{names[0]: "0", names[-1]: "0"})


def test_vita_runs_one_session_at_a_time_unless_overridden_and_refuses_prompt_text():
    """VITA-1.5's web_demo/server.py keeps one TTS output queue, history and last_text for all
    users (two sessions hear each other's audio): one instance at a time (run/harness.py reads
    max_concurrency) unless max_sessions overrides it; it has no prompt_text handler, so the
    option is refused before connecting instead of timing out on prompt_success."""
    url = {"server_url": "https://127.0.0.1:8081"}
    assert socketio_omni.vita_15(**url).max_concurrency == 1
    assert socketio_omni.vita_15(**url, max_sessions="3").max_concurrency == 3
    assert socketio_omni.freeze_omni(**url).max_concurrency is None  # its --max_users decides
    assert socketio_omni.freeze_omni(**url, max_sessions="2").max_concurrency == 2
    with pytest.raises(ModelConfigError, match="^vita-1.5: prompt_text .*no handler"):
        socketio_omni.vita_15(**url, prompt_text="Be brief.")
    socketio_omni.freeze_omni(**url, prompt_text="Be brief.")
    with pytest.raises(ModelConfigError, match="max_sessions must be >= 0"):
        socketio_omni.vita_15(**url, max_sessions="-1")
