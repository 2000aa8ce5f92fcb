"""The paper's 14 models (Table 14) and how each is run here: the roster, and one row per model
whose route exists (``duplexact models`` lists both; docs/models.md has the recipes).

``ROSTER`` is the paper's list, fixed. ``ROUTES`` has one entry per model with a way to run it:
an adapter adding a model adds its entry here (beside its row in models/catalogue/builtins.py). A roster
name without an entry is listed as having no adapter in this install. An entry is only listed as runnable when what it names exists here:
its plugin model is a built-in and its bridge module (if any) is in the package; nothing is
imported to find out.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from .builtins import BUILTINS
from .model_bridges import BRIDGED

# (our name, the paper's name, its checkpoint or API model in Table 14)
ROSTER: tuple[tuple[str, str, str], ...] = (
    ("moshi", "Moshi", "kyutai/moshiko-pytorch-bf16"),
    ("freeze-omni", "Freeze-Omni", "VITA-MLLM/Freeze-Omni"),
    ("mini-omni2", "Mini-Omni2", "gpt-omni/mini-omni2"),
    ("vita-1.5", "VITA-1.5", "VITA-MLLM/VITA-1.5"),
    ("voila", "Voila-Autonomous", "maitrix-org/Voila-autonomous-preview"),
    ("flm-audio", "FLM-Audio", "CofeAI/FLM-Audio"),
    ("raon-speechchat", "Raon-SpeechChat", "KRAFTON/Raon-SpeechChat-9B"),
    ("bayling-duplex", "BayLing-Duplex", "BayLing-Models/BayLing-Duplex"),
    ("lychee-fd", "Lychee-FD", "HIT-TMG/Lychee-FD"),
    ("minicpm-o", "MiniCPM-o 4.5", "openbmb/MiniCPM-o-4_5"),
    ("gemini-live", "Gemini 3.1 Flash Live", "gemini-3.1-flash-live-preview"),
    ("gpt-realtime", "GPT-Realtime-2.1", "gpt-realtime-2.1"),
    ("grok-voice", "Grok Voice", "grok-voice-latest"),
    ("qwen-omni-realtime", "Qwen3.5-Omni-Flash-Realtime", "qwen3.5-omni-flash-realtime"),
)

# The paper ran every model on Direct Replay; these also on Simulator Replay (App. D, Table 16)
SIMULATOR = frozenset({"moshi", "freeze-omni", "flm-audio", "raon-speechchat", "bayling-duplex",
                       "minicpm-o", "gemini-live", "gpt-realtime", "grok-voice",
                       "qwen-omni-realtime"})
# ... and scored these on their native streaming transcripts, not whisper-1 (App. D.1)
NATIVE_TRANSCRIPT = frozenset({"raon-speechchat", "bayling-duplex"})


@dataclass(frozen=True)
class Route:
    """One way to run a paper model: ``plugin`` is the ``--duplexact-model`` value,
    ``start`` what to start on the model's machine (empty: nothing, it is in process or
    hosted), ``bridge`` the kit module that command runs (``pytest_duplexact.bridges.X``)."""

    kind: str  # "in-process", "bridge", "native server", "serving engine" or "hosted"
    plugin: str
    run: str  # the plugin's options for it, KEY=VALUE each (other words: a note)
    start: str = ""
    bridge: str = ""

    def command(self) -> str:
        """The pytest command line of this route, as it may be pasted (``-o`` would be
        pytest's own --override-ini)."""
        words = [f"--duplexact-model-option {w}" if "=" in w else w for w in self.run.split()]
        return " ".join(["pytest", f"--duplexact-model={self.plugin}", *words])

    def missing(self) -> str | None:
        """What of this route is not in this install (None when all of it is)."""
        if self.plugin not in BUILTINS:
            return f"no {self.plugin!r} adapter"
        if self.bridge and importlib.util.find_spec(self.bridge) is None:
            return f"no {self.bridge} module"
        return None


# the start commands docs/models.md prints and tests/upstream runs against the authors' code
FREEZE_OMNI_START = (
    'script -qfec "CUDA_VISIBLE_DEVICES=0 PYTHONPATH=./:$PYTHONPATH python3 bin/server.py --ip 0.0.0.0 '
    '--port 8081 --max_users 3 --llm_exec_nums 1 --timeout 180 --model_path ./checkpoints '
    '--llm_path ./Qwen2-7B-Instruct --top_p 0.8 --top_k 20 --temperature 0.8" /dev/null')
VITA_START = "python -m web_demo.server --model_path demo_VITA_ckpt --ip 0.0.0.0 --port 8081"
MINI_OMNI2_START = "python3 server.py --ip 0.0.0.0 --port 60808"
# Moshi's own server (its README's command, reachable from another machine) and PersonaPlex's
# (its README's: TLS with a certificate mkcert makes in SSL_DIR, else plain HTTP)
MOSHI_START = "python -m moshi.server --hf-repo kyutai/moshiko-pytorch-bf16 --host 0.0.0.0"
PERSONAPLEX_START = 'SSL_DIR=$(mktemp -d); python -m moshi.server --ssl "$SSL_DIR"'

ROUTES: dict[str, tuple[Route, ...]] = {
    "moshi": (
        Route("in-process", "moshi", "mimi_weights=F lm_weights=F tokenizer=F"),
        Route("bridge", "bridge", "url=ws://HOST:8765",
              start="python -m pytest_duplexact.bridges.moshi_bridge --mimi-weights F "
                    "--lm-weights F --tokenizer F --port 8765 --host 0.0.0.0",
              bridge="pytest_duplexact.bridges.moshi_bridge"),
        Route("native server", "moshi-server", "url=ws://HOST:8998/api/chat",
              start="moshi: " + MOSHI_START),
    ),
    "raon-speechchat": (
        Route("native server", "raon-speechchat", "url=wss://HOST:8082 ca_file=CERT.pem "
              "server_name=raon-speechchat-demo",
              start="Raon-SpeechChat-Demo: (cd frontend-next && npm install && npm run export) "
                    "&& docker compose up -d --build"),
    ),
    "minicpm-o": (
        Route("native server", "minicpm-o", "server_url=ws://HOST:8006",
              start="MiniCPM-o-Demo: its gateway and one worker per GPU, as its README says"),
        # the same model behind vLLM-Omni's duplex endpoint (models/providers/vllm_omni.py)
        Route("serving engine", "vllm-omni",
              "url=ws://HOST:8099/v1/realtime?duplex=1 ref_audio=VOICE.wav",
              start="vllm-omni serve openbmb/MiniCPM-o-4_5 --omni --deploy-config "
                    "vllm_omni/deploy/minicpmo_4_5.yaml --trust-remote-code --port 8099"),
    ),
    # their authors' own demo servers, spoken as they are (models/providers/socketio_omni.py,
    # lychee_fd.py, mini_omni2.py; the commands are docs/models.md's, from each README)
    # HTTPS only (bin/server.py passes ssl_context); `script` gives Flask-SocketIO 5.3.4 the
    # terminal it wants before it runs Werkzeug (under nohup, systemd or docker without -t)
    "freeze-omni": (
        Route("native server", "freeze-omni", "server_url=https://HOST:8081 verify=false",
              start="Freeze-Omni: " + FREEZE_OMNI_START),
    ),
    "vita-1.5": (
        Route("native server", "vita-1.5", "server_url=https://HOST:8081 verify=false",
              start="VITA: " + VITA_START),
    ),
    "lychee-fd": (
        Route("native server", "lychee-fd", "server_url=http://HOST:7860",
              start="Lychee-FD: python -m lychee_fd.app --model_path M --token2wav_path T "
                    "--server_port 7860 --no-share"),
    ),
    "mini-omni2": (
        Route("native server", "mini-omni2", "server_url=http://HOST:60808",
              start="mini-omni2: " + MINI_OMNI2_START),
    ),
    # models/catalogue/model_bridges.py: one table for the three bridges of ours
    **{name: (Route("bridge", name, "url=ws://HOST:8765", start=b.command,
                    bridge=f"pytest_duplexact.bridges.{b.module}"),)
       for name, b in BRIDGED.items()},
    "gemini-live": (Route("hosted", "gemini-live", "(GEMINI_API_KEY)"),),
    "gpt-realtime": (Route("hosted", "gpt-realtime", "(OPENAI_API_KEY)"),),
    "grok-voice": (Route("hosted", "grok-voice", "(XAI_API_KEY)"),),
    "qwen-omni-realtime": (Route("hosted", "qwen-omni-realtime", "(DASHSCOPE_API_KEY)"),),
}


def paper_names() -> list[str]:
    return [name for name, _, _ in ROSTER]


# Models outside the paper's roster that a built-in reaches: (our name, name, checkpoint), in
# the order ``duplexact models`` lists them, and their routes
OTHERS: tuple[tuple[str, str, str], ...] = (
    ("personaplex", "NVIDIA PersonaPlex, Moshi-based", "nvidia/personaplex-7b-v1"),
)
OTHER_ROUTES: dict[str, tuple[Route, ...]] = {
    "personaplex": (
        Route("native server", "moshi-server",
              "url=wss://HOST:8998/api/chat verify=false voice_prompt=NATF0.pt",
              start="personaplex: " + PERSONAPLEX_START),
    ),
}


def other_names() -> list[str]:
    return [name for name, _, _ in OTHERS]
