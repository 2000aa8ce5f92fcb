"""Which judges decided the run's judged verdicts, and whether its S rates can stand beside
the paper's: the report's ``judges`` section, from what the judges recorded in ``usage``
(their model, the kind of server that answered and its URL; remote/calls.endpoint_kind).

A judge served by anything but OpenAI's API (vLLM, llama.cpp's server, Ollama, a proxy) is
*self-hosted*: whatever its model is called, it is not the paper's GPT-5.4, so every view
marks the S rates (and the paper side by side) with SELF_HOSTED_NOTE. docs/judges.md.
"""

from __future__ import annotations

JUDGES = ("text_judge", "audio_judge")
SELF_HOSTED = "self-hosted"
SELF_HOSTED_NOTE = "self-hosted judge: not comparable with the paper's GPT-5.4"


def section(usage: dict | None) -> dict | None:
    """``{"text_judge": {"model", "endpoint", "url"}, "audio_judge": ..., "self_hosted",
    "S_rates"}``, or None when no judge took part."""
    found = {}
    for label in JUDGES:
        u = (usage or {}).get(label)
        if u:
            found[label] = {"model": u.get("model"), "endpoint": u.get("endpoint"),
                            "url": u.get("endpoint_url")}
    if not found:
        return None
    hosted = any(j["endpoint"] == SELF_HOSTED for j in found.values())
    return {**found, "self_hosted": hosted, "S_rates": SELF_HOSTED_NOTE if hosted else None}


def s_note(report) -> str | None:
    """The mark every view puts on S: ``self-hosted judge: not comparable with the paper's
    GPT-5.4 (text judge qwen2.5 at http://127.0.0.1:8000/v1)``, or None. ``report``: a
    ``model.Report`` or a report dict."""

    sec = report.judges or section(report.usage)
    if not sec or not sec.get("self_hosted"):
        return None
    who = "; ".join(f"{label.replace('_', ' ')} {j['model']} at {j['url']}"
                    for label in JUDGES if (j := sec.get(label))
                    and j.get("endpoint") == SELF_HOSTED)
    return f"{SELF_HOSTED_NOTE} ({who})"
