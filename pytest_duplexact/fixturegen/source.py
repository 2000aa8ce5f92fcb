"""The fixture source file (fixtures/source/transcripts.toml, docs/fixtures.md): parse and check.

The source holds only words, voices and a few chosen silences; every time in the generated
dataset is derived from where the rendered phrases are placed. Parsing reports every problem at
once, each naming the file, the entry and the field, like the dataset loader does.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from ..data import taxonomy

SOURCE_FORMAT = "duplexact-fixture-source"
SOURCE_VERSION = 1

# Which source fields each action uses (besides condition / scenario / voice / speed).
_FIELDS: dict[str, tuple[str, ...]] = {
    "wait": ("user", "reference"),
    "ignore": ("user", "reference"),
    "take_turn": ("user", "reference"),
    "backchannel": ("user", "backchannel", "reference"),
    "interrupt": ("user", "reference"),
    "stop": ("talk", "cue"),
    "hold_floor": ("talk", "cue"),
    "recover": ("talk", "cue", "recovery"),
}
# The marker each user-turn item may be, and the actions that allow it.
_MARKERS: dict[str, tuple[str, ...]] = {
    "pause": ("wait",),
    "gap": ("wait", "ignore", "take_turn", "backchannel", "interrupt"),
    "ignored": ("ignore",),
    "backchannel": ("backchannel",),
    "target": ("interrupt",),
}
_PAUSE_RANGE = (0.4, 0.9)  # annotated wait pauses (Table 7 allows 0.2-1.0 s; we stay inside)
_CONTINUOUS_MAX_GAP = 0.2  # continuous_speech: no pause longer than this (Table 7)
_BACKCHANNEL_MIN_GAP = 0.3
_SOUNDING = ("phrase", "ignored")  # items that are speech; the other markers are silences


class SourceError(Exception):
    """The source file cannot be rendered; ``problems`` lists every defect found."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join([f"{len(problems)} problem(s) in the fixture source:"]
                                   + [f"  - {p}" for p in problems]))


@dataclass(frozen=True)
class Item:
    """One element of a user turn, in order.

    kind: "phrase" (text), "pause" (the annotated wait pause, seconds), "gap" (a chosen silence,
    seconds), "ignored" (the distractor's text), "backchannel" (the silence holding the
    backchannel point, seconds) or "target" (the interrupt target: the end of the phrase before).
    """

    kind: str
    text: str = ""
    seconds: float = 0.0


@dataclass(frozen=True)
class Voices:
    user: tuple[str, ...]
    speeds: tuple[int, ...]
    model: str
    model_speed: int
    background: tuple[str, ...]


@dataclass(frozen=True)
class Talk:
    """A lead-in and the long model answer it elicits; Simulator Replay instances share it."""

    id: str
    scenario: str
    voice: str
    speed: int
    lead_in: tuple[str, ...]
    reference: tuple[str, ...]


@dataclass(frozen=True)
class Entry:
    """One [[instance]] of the source; ``id`` is assigned from condition, scenario and order."""

    id: str
    index: int
    cond: taxonomy.Condition
    scenario: str
    voice: str
    speed: int
    background_voice: str
    user: tuple[Item, ...] = ()
    reference: tuple[str, ...] = ()
    backchannel: str = ""
    talk: Talk | None = None
    cue: str = ""
    recovery: tuple[str, ...] = ()

    @property
    def action(self) -> str:
        return self.cond.action


@dataclass(frozen=True)
class Source:
    path: Path
    source: str
    voices: Voices
    talks: dict[str, Talk]
    entries: tuple[Entry, ...]
    name: str | None = None  # the dataset's name (header `name`; optional)
    description: str | None = None  # header `description` (optional)


def load(path: Path | str) -> Source:
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise SourceError([f"{path}: cannot read TOML: {e}"]) from None
    return parse(raw, path)


def parse(raw: dict, path: Path) -> Source:
    problems: list[str] = []

    def bad(where: str, field: str, message: str) -> None:
        problems.append(f"{path} {where} field '{field}': {message}")

    if raw.get("format") != SOURCE_FORMAT:
        bad("header", "format", f"must be {SOURCE_FORMAT!r}")
    if raw.get("version") != SOURCE_VERSION:
        bad("header", "version", f"unsupported version {raw.get('version')!r}; this generator "
            f"reads version {SOURCE_VERSION}")
    source = raw.get("source")
    if source not in taxonomy.SOURCES:
        bad("header", "source", f"must be one of {', '.join(taxonomy.SOURCES)}")

    for key in ("name", "description"):
        if key in raw and (not isinstance(raw[key], str) or not raw[key].strip()):
            bad("header", key, "must be a non-empty string")
    voices = _voices(raw.get("voices"), bad)
    talks = _talks(raw.get("talk", []), voices, bad)
    entries = _entries(raw.get("instance", []), voices, talks, bad)
    if not raw.get("instance"):
        bad("header", "instance", "no [[instance]] entries: nothing to render")
    if problems:
        raise SourceError(problems)
    return Source(path, source, voices, talks, tuple(entries),
                  _text(raw.get("name")), _text(raw.get("description")))


def _text(v) -> str | None:
    return v.strip() if isinstance(v, str) and v.strip() else None


def _str_list(v) -> tuple[str, ...] | None:
    """A phrase list: a string is one phrase; a list must hold non-empty strings only."""
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list) or not v or not all(isinstance(s, str) and s.strip() for s in v):
        return None
    return tuple(s.strip() for s in v)


def _voices(raw, bad) -> Voices:
    empty = Voices(("en-us",), (175,), "en-us", 175, ("en-gb",))
    if not isinstance(raw, dict):
        bad("[voices]", "voices", "missing table")
        return empty
    user, background = _str_list(raw.get("user")), _str_list(raw.get("background"))
    speeds, model, model_speed = raw.get("speeds"), raw.get("model"), raw.get("model_speed")
    ok = True
    for name, v in (("user", user), ("background", background)):
        if v is None:
            bad("[voices]", name, "must be a non-empty list of espeak-ng voice names")
            ok = False
    if not (isinstance(speeds, list) and speeds and all(_speed(s) for s in speeds)):
        bad("[voices]", "speeds", "must be a non-empty list of words-per-minute (80-450)")
        ok = False
    if not (isinstance(model, str) and model.strip()):
        bad("[voices]", "model", "must be an espeak-ng voice name")
        ok = False
    if not _speed(model_speed):
        bad("[voices]", "model_speed", "must be words-per-minute (80-450)")
        ok = False
    if not ok:
        return empty
    if model in user or set(background) & set(user + (model,)):
        bad("[voices]", "background", "the model and background voices must differ from every "
            "user voice (SPEC §8: background speech is another voice)")
    return Voices(user, tuple(speeds), model, model_speed, background)


def _speed(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 80 <= v <= 450


def _talks(raw, voices: Voices, bad) -> dict[str, Talk]:
    talks: dict[str, Talk] = {}
    if not isinstance(raw, list):
        bad("[[talk]]", "talk", "must be an array of tables")
        return talks
    for k, t in enumerate(raw):
        where = f"talk[{k}]"
        if not isinstance(t, dict):
            bad(where, "talk", "must be a table")
            continue
        tid = t.get("id")
        if not (isinstance(tid, str) and tid.replace("_", "").replace("-", "").isalnum()):
            bad(where, "id", "must be a name of letters, digits, '-' and '_'")
            continue
        where = f"talk[{k}] ({tid})"
        if tid in talks:
            bad(where, "id", "duplicate talk id")
        if t.get("scenario") not in taxonomy.SCENARIOS:
            bad(where, "scenario", f"unknown scenario {t.get('scenario')!r}; known: "
                f"{', '.join(taxonomy.SCENARIOS)}")
        lead_in, reference = _str_list(t.get("lead_in")), _str_list(t.get("reference"))
        if lead_in is None:
            bad(where, "lead_in", "must be a non-empty string or list of phrases")
        if reference is None:
            bad(where, "reference", "must be a non-empty list of phrases")
        voice, speed = _voice_of(t, k, voices, where, bad)
        if lead_in and reference:
            talks[tid] = Talk(tid, t.get("scenario"), voice, speed, lead_in, reference)
    return talks


def _voice_of(obj: dict, k: int, voices: Voices, where: str, bad) -> tuple[str, int]:
    """The explicit voice/speed, else the k-th of the pools (so voices rotate through the file)."""
    voice = obj.get("voice", voices.user[k % len(voices.user)])
    speed = obj.get("speed", voices.speeds[k % len(voices.speeds)])
    if not (isinstance(voice, str) and voice.strip()):
        bad(where, "voice", "must be an espeak-ng voice name")
        voice = voices.user[0]
    if not _speed(speed):
        bad(where, "speed", "must be words-per-minute (80-450)")
        speed = voices.speeds[0]
    return voice, speed


def _entries(raw, voices: Voices, talks: dict[str, Talk], bad) -> list[Entry]:
    if not isinstance(raw, list):
        bad("[[instance]]", "instance", "must be an array of tables")
        return []
    entries: list[Entry] = []
    counters: dict[tuple[str, str], int] = {}
    for k, e in enumerate(raw):
        where = f"instance[{k}]"
        if not isinstance(e, dict):
            bad(where, "instance", "must be a table")
            continue
        key = e.get("condition")
        cond = taxonomy.CONDITIONS_BY_KEY.get(key) if isinstance(key, str) else None
        if cond is None:
            bad(where, "condition", f"unknown condition {key!r}; use action.condition, e.g. "
                f"{taxonomy.CONDITIONS[0].key}")
            continue
        scenario = e.get("scenario")
        if scenario not in taxonomy.SCENARIOS:
            bad(where, "scenario", f"unknown scenario {scenario!r}; known: "
                f"{', '.join(taxonomy.SCENARIOS)}")
            continue
        n = counters[(key, scenario)] = counters.get((key, scenario), 0) + 1
        iid = f"{cond.action}-{cond.id}-{scenario}-{n:02d}"
        where = f"instance[{k}] ({iid})"
        fields = _FIELDS[cond.action]
        for name in e:
            if name not in fields + ("condition", "scenario", "voice", "speed"):
                bad(where, name, f"not used by {cond.action}; fields: {', '.join(fields)}")
        parsed = _entry_fields(e, cond, talks, where, bad)
        if parsed is None:
            continue
        voice, speed = _voice_of(e, k, voices, where, bad)
        talk = parsed.get("talk")
        if talk is not None:
            voice, speed = talk.voice, talk.speed  # the cue is the same user as the lead-in
            for name in ("voice", "speed"):
                if name in e:
                    bad(where, name, f"comes from talk {talk.id!r} (the cue is its user)")
            if talk.scenario != scenario:
                bad(where, "talk", f"talk {talk.id!r} is a {talk.scenario} talk, the instance "
                    f"says {scenario}")
        others = [v for v in voices.background if v != voice]
        if not others:
            bad(where, "voice", "equals every background voice; background speech needs "
                "another voice (SPEC §8)")
            continue
        entries.append(Entry(iid, k, cond, scenario, voice, speed, others[k % len(others)],
                             **parsed))
    return entries


def _entry_fields(e: dict, cond: taxonomy.Condition, talks, where: str, bad) -> dict | None:
    """The action's fields of one instance as Entry keyword arguments, or None if unusable."""
    out: dict = {}
    ok = True
    for name in _FIELDS[cond.action]:
        v = e.get(name)
        if name == "user":
            items = _user_items(v, cond, where, bad)
            ok &= items is not None
            out[name] = items or ()
        elif name == "talk":
            if v not in talks:
                bad(where, "talk", f"unknown talk {v!r}; known: {', '.join(talks) or 'none'}")
                ok = False
            out[name] = talks.get(v)
        elif name in ("cue", "backchannel"):
            if not (isinstance(v, str) and v.strip()):
                bad(where, name, "must be a non-empty string")
                ok = False
            out[name] = v.strip() if isinstance(v, str) else ""
        else:  # reference, recovery: phrase lists
            phrases = _str_list(v)
            if phrases is None:
                bad(where, name, "must be a non-empty string or list of phrases")
                ok = False
            out[name] = phrases or ()
    return out if ok else None


def _user_items(raw, cond: taxonomy.Condition, where: str, bad) -> tuple[Item, ...] | None:
    if not isinstance(raw, list) or not raw:
        bad(where, "user", "must be a list of phrases and marker tables")
        return None
    items: list[Item] = []
    ok = True
    for k, v in enumerate(raw):
        f = f"user[{k}]"
        if isinstance(v, str) and v.strip():
            items.append(Item("phrase", v.strip()))
            continue
        if not (isinstance(v, dict) and len(v) == 1):
            bad(where, f, "must be a phrase string or a one-key marker table "
                f"({', '.join('{' + m + ' = ...}' for m in _MARKERS)})")
            ok = False
            continue
        (kind, value), = v.items()
        if kind not in _MARKERS or cond.action not in _MARKERS[kind]:
            bad(where, f, f"marker {kind!r} is not allowed for {cond.action}")
            ok = False
        elif kind == "ignored":
            if not (isinstance(value, str) and value.strip()):
                bad(where, f, "ignored must be the distractor's text")
                ok = False
            else:
                items.append(Item(kind, value.strip()))
        elif kind == "target":
            if value is not True:
                bad(where, f, "write the interrupt target as {target = true}")
                ok = False
            else:
                items.append(Item(kind))
        elif not (isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0):
            bad(where, f, f"{kind} must be a positive number of seconds")
            ok = False
        else:
            items.append(Item(kind, seconds=float(value)))
    if not ok:
        return None
    return _check_turn(tuple(items), cond, where, bad)


def _check_turn(items: tuple[Item, ...], cond: taxonomy.Condition, where, bad):
    """The structural rules of each action's user turn that hold before any audio exists."""
    kinds = [i.kind for i in items]
    ok = True

    def need(cond_ok: bool, message: str) -> None:
        nonlocal ok
        if not cond_ok:
            bad(where, "user", message)
            ok = False

    need(kinds[0] == "phrase" and kinds[-1] == "phrase", "must start and end with a phrase")
    for a, b in zip(kinds, kinds[1:]):
        need(a in _SOUNDING or b in _SOUNDING,
             f"two markers in a row ({a}, {b}); put a phrase between them")
    if cond.action == "wait":
        pauses = [i for i in items if i.kind == "pause"]
        if cond.id == "continuous_speech":
            need(not pauses, "continuous_speech has no annotated pause")
            need(all(i.seconds <= _CONTINUOUS_MAX_GAP for i in items if i.kind == "gap"),
                 f"continuous_speech allows no gap longer than {_CONTINUOUS_MAX_GAP} s")
        else:
            need(len(pauses) == 1, "a pause condition needs exactly one {pause = seconds}")
            need(all(_PAUSE_RANGE[0] <= p.seconds <= _PAUSE_RANGE[1] for p in pauses),
                 f"the pause must last {_PAUSE_RANGE[0]}-{_PAUSE_RANGE[1]} s")
            need(all(i.seconds < _PAUSE_RANGE[0] / 2 for i in items if i.kind == "gap"),
                 "other gaps must stay well below the annotated pause")
    for kind, action in (("ignored", "ignore"), ("backchannel", "backchannel"),
                         ("target", "interrupt")):
        if cond.action == action:
            need(kinds.count(kind) == 1, f"{action} needs exactly one {{{kind} = ...}} marker")
    if cond.action == "backchannel":
        need(all(i.seconds >= _BACKCHANNEL_MIN_GAP for i in items if i.kind == "backchannel"),
             f"the backchannel gap must last at least {_BACKCHANNEL_MIN_GAP} s")
    return items if ok else None
