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

from ..data.suggest import did_you_mean

# usage counters that are counts of things, not billed quantities
_NOT_BILLED = {"requests", "calls", "cache_hits", "errors", "retries", "invalid_answers",
               "responses", "sessions"}


_AUDIO_SECONDS = ("audio_in_s", "audio_out_s")  # what every streaming session meters


class PriceError(ValueError):
    pass


# what a price file may hold: every other table or key is refused, never ignored (a
# ``[model."x"]`` for ``[models."x"]`` would otherwise price nothing and say nothing)
TOP_KEYS = ("currency", "as_of", "models", "audio_rates")
RATE_KEYS = ("audio", "per_s")


def _unknown(p: Path, field: str, name: str, known, what: str) -> PriceError:
    return PriceError(f"{p}: field '{field}': unknown {what}{did_you_mean(name, known)}; "
                      f"known: {', '.join(known)}")


def _is_price(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0


def load_prices(path: str | Path | None = None) -> dict:
    """The bundled table, with ``path``'s ``[models.*]`` and ``[audio_rates.*]`` entries
    replacing those of the same name (and its ``as_of``, if given, shown as the date). A
    table or key the layout has not, a currency other than the bundled one, or an audio rate
    for a counter its model is not priced by is refused, naming the file and the field."""
    table = tomllib.loads(resources.files(__package__).joinpath("prices.toml").read_text())
    if path:
        p = Path(path)
        try:
            extra = tomllib.loads(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
            raise PriceError(f"{p}: not a readable TOML price table ({e})") from None
        for key, value in extra.items():
            if key not in TOP_KEYS:
                raise _unknown(p, key, key, TOP_KEYS,
                               "table" if isinstance(value, dict) else "key")
        currency = extra.get("currency", table["currency"])
        if currency != table["currency"]:
            raise PriceError(f"{p}: field 'currency': {currency!r}, but the bundled prices "
                             f"are in {table['currency']}: give every price in "
                             f"{table['currency']} (one table, one currency)")
        if "as_of" in extra and not isinstance(extra["as_of"], str):
            raise PriceError(f"{p}: field 'as_of': expected the date of the prices as a "
                             'string, e.g. as_of = "2026-01"')
        models = extra.get("models", {})
        if not isinstance(models, dict):
            raise PriceError(f"{p}: field 'models' must be a table of models")
        for name, entry in models.items():
            if not isinstance(entry, dict):
                raise PriceError(f"{p}: field 'models.{name}': expected a table of prices "
                                 f'per usage counter, e.g. [models."MODEL"] {name} = ...')
            if not all(_is_price(v) for v in entry.values()):
                raise PriceError(f"{p}: field 'models.{name}': each price must be a number "
                                 ">= 0 per unit of a usage counter")
        table["models"] = {**table["models"], **models}
        rates = extra.get("audio_rates", {})
        if not isinstance(rates, dict):
            raise PriceError(f"{p}: field 'audio_rates' must be a table of models")
        for name, entry in rates.items():
            for counter, rate in (entry.items() if isinstance(entry, dict) else [(None, None)]):
                field = f"audio_rates.{name}" + (f".{counter}" if counter else "")
                for key in (rate if isinstance(rate, dict) else ()):
                    if key not in RATE_KEYS:
                        raise _unknown(p, f"{field}.{key}", key, RATE_KEYS, "key")
                if not (isinstance(rate, dict) and rate.get("audio") in ("in", "out")
                        and _is_price(rate.get("per_s"))):
                    raise PriceError(f"{p}: field '{field}': expected "
                                     "{ audio = \"in\" or \"out\", per_s = a number >= 0 }")
                priced = table["models"].get(name, {})
                if counter not in priced:  # the estimate would skip it without a word
                    raise PriceError(
                        f"{p}: field '{field}': {name!r} has no price for {counter!r}"
                        + (did_you_mean(counter, priced) if priced else "")
                        + f'; add it under [models."{name}"]')
        table["audio_rates"] = {**table.get("audio_rates", {}), **rates}
        if "as_of" in extra:
            table["as_of"] = extra["as_of"]
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
