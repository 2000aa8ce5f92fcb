"""Fakes that tests start on 127.0.0.1 (no internet). Import the fixture into a
conftest: ``from tests.fakes import openai_server  # noqa: F401``."""

from tests.fakes.openai_server import (  # noqa: F401
    Content,
    Disconnect,
    Drip,
    Fail,
    FakeOpenAI,
    Hang,
    JsonReply,
    Raw,
    Recorded,
    Refusal,
    Reply,
    Transcript,
    openai_server,
    schema_default,
)
