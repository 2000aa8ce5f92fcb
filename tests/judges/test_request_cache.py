"""The request cache: format, warm runs make no requests, bad entries are refetched, and no
secret is ever written."""

from __future__ import annotations

import json

import numpy as np

from pytest_duplexact.data.results import success
from pytest_duplexact.judges import AudioJudge, JudgeClient, JudgePanel, RequestCache
from pytest_duplexact.listen.transcribe_openai import OpenAITranscriber
from pytest_duplexact.remote.cache import canonical, request_key, sha256_hex
from pytest_duplexact.rules.scoring import subsequent
from tests.fakes import Fail, Reply, Transcript
from tests.judges.judgekit import FAKE_KEY, FAST, judged_instance
from tests.support.builders import seg, timeline, words

REQ = {"endpoint": "chat.completions", "model": "m", "messages": [{"role": "user",
                                                                   "content": "hi"}]}


def test_entry_format_and_layout(cache):
    path = cache.put(REQ, {"content": '{"answer": "YES", "reason": "r"}'})
    key = request_key(REQ)
    assert key == sha256_hex(canonical(REQ)) and len(key) == 64
    assert path == cache.root / key[:2] / f"{key}.json"
    entry = json.loads(path.read_text())
    assert entry["format"] == "duplexact-request-cache" and entry["version"] == 1
    assert entry["key"] == key and entry["request"] == REQ
    assert entry["response_sha256"] == sha256_hex(canonical(entry["response"]))
    assert not list(path.parent.glob("*.part"))  # written then renamed
    assert cache.get(REQ) == {"content": '{"answer": "YES", "reason": "r"}'}
    assert cache.get({**REQ, "model": "other"}) is None
    assert (cache.stats.hits, cache.stats.misses, cache.stats.writes) == (1, 1, 1)


def _tamper(path, edit):
    entry = json.loads(path.read_text())
    edit(entry)
    path.write_text(json.dumps(entry))


def test_untrustworthy_entries_are_ignored(cache):
    path = cache.put(REQ, {"content": "x"})
    bad = [
        lambda: path.write_text(path.read_text()[:40]),                      # truncated
        lambda: _tamper(path, lambda e: e["response"].update(content="y")),  # checksum
        lambda: _tamper(path, lambda e: e.update(key="0" * 64)),             # other key
        lambda: _tamper(path, lambda e: e.update(request={"other": 1})),     # other request
        lambda: _tamper(path, lambda e: e.update(version=99)),               # unknown format
    ]
    for n, spoil in enumerate(bad, 1):
        cache.put(REQ, {"content": "x"})
        spoil()
        assert cache.get(REQ) is None
        assert cache.stats.corrupt == n


def test_second_run_on_a_warm_cache_makes_zero_requests(openai_server, fake_key, tmp_path):
    openai_server.script(Reply("NO", "ignores the continuation"))
    first = JudgeClient(base_url=openai_server.url, policy=FAST,
                        cache=RequestCache(tmp_path / "c"))
    a1 = first.ask_yes_no("system", "user")
    assert openai_server.count == 1 and not a1.cached

    second = JudgeClient(base_url=openai_server.url, policy=FAST,
                         cache=RequestCache(tmp_path / "c"))
    a2 = second.ask_yes_no("system", "user")
    assert openai_server.count == 1  # no request at all
    assert a2.cached and (a2.verdict, a2.reason) == (False, "ignores the continuation")
    assert second.counters.cache_hits == 1 and second.counters.calls == 0
    assert a2.key == a1.key


def test_a_corrupt_entry_is_refetched_and_repaired(openai_server, fake_key, cache):
    judge = JudgeClient(base_url=openai_server.url, policy=FAST, cache=cache)
    judge.ask_yes_no("s", "u")
    (path,) = cache.root.rglob("*.json")
    path.write_text("{ not json")
    assert judge.ask_yes_no("s", "u").cached is False
    assert openai_server.count == 2
    assert judge.ask_yes_no("s", "u").cached is True  # rewritten, valid again
    assert openai_server.count == 2


def test_failures_are_not_cached(openai_server, fake_key, cache):
    judge = JudgeClient(base_url=openai_server.url, policy=FAST, cache=cache)
    openai_server.script(*[Fail(500)] * FAST.max_attempts)
    assert judge.ask_yes_no("s", "u").error
    assert not list(cache.root.rglob("*.json"))
    assert judge.ask_yes_no("s", "u").verdict is True  # asked again
    assert openai_server.count == FAST.max_attempts + 1


def test_changed_prompt_or_params_is_a_different_entry(openai_server, fake_key, cache):
    JudgeClient(base_url=openai_server.url, policy=FAST, cache=cache).ask_yes_no("s", "u")
    JudgeClient(base_url=openai_server.url, policy=FAST, cache=cache).ask_yes_no("s", "u2")
    JudgeClient(base_url=openai_server.url, policy=FAST, cache=cache,
                params={"temperature": 0}).ask_yes_no("s", "u")
    JudgeClient("other-model", base_url=openai_server.url, policy=FAST,
                cache=cache).ask_yes_no("s", "u")
    assert openai_server.count == 4 and len(list(cache.root.rglob("*.json"))) == 4


def test_audio_is_keyed_by_hash_and_not_stored(openai_server, fake_key, cache):
    judge = AudioJudge(base_url=openai_server.url, policy=FAST, cache=cache)
    tone = 0.1 * np.sin(np.linspace(0, 400, 8000)).astype(np.float32)
    judge.classify(tone, 16000)
    (path,) = cache.root.rglob("*.json")
    entry = json.loads(path.read_text())
    part = entry["request"]["messages"][1]["content"][1]
    assert set(part["input_audio"]) == {"format", "sha256"}
    sent = openai_server.chat_requests[0].json["messages"][1]["content"][1]["input_audio"]
    assert part["input_audio"]["sha256"] == sha256_hex(sent["data"])
    judge.classify(tone, 16000)
    judge.classify(tone * 0.5, 16000)  # other audio, other entry
    assert openai_server.count == 2


def test_no_api_key_in_anything_the_judges_write(openai_server, fake_key, tmp_path):
    cache = RequestCache(tmp_path / "cache")
    panel = JudgePanel(JudgeClient(base_url=openai_server.url, policy=FAST),
                       AudioJudge(base_url=openai_server.url, policy=FAST), cache=cache)
    inst = judged_instance("take_turn", "immediate",
                         user_words=words(("Hello", 0.0, 0.5), ("there", 0.6, 1.0)),
                         user_start=0.0, user_end=1.0)
    tl = timeline(seg(1.2, 3.0, "Hi, how can I help you today?"))
    out = subsequent(inst, tl, success("ok", onset=1.2), panel)
    bc = judged_instance("backchannel", "affirmative", user_words=words(("So", 0.0, 0.5)),
                       user_start=0.0, user_end=2.0, backchannel_point=0.5)
    cand = seg(0.6, 0.9, "mm-hmm")
    panel.backchannel_stages(bc, timeline(cand), cand, np.full(4800, 0.01, np.float32))
    openai_server.script(Transcript([("hi", 0.0, 0.3)]))
    OpenAITranscriber(base_url=openai_server.url, policy=FAST, cache=cache).transcribe(
        np.zeros(8000, np.float32), 16000)
    (tmp_path / "outcome.json").write_text(json.dumps([out.to_dict(), panel.stats()]))

    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) >= 5
    for p in files:
        data = p.read_bytes()
        assert FAKE_KEY.encode() not in data and b"sk-FAKE" not in data, p
        assert b"Bearer" not in data, p
