"""A run's settings, built once from the run's options (pytest_plugin/configure.py
``settings_of``, from the RunConfig) or read from a stored run.json /
report.json: one frozen, typed object that the journal, resume, the baseline, the merge and
the report read, instead of a dict whose keys each of them classified on its own.

Three groups, each named once here:

- ``identity``: what makes a run this run (model, its options, the data). Resume refuses a
  run directory whose identity differs.
- ``scoring``: what decides the scores of a given recording (judges, transcriber, simulator,
  the scoring code's version). A change invalidates stored outcomes: they are re-run, never
  mixed with new ones.
- the selection, of which only the seed reaches an outcome (seeded models).

``fingerprint()`` hashes identity + scoring + seed; every outcome is stamped with it
(journal.py). The dataset's *path* is left out: the same data moved gives the same outcomes.
``to_dict()`` is the report's and run.json's ``settings`` object (docs/report-format.md).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, fields, replace
from typing import Any

from ..remote.netsafety import mask_credentials
from .selection import Selection, SelectionError, parse_shard

IDENTITY_KEYS = ("model", "model_options", "dataset_fingerprint")
SCORING_KEYS = ("judge", "judge_base_url", "audio_judge", "transcriber", "simulator",
                "simulator_model", "scoring_version")
# What makes two runs' rates comparable (the baseline gate warns otherwise): the data and the
# scoring, except where the judge is served from (the same judge model on another server).
COMPARABLE_KEYS = ("dataset_fingerprint",) + tuple(k for k in SCORING_KEYS
                                                   if k != "judge_base_url")


class SettingsError(ValueError):
    """Stored settings that cannot be read; the message names the field."""


@dataclass(frozen=True)
class RunSettings:
    model: str
    model_options: tuple[tuple[str, str], ...] = ()  # KEY=VALUE pairs in the order given
    dataset: str | None = None  # the dataset folder (reported, never fingerprinted)
    dataset_fingerprint: str | None = None
    judge: str | None = None
    judge_base_url: str | None = None
    audio_judge: str | None = None
    transcriber: str | None = "auto"
    simulator: str | None = "rule"
    simulator_model: str | None = None  # only with simulator == "llm"
    scoring_version: str | None = None
    selection: Selection = field(default_factory=Selection)
    # whether barge-in plays the released data's branch clips ("on" / "off"); set, reported
    # and fingerprinted only for data that has them (it changes what those instances hear)
    bargein_branches: str | None = None
    # --duplexact-channel's canonical spec (pipelines/channel.py); None for a clean run, which
    # keeps its fingerprint and bytes. Identity: it changes what the model hears.
    channel: str | None = None
    # the released-data provenance (pytest_plugin/released_data.py); only for hf: data
    released: Any = field(default=None, compare=False)
    # what the model's server said it is when the run's preflight connected ({"model",
    # "description"}: pytest_plugin/preflight.py); reported, never fingerprinted (a name only)
    served: Any = field(default=None, compare=False)

    # --- the groups -------------------------------------------------------------------------

    @property
    def options(self) -> dict[str, str]:
        """The model options as the factory receives them."""
        return dict(self.model_options)

    @property
    def seed(self) -> int:
        return self.selection.seed

    @property
    def identity(self) -> dict[str, Any]:
        return {k: self._value(k) for k in IDENTITY_KEYS}

    @property
    def scoring(self) -> dict[str, Any]:
        return {k: self._value(k) for k in SCORING_KEYS}

    def fingerprint(self) -> str:
        """sha256 over what an outcome depends on (canonical JSON)."""
        parts = {**self.identity, **self.scoring, "seed": self.seed}
        if self.bargein_branches is not None:  # only where it applies: old runs keep theirs
            parts["bargein_branches"] = self.bargein_branches
        if self.channel is not None:  # likewise: a clean run's fingerprint is unchanged
            parts["channel"] = self.channel
        text = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def identity_changes(self, old: "RunSettings") -> list[str]:
        """``key: old -> new`` for every identity key that differs (the channel's too)."""
        return self._changes(old, IDENTITY_KEYS + ("channel",))

    def scoring_changes(self, old: "RunSettings") -> list[str]:
        out = self._changes(old, SCORING_KEYS)
        if old.seed != self.seed:
            out.append(f"seed: {old.seed!r} -> {self.seed!r}")
        return out

    def comparable_changes(self, old: "RunSettings") -> list[str]:
        return [k for k in COMPARABLE_KEYS if self._value(k) != old._value(k)]

    def unsharded(self) -> "RunSettings":
        return replace(self, selection=replace(self.selection, shard=None))

    def _changes(self, old: "RunSettings", keys) -> list[str]:
        return [f"{k}: {old._shown(k)!r} -> {self._shown(k)!r}" for k in keys
                if old._value(k) != self._value(k)]

    def _shown(self, key: str):
        """A field as a difference names it: no channel is the clean one, as the user says."""
        if key == "channel" and self.channel is None:
            from ..pipelines.channel import CLEAN

            return CLEAN
        return self._value(key)

    def _value(self, key: str):
        """A field as written and compared; a password in an option's URL never is."""
        if key == "model_options":
            return {k: mask_credentials(v) for k, v in self.options.items()}
        return getattr(self, key)

    # --- JSON -------------------------------------------------------------------------------

    def to_dict(self) -> dict:
        sel = self.selection
        # only when set: old bytes kept
        optional = ("bargein_branches", "channel", "released", "served")
        out = {f.name: self._value(f.name) for f in fields(self)
               if f.name != "selection" and not (f.name in optional and
                                                 getattr(self, f.name) is None)}
        out["selection"] = {"actions": list(sel.actions), "conditions": list(sel.conditions),
                            "scenarios": list(sel.scenarios), "sources": list(sel.sources),
                            "limit": sel.limit, "seed": sel.seed,
                            "shard": None if sel.shard is None else "%d/%d" % sel.shard}
        if sel.corpora:  # only when used, so reports of other runs keep their bytes
            out["selection"]["corpora"] = list(sel.corpora)
        return out

    @classmethod
    def from_dict(cls, d: Any) -> "RunSettings":
        """From a stored ``settings`` object; SettingsError names the field."""
        if not isinstance(d, dict):
            raise SettingsError("'settings' is not an object")
        if not isinstance(d.get("model"), str):
            raise SettingsError("field 'settings.model' is missing or not a string")
        opts = d.get("model_options") or {}
        if not isinstance(opts, dict):
            raise SettingsError("field 'settings.model_options' is not an object")
        kw = {}
        for f in fields(cls):
            if f.name in ("model", "model_options", "selection"):
                continue
            if f.name in ("released", "served"):
                kw[f.name] = d.get(f.name) if isinstance(d.get(f.name), dict) else None
                continue
            v = d.get(f.name)
            if v is not None and not isinstance(v, str):
                raise SettingsError(f"field 'settings.{f.name}' is not a string")
            kw[f.name] = v
        sel = d.get("selection") or {}
        if not isinstance(sel, dict):
            raise SettingsError("field 'settings.selection' is not an object")
        try:
            selection = Selection(
                actions=tuple(sel.get("actions") or ()),
                conditions=tuple(sel.get("conditions") or ()),
                scenarios=tuple(sel.get("scenarios") or ()),
                sources=tuple(sel.get("sources") or ()),
                corpora=tuple(sel.get("corpora") or ()),
                limit=sel.get("limit"), seed=sel.get("seed", 0),
                shard=parse_shard(sel.get("shard")))
        except (SelectionError, TypeError, AttributeError) as e:
            raise SettingsError(f"field 'settings.selection': {e}") from None
        return cls(model=d["model"], model_options=tuple((str(k), str(v))
                                                         for k, v in opts.items()),
                   selection=selection, **kw)
