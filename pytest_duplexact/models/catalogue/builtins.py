"""The built-in models: one ``Builtin`` row per name (models/catalogue/requirements.py says what a row
holds), in the order ``duplexact models`` lists them.

Everything that names a built-in reads this table: the registry (models/__init__.py) imports
a row's ``factory`` only when the model is named and checks its needs first; ``duplexact
models`` (cli/model_listing.py) shows its summary, kind and needs; the paper's routes
(models/catalogue/paper_models.py) and the run's estimate (``billed``: pytest_plugin/spend.py) look
names up here. Adding a built-in is adding its adapter module and one row here
(docs/architecture.md, "adding a model").
"""

from __future__ import annotations

from .model_bridges import BRIDGED
from .requirements import MOSHI_INSTALL, Builtin, FileOption, Package

_OPENAI = (Package("openai", "core dependency of pytest-duplexact"),
           Package("websockets", "pip install 'openai[realtime]'"))
_WEBSOCKETS = (Package("websockets", "core dependency of pytest-duplexact"),)

_SOCKETIO = (Package("socketio", "pip install 'python-socketio[asyncio-client]==5.18.1'"),
             Package("aiohttp", "pip install 'python-socketio[asyncio-client]==5.18.1'"))
_HTTPX2 = Package("httpx2", "core dependency of pytest-duplexact (through openai)")

_M = "pytest_duplexact.models.providers."

BUILTINS: dict[str, Builtin] = {
    "silent": Builtin(_M + "silent:SilentModel",
                      "digital silence in every frame: the lower bound", "stepped"),
    "oracle": Builtin(_M + "oracle:OracleModel",
                      "privileged reference: performs each expected action with the "
                      "instance's own clips", "stepped"),
    "endpoint": Builtin(_M + "endpoint:EndpointModel",
                        "cascade baseline: energy endpointing, then one fixed spoken reply",
                        "stepped"),
    "gpt-realtime": Builtin(_M + "gpt_realtime:factory", "OpenAI Realtime API (hosted)",
                            "streaming", packages=_OPENAI, env=("OPENAI_API_KEY",),
                            billed=True),
    # the key may be GEMINI_API_KEY or GOOGLE_API_KEY: the adapter's preflight checks either
    "gemini-live": Builtin(_M + "gemini_live:factory",
                           "Google Gemini Live API (hosted; GEMINI_API_KEY or GOOGLE_API_KEY)",
                           "streaming",
                           packages=(Package("google.genai",
                                             "pip install 'pytest-duplexact[gemini]'"),),
                           billed=True),
    "grok-voice": Builtin(_M + "grok_voice:factory",
                          "xAI Grok Voice Agent API (hosted, OpenAI Realtime dialect)",
                          "streaming", packages=_OPENAI, env=("XAI_API_KEY",), billed=True),
    "qwen-omni-realtime": Builtin(_M + "qwen_omni_realtime:factory",
                                  "Alibaba DashScope Qwen-Omni Realtime (hosted, OpenAI "
                                  "Realtime dialect)", "streaming", packages=_OPENAI,
                                  env=("DASHSCOPE_API_KEY",), billed=True),
    # the server URL is an option, checked by the adapter's own preflight; its key is optional
    "minicpm-o": Builtin(_M + "minicpm_o:factory",
                         "MiniCPM-o behind its duplex demo server (server_url option)",
                         "streaming", packages=(Package("websockets",
                                                        "pip install 'openai[realtime]'"),)),
    # the URL is an option; its preflight opens one session and reads the capabilities
    "vllm-omni": Builtin(_M + "vllm_omni:factory",
                         "a duplex model served by vLLM-Omni's /v1/realtime?duplex=1 (url "
                         "option; MiniCPM-o 4.5 today)", "streaming", packages=_WEBSOCKETS),
    "moshi": Builtin(
        _M + "moshi:factory", "Kyutai Moshi from local checkpoint files (moshi 0.2.13)",
        "stepped",
        packages=(Package("moshi", MOSHI_INSTALL), Package("sentencepiece", MOSHI_INSTALL),
                  Package("safetensors", MOSHI_INSTALL), Package("einops", MOSHI_INSTALL),
                  Package("huggingface_hub", MOSHI_INSTALL)),
        files=(FileOption("mimi_weights", "Mimi codec weights, .safetensors"),
               FileOption("lm_weights", "Moshi LM weights, .safetensors"),
               FileOption("tokenizer", "SentencePiece text tokenizer, .model"),
               FileOption("lm_config", "LM config.json; default: Moshi 7B", required=False),
               FileOption("mimi_config", "Mimi config json; default: the released Mimi",
                          required=False))),
    # the server URL is an option, checked (and the server probed) by the adapter itself
    "bridge": Builtin(_M + "bridge:factory",
                      "any model behind the duplexact bridge protocol v1 (url option; "
                      "docs/bridge-protocol.md)", "stepped or streaming, as the server says",
                      packages=_WEBSOCKETS),
    "raon-speechchat": Builtin(_M + "raon_speechchat:factory",
                               "Raon-SpeechChat behind its demo gateway, natively (url option)",
                               "streaming", packages=_WEBSOCKETS),
    # Moshi's own server (python -m moshi.server) and NVIDIA PersonaPlex's fork of it: url
    # option, checked (and the server probed) by the adapter itself
    "moshi-server": Builtin(_M + "moshi_server:factory",
                            "Moshi or PersonaPlex behind its own python -m moshi.server, "
                            "/api/chat with Opus (url option)", "streaming",
                            packages=(*_WEBSOCKETS,
                                      Package("sphn", "pip install 'sphn>=0.2,<0.3'"))),
    # the bridge route by model name (models/catalogue/model_bridges.py): the bridge runs on the model's
    # machine; url option, as for bridge
    **{name: Builtin(_M + "named_bridge:" + name.replace("-", "_"),
                     f"{b.title} behind pytest_duplexact.bridges.{b.module} on the model's "
                     "machine (url option)", "stepped, bridge", packages=_WEBSOCKETS)
       for name, b in BRIDGED.items()},
    # the open models' own demo servers: server_url is an option, checked by each preflight
    "freeze-omni": Builtin(_M + "freeze_omni:factory",
                           "Freeze-Omni behind its socket.io demo server bin/server.py "
                           "(server_url option)", "streaming", packages=_SOCKETIO),
    "vita-1.5": Builtin(_M + "vita_15:factory",
                        "VITA-1.5 behind its socket.io web demo web_demo/server.py "
                        "(server_url option)", "streaming", packages=_SOCKETIO),
    "lychee-fd": Builtin(_M + "lychee_fd:factory",
                         "Lychee-FD behind its HTTP + server-sent-events app lychee_fd/app.py "
                         "(server_url option)", "streaming", packages=(_HTTPX2,)),
    "mini-omni2": Builtin(_M + "mini_omni2:factory",
                          "Mini-Omni2 behind its turn-based /chat server server.py (server_url "
                          "option; Direct Replay only)", "streaming", packages=(_HTTPX2,)),
}

# Not a BUILTINS name: a prefix (models/__init__.py), listed by `duplexact models` all the same.
RECORDED = Builtin(_M + "recorded:RecordedModel",
                   "replays recordings saved earlier (recorded:DIR, a run directory)", "replay")
