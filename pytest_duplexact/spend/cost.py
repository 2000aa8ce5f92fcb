"""The estimated cost of a run: each service's billed usage (report ``usage``: judge tokens,
transcribed seconds, the model under test's own counters) times a price table.

Prices are data (``prices.toml``, overridable with ``--duplexact-prices=FILE``), never
guessed: a service that billed something for a model without a price, or a counter its price
does not cover, says so, and the total then says it is incomplete. A model priced by tokens
whose server reported none is priced from the audio seconds it streamed, through the same
``[audio_rates]`` the estimate uses (``from_audio``), so its spend is never counted as 0:
each direction (input, output) from its own tokens, else from its own seconds. A total with
a direction priced from seconds is an estimate, not the bill: ``complete`` is then false.
Cache hits bill nothing, so a re-score costs $0.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path

# usage counters that are counts of things, not billed quantities
_NOT_BILLED = {"requests", "calls", "cache_hits", "errors", "retries", "invalid_answers",
               "responses", "sessions"}


_AUDIO_SECONDS = ("audio_in_s", "audio_out_s")  # what every streaming session meters


class PriceError(ValueError):
    pass


def load_prices(path: str | Path | None = None) -> dict:
    """The bundled table, with ``path``'s ``[models.*]`` entries replacing those of the same
    name."""
    table = tomllib.loads(resources.files(__package__).joinpath("prices.toml").read_text())
    if path:
        p = Path(path)
        try:
            extra = tomllib.loads(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
            raise PriceError(f"{p}: not a readable TOML price table ({e})") from None
        models = extra.get("models", {})
        if not isinstance(models, dict):
            raise PriceError(f"{p}: field 'models' must be a table of models")
        for name, entry in models.items():
            if not isinstance(entry, dict) or not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0
                    for v in entry.values()):
                raise PriceError(f"{p}: field 'models.{name}': each price must be a number "
                                 ">= 0 per unit of a usage counter")
        table["models"] = {**table["models"], **models}
        rates = extra.get("audio_rates", {})
        if not isinstance(rates, dict):
            raise PriceError(f"{p}: field 'audio_rates' must be a table of models")
        for name, entry in rates.items():
            for counter, rate in (entry.items() if isinstance(entry, dict) else [(None, None)]):
                if not (isinstance(rate, dict) and rate.get("audio") in ("in", "out")
                        and isinstance(rate.get("per_s"), (int, float))
                        and not isinstance(rate.get("per_s"), bool) and rate["per_s"] >= 0):
                    raise PriceError(f"{p}: field 'audio_rates.{name}"
                                     + (f".{counter}" if counter else "") + "': expected "
                                     "{ audio = \"in\" or \"out\", per_s = a number >= 0 }")
        table["audio_rates"] = {**table.get("audio_rates", {}), **rates}
        table["source"] = str(p)
    return table


def model_key(name: str) -> str:
    return name.split(":", 1)[1] if name.startswith("openai:") else name


def estimate(usage: dict, prices: dict) -> dict:
    """``{"currency", "as_of", "services": {label: {...}}, "total", "complete"}``."""
    services, total, complete = {}, 0.0, True
    for label, vals in usage.items():
        model = str(vals.get("model", ""))
        billed = {k: v for k, v in vals.items() if k not in _NOT_BILLED and k != "model"
                  and isinstance(v, (int, float)) and not isinstance(v, bool) and v}
        entry = prices["models"].get(model_key(model))
        if not billed:
            services[label] = {"model": model, "cost": 0.0, "note": "nothing billed"}
            continue
        if entry is None:
            complete = False
            services[label] = {"model": model, "cost": None,
                               "note": f"no price for {model!r} (add it with "
                                       "--duplexact-prices)"}
            continue
        cost = sum(v * entry[k] for k, v in billed.items() if k in entry)
        rates = {k: r for k, r in prices.get("audio_rates", {}).get(model_key(model), {}).items()
                 if k in entry}
        # each direction from its own tokens, else from its own seconds: a server that
        # reports the input's tokens and not the output's still pays for its output
        from_audio = sorted(k for k in rates if k not in billed
                            and billed.get(f"audio_{rates[k]['audio']}_s"))
        for counter in from_audio:  # no token usage reported: price the seconds it stands for
            seconds = billed[f"audio_{rates[counter]['audio']}_s"]
            cost += seconds * float(rates[counter]["per_s"]) * entry[counter]
        # with [audio_rates], audio seconds are priced through the tokens they make
        unpriced = sorted(k for k in billed if k not in entry
                          and not (rates and k in _AUDIO_SECONDS))
        if unpriced or from_audio:  # an estimate from seconds is not the bill
            complete = False
        services[label] = {"model": model, "cost": round(cost, 6),
                           **({"from_audio": from_audio} if from_audio else {}),
                           **({"unpriced": unpriced} if unpriced else {})}
        total += cost
    return {"currency": prices.get("currency", "USD"), "as_of": prices.get("as_of"),
            "source": prices.get("source", "bundled"), "services": services,
            "total": round(total, 6), "complete": complete}


def describe(cost: dict) -> list[str]:
    """Terminal / Markdown lines."""
    cur = cost["currency"]
    lines = []
    for label, s in cost["services"].items():
        if s["cost"] is None:
            lines.append(f"  {label.replace('_', ' ')}: {s['note']}")
        else:
            extra = (f" ({', '.join(s['from_audio'])} from audio seconds: no token usage "
                     "reported)" if s.get("from_audio") else "")
            extra += f" (not priced: {', '.join(s['unpriced'])})" if s.get("unpriced") else ""
            lines.append(f"  {label.replace('_', ' ')}: {s['cost']:.4f} {cur}{extra}")
    unpriced = any(s["cost"] is None or s.get("unpriced") for s in cost["services"].values())
    seconds = any(s.get("from_audio") for s in cost["services"].values())
    head = (f"Estimated cost: {cost['total']:.4f} {cur}"
            + (" + unpriced services" if unpriced else "")
            + (" (partly from audio seconds)" if seconds else "")
            + f" (prices: {cost['source']}, as of {cost['as_of']})")
    return [head] + lines
