"""What the two ``moshi.server`` modules share (test_moshi_server.py: kyutai-labs/moshi;
test_personaplex_server.py: NVIDIA/personaplex): the author's ``python -m moshi.server`` started
from its checkout with the tiny random-weight checkpoint (tests/models/providers/moshi_tiny.py), every
file local, ``--static none``, ``HF_HUB_OFFLINE=1`` and our sitecustomize first on its path
(stubs/moshi_server: the network guard, the CPU shim); our real adapter
(``--duplexact-model=moshi-server``) driven through the streaming pipeline against it.

Onset error: the stepped route would hear the answer to input frame k at the end of frame
k + 1 (the tiny LM's delays hold its first audio one step), the first audio at
``FIRST_AUDIO_S``; the wall-clock route hears it when its Opus page arrives. The difference is
what the network, the two Opus codecs and the server's own pacing add.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from pytest_duplexact.models.contract import SessionInfo
from tests.upstream import support
from tests.upstream.bridged import first_audio_s_of
from tests.upstream.support import STUBS, Checkout, free_port

GUARD = STUBS / "moshi_server"
FIRST_AUDIO_S = 2 * 0.08  # the answer to input frame 1, as the stepped route places it


def tiny_files(folder: Path) -> dict[str, str]:
    """The tiny checkpoint, and a config.json that names the tiny Mimi's config as a local
    file (``file://``: moshi's loaders then read it instead of the hub)."""
    from tests.models.providers.moshi_tiny import write_checkpoints

    files = write_checkpoints(folder)
    config = json.loads(Path(files["lm_config"]).read_text())
    config["mimi_config_name"] = "file://" + files["mimi_config"]
    Path(files["lm_config"]).write_text(json.dumps(config))
    return files


# PersonaPlex's codebooks keep the released Mimi's 2048 entries: its LMGen feeds fixed
# silence token ids (lm.py SILENCE_TOKENS, up to 2008) and samples audio with top_k 250; and
# its depformer always has 16 steps (loaders.get_moshi_lm)
PERSONAPLEX_CARD = 2048


def personaplex_files(folder: Path) -> dict[str, str]:
    """The tiny random checkpoint as PersonaPlex's loaders read it: written by moshi's
    (installed) classes with PersonaPlex's depformer (16 steps) and codebooks of
    ``PERSONAPLEX_CARD``, its attention weights in the fork's older layout (one stacked
    ``in_proj_weight`` per layer, not ``in_projs.<step>``); plus ``loaders.json``, the shapes
    its ``loaders`` module dicts are given (stubs/moshi_server: ``DUPLEXACT_TINY_LOADERS``)."""
    import torch
    from moshi.models import loaders
    from safetensors.torch import save_file

    from tests.models.providers.moshi_tiny import (
        fit_codebooks,
        lm_config,
        mimi_config,
        train_tokenizer,
    )

    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    mimi_cfg = mimi_config()
    mimi_cfg["quantizer"] = dict(mimi_cfg["quantizer"], bins=PERSONAPLEX_CARD)
    lm_cfg = dict(lm_config(), card=PERSONAPLEX_CARD, dep_q=16)
    mimi = loaders.get_mimi(None, mimi_cfg, num_codebooks=8)
    with torch.no_grad():
        fit_codebooks(mimi)
    lm = loaders.get_moshi_lm(None, lm_kwargs=lm_cfg, dtype=torch.float32)
    files = {"mimi_weights": folder / "mimi.safetensors", "lm_weights": folder / "lm.safetensors",
             "tokenizer": folder / "tokenizer.model", "loaders": folder / "loaders.json"}
    for model, key in ((mimi, "mimi_weights"), (lm, "lm_weights")):
        save_file(stacked_attention(model.state_dict()), str(files[key]))
    train_tokenizer(files["tokenizer"])
    files["loaders"].write_text(json.dumps({
        "seanet": mimi_cfg["seanet"], "transformer": mimi_cfg["transformer"],
        "quantizer": mimi_cfg["quantizer"], "lm": lm_cfg}))
    return {k: str(v) for k, v in files.items()}


def stacked_attention(state: dict) -> dict:
    """moshi 0.2's per-step ``self_attn.in_projs.<k>.weight`` / ``out_projs.<k>.weight`` as
    the one stacked ``in_proj_weight`` / ``out_proj.weight`` the fork's layers hold."""
    import re

    import torch

    out, stacks = {}, {}
    for k, v in state.items():
        m = re.match(r"(.*\.self_attn)\.(in|out)_projs\.(\d+)\.weight$", k)
        if m:
            stacks.setdefault((m[1], m[2]), {})[int(m[3])] = v
        else:
            out[k] = v.detach().contiguous().clone()
    for (prefix, kind), parts in stacks.items():
        name = f"{prefix}.in_proj_weight" if kind == "in" else f"{prefix}.out_proj.weight"
        out[name] = torch.cat([parts[i] for i in sorted(parts)], 0).contiguous()
    return out


def tls_folder(folder: Path) -> tuple[Path, str]:
    """``--ssl DIR``'s cert.pem and key.pem for 127.0.0.1, and the CA's PEM for ca_file."""
    trustme = pytest.importorskip("trustme")
    folder.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert.private_key_pem.write_to_path(str(folder / "key.pem"))
    cert.cert_chain_pems[0].write_to_path(str(folder / "cert.pem"))
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    return folder, str(folder / "ca.pem")


class MoshiServerProcess(support.Server):
    """The author's server; ``url`` once it listens (after its warm-up)."""

    def __init__(self, ck: Checkout, argv: list[str], d: Path, port: int, *, tls: bool,
                 env: dict[str, str] | None = None):
        d.mkdir(parents=True, exist_ok=True)
        self.stub_log, self.port = d / "stub.jsonl", port
        self.url = f"{'wss' if tls else 'ws'}://127.0.0.1:{port}/api/chat"
        full = {"DUPLEXACT_STUB_LOG": str(self.stub_log), "HF_HUB_OFFLINE": "1",
                "OMP_NUM_THREADS": "1", **(env or {})}
        super().__init__(ck, shlex.join(argv), d, [GUARD, ck.path / "moshi"], d / "server.log",
                         env=full)

    def __enter__(self) -> "MoshiServerProcess":
        super().__enter__()
        t = time.monotonic()
        try:
            self.wait_port(self.port, 300.0)
        except BaseException:
            self.__exit__()
            raise
        self.listened_s = time.monotonic() - t
        return self

    def events(self, kind: str) -> list[dict]:
        if not self.stub_log.exists():
            return []
        rows = [json.loads(x) for x in self.stub_log.read_text().splitlines() if x.strip()]
        return [r for r in rows if r["event"] == kind]


@dataclass
class Measured:
    onsets_ms: list[float] = field(default_factory=list)
    audio: bool = False
    text: bool = False

    def row(self) -> dict:
        errors = sorted(abs(x) for x in self.onsets_ms)
        return {"connects": True, "audio": self.audio, "text": self.text,
                "onset_err_ms_median": round(float(np.median(errors)), 1) if errors else None,
                "onset_err_ms_max": round(errors[-1], 1) if errors else None}


def record(model: str, ck: Checkout, measured: dict, notes: str) -> None:
    """The harness table's row (support.record_row) from what the module's tests measured."""
    support.record_row(model, ck, connects=True, audio=measured.get("audio"),
                       text=measured.get("text"), barge_in_stop=None,
                       onset_err_ms_median=measured.get("onset_err_ms_median"),
                       onset_err_ms_max=measured.get("onset_err_ms_max"),
                       sessions=measured.get("sessions"), notes=notes)


def user_clip(seconds: float = 1.6):
    from tests.pipelines.helpers import cat, gap, tone

    return cat(gap(0.2), tone(0.5), gap(seconds - 0.7))


def trials(model, tmp: Path, n: int = 3) -> Measured:
    """``n`` trials one after the other: audio, text, and each first audio's onset against
    where the stepped route puts it (``FIRST_AUDIO_S``)."""
    from tests.upstream.duplex_checks import trial

    m = Measured()
    for k in range(n):
        rec = asyncio.run(trial(model, tmp / f"t{k}", user_clip(), observation_s=0.4))
        onset = first_audio_s_of(rec.output, 16_000)
        assert onset is not None, "no audio from the server reached the recording"
        m.audio = True
        m.text = m.text or bool(rec.transcript)
        m.onsets_ms.append(1000 * (onset - FIRST_AUDIO_S))
    return m


def two_at_once(model) -> tuple[float, float, float]:
    """Two sessions of the real adapter at once: the second's handshake waits for the first to
    close (the server's lock). Returns (first handshake, first closed, second handshake),
    monotonic."""
    async def run():
        info = SessionInfo(None)
        first = await model.connect(info)
        t_first = time.monotonic()
        second = asyncio.create_task(model.connect(info))
        await asyncio.sleep(1.0)
        assert not second.done(), "the second session got its handshake while the first held"
        await first.close()
        t_closed = time.monotonic()
        s2 = await asyncio.wait_for(second, 60)
        t_second = time.monotonic()
        await s2.close()
        return t_first, t_closed, t_second

    return asyncio.run(run())


def no_outbound(server: MoshiServerProcess) -> None:
    """Nothing in the server's process tried a connection beyond 127.0.0.1, and it read no
    file from the hub."""
    assert server.events("outbound") == [], server.events("outbound")
    assert server.events("hub_refused") == [], server.events("hub_refused")


def http_to_tls_line(url: str) -> str:
    """The preflight's line for an http:// URL to the TLS server."""
    from pytest_duplexact.models.model_options import ModelConfigError
    from pytest_duplexact.models.providers.moshi_server import probed

    plain = url.replace("wss://", "http://")
    with pytest.raises(ModelConfigError) as e:
        probed(url=plain)
    return str(e.value)


__all__ = ["FIRST_AUDIO_S", "Measured", "MoshiServerProcess", "free_port", "http_to_tls_line",
           "no_outbound", "record", "tiny_files", "tls_folder", "trials", "two_at_once"]
