"""The text judge: one Chat Completions request per question, strict JSON back.

``ChatJSON`` is the shared machinery (also used by the audio judge and the LLM simulator):
build the canonical request, ask through ``calls.perform`` (cache, retries, counters), and
validate the JSON object against the schema it asked for. ``JudgeClient`` asks the paper's
yes/no questions (Appendix B) and returns an ``Answer``; a judge that gives no usable answer
yields ``Answer(verdict=None, error=...)``, never a YES or a NO.
"""

from __future__ import annotations

import copy
import json
import os
import re
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from ..remote import calls
from ..remote.cache import RequestCache, sha256_hex

if TYPE_CHECKING:  # the SDK is imported on first request (calls.py): a run without a judge
    import openai  # never pays for it

DEFAULT_MODEL = "gpt-5.4"  # the paper's judge and simulator (GPT-5.4)
ENV_MODEL = "DUPLEXACT_JUDGE_MODEL"
ENV_BASE_URL = "DUPLEXACT_JUDGE_BASE_URL"

YES_NO_SCHEMA: dict = {
    "type": "object",
    "properties": {
        "answer": {"type": "string", "enum": ["YES", "NO"]},
        "reason": {"type": "string"},
    },
    "required": ["answer", "reason"],
    "additionalProperties": False,
}


def json_schema_format(name: str, schema: dict) -> dict:
    return {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": schema}}


# One Markdown code fence around the whole answer (```json ... ``` or ``` ... ```): what a
# local model that does not enforce response_format writes; nothing else may surround it.
_FENCE = re.compile(r"^\s*```(?:json|JSON)?[ \t]*\n(?P<body>.*?)\n?[ \t]*```\s*$", re.S)


def unfence(content: str) -> str:
    """``content`` without one Markdown code fence wrapping all of it; else unchanged."""
    m = _FENCE.match(content)
    return m["body"] if m else content


def check_object(content: Any, schema: dict) -> dict:
    """``content`` (the message text) parsed and checked against a flat object schema of
    string properties with optional enums: exactly the keys asked for. Raises InvalidAnswer."""
    if not isinstance(content, str) or not content.strip():
        raise calls.InvalidAnswer("empty message content")
    content = unfence(content)
    try:
        obj = json.loads(content)
    except json.JSONDecodeError as e:
        raise calls.InvalidAnswer(f"not JSON ({e.msg}): {content[:80]!r}") from None
    if not isinstance(obj, dict):
        raise calls.InvalidAnswer(f"not a JSON object: {content[:80]!r}")
    props = schema["properties"]
    missing = [k for k in schema["required"] if k not in obj]
    extra = [k for k in obj if k not in props]
    if missing or extra:
        raise calls.InvalidAnswer(f"keys {sorted(obj)}; expected {sorted(props)}")
    for k, spec in props.items():
        v = obj[k]
        if not isinstance(v, str):
            raise calls.InvalidAnswer(f"{k!r} is not a string: {v!r}")
        if "enum" in spec and v not in spec["enum"]:
            raise calls.InvalidAnswer(f"{k!r} is {v[:40]!r}, not one of {spec['enum']}")
    return obj


def _keyable(messages: list[dict]) -> list[dict]:
    """Messages as they enter the cache key and entry: audio replaced by its sha256."""
    out = copy.deepcopy(messages)
    for m in out:
        content = m.get("content")
        if isinstance(content, list):
            for part in content:
                if part.get("type") == "input_audio":
                    data = part["input_audio"].pop("data")
                    part["input_audio"]["sha256"] = sha256_hex(data)
    return out


class ChatJSON:
    """A chat model that answers with one JSON object of a given schema."""

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 policy: calls.RetryPolicy | None = None, cache: RequestCache | None = None,
                 params: dict | None = None, json_schema: bool = True,
                 client: openai.OpenAI | None = None,
                 sleep: Callable[[float], None] = time.sleep):
        self.model = model
        self.base_url = base_url
        self.policy = policy or calls.DEFAULT_POLICY
        self.cache = cache
        self.params = dict(params or {})  # e.g. {"temperature": 0}; part of the cache key
        self.json_schema = json_schema
        self.counters = calls.Counters()
        self._remote = calls.Remote(base_url, api_key, self.policy.timeout, client)
        self._sleep = sleep
        # this instance's requests that could not connect at all, since the last answer (any
        # answer, even a bad one, resets it; JudgePanel.clear_unreached as an instance's
        # scoring starts): a judge's failure becomes a verdict, not an exception the session
        # sees, so the session asks this (JudgePanel.unreachable) to stop a run whose judge
        # is gone
        self.unreached = 0
        self._streak_lock = threading.Lock()

    def __repr__(self) -> str:  # never shows the key
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def endpoint(self) -> str:
        """``openai`` or ``self-hosted``: whose server answers (the report marks S rates
        judged elsewhere than OpenAI's API as not comparable with the paper)."""
        return self._remote.endpoint

    @property
    def endpoint_url(self) -> str:
        return self._remote.endpoint_url

    def ask(self, messages: list[dict], schema_name: str, schema: dict) -> calls.Outcome:
        """Raises calls.RequestFailed when no usable answer arrives."""
        fmt = json_schema_format(schema_name, schema) if self.json_schema else None
        request = {"endpoint": "chat.completions", "model": self.model,
                   "messages": _keyable(messages), "response_format": fmt,
                   "params": self.params}

        def send() -> dict:
            kw = dict(self.params)
            if fmt is not None:
                kw["response_format"] = fmt
            resp = self._remote.client().chat.completions.create(model=self.model,
                                                               messages=messages, **kw)
            if not hasattr(resp, "choices"):  # a 200 whose body was not JSON (an HTML page)
                raise calls.InvalidAnswer(f"not a chat completion: {str(resp)[:80]!r}")
            billed = calls.token_usage(getattr(resp, "usage", None))
            if not resp.choices:
                return {"content": None, **billed}
            msg = resp.choices[0].message
            if getattr(msg, "refusal", None):
                return {"content": None, "refusal": msg.refusal, **billed}
            return {"content": msg.content, **billed}

        def parse(payload: dict) -> dict:
            if payload.get("refusal"):
                raise calls.InvalidAnswer(f"refused: {str(payload['refusal'])[:80]}")
            return check_object(payload.get("content"), schema)

        try:
            out = calls.perform(request=request, send=send, parse=parse, cache=self.cache,
                                policy=self.policy, counters=self.counters, sleep=self._sleep,
                                secret=self._remote.secret, abandon=self._remote.abandon)
        except calls.ServiceUnreachable:
            with self._streak_lock:
                self.unreached += 1
            raise
        except calls.RequestFailed:
            with self._streak_lock:
                self.unreached = 0
            raise
        with self._streak_lock:
            self.unreached = 0
        return out


@dataclass(frozen=True)
class Answer:
    """A yes/no judgement: ``verdict`` True (YES), False (NO), or None with ``error`` set."""

    verdict: bool | None
    reason: str
    error: str | None = None
    cached: bool = False
    key: str | None = None


class JudgeClient(ChatJSON):
    """The LLM text judge (paper: GPT-5.4). Model / base URL fall back to
    DUPLEXACT_JUDGE_MODEL / DUPLEXACT_JUDGE_BASE_URL; the key comes from OPENAI_API_KEY."""

    def __init__(self, model: str | None = None, *, base_url: str | None = None, **kw):
        super().__init__(model or os.environ.get(ENV_MODEL) or DEFAULT_MODEL,
                         base_url=base_url or os.environ.get(ENV_BASE_URL) or None, **kw)

    def ask_yes_no(self, system: str, user: str) -> Answer:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        try:
            out = self.ask(messages, "judge_verdict", YES_NO_SCHEMA)
        except calls.RequestFailed as e:
            return Answer(None, "", error=f"judge {self.model}: {e}")
        obj = out.value
        return Answer(obj["answer"] == "YES", calls.capped(obj["reason"]), cached=out.cached,
                      key=out.key)
