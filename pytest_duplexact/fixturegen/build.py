"""Source entry -> clips, annotations and a manifest line (the format of instance.py).

Every annotation is the sample position where the generator placed a phrase or a silence, so
it is exact by construction. After building, each instance is checked against what the
pipelines and the oracle need of it (durations, word counts, windows); a violation is a
SourceError naming the source entry and field, since the fix is always in the words.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..data import taxonomy
from ..data.timeline import count_words
from . import acoustics, tts
from .source import Entry, Source, Talk
from .track import Track

SR = tts.SR
USER_LEAD_S = 0.3  # before the first user word
USER_TAIL_S = 0.2  # after the last: the pipelines add the observation silence themselves
MODEL_LEAD_S = 0.05  # model clips (reference, backchannel, recovery) start almost at once
MODEL_TAIL_S = 0.1
CUE_LEAD_S = 0.1
CUE_TAIL_S = 0.1
USER_GAP_S = 0.15  # between the phrases of a user turn (below the 0.2 s pause threshold)
DISTRACTOR_GAP_S = 0.3  # around the distractor inside an ignore turn
MODEL_GAP_S = 0.2  # between the phrases of a model clip (hold_floor needs gaps <= 0.25 s)
BACKCHANNEL_POINT_S = 0.1  # the backchannel point sits this far into its gap (or mid-gap)

# What the fixture promises (docs/fixtures.md); checked on every generated instance.
LIMITS = {
    "wait_reference_s": (2.0, 4.0),
    "continuous_min_s": 3.0,
    "continuous_max_gap_s": 0.2,
    "response_min_words": 5,  # take_turn / ignore / wait / backchannel references, recoveries
    "backchannel_user_min_s": 5.0,
    "interrupt_user_min_s": 7.0,
    "interrupt_target_before_end_s": 2.5,
    "interrupt_reference_s": (2.0, 4.0),
    "interrupt_reference_min_words": 6,
    "lead_in_s": (2.0, 4.0),
    "long_reference_min_s": 9.0,
    "cue_s": (0.4, 3.0),
    "recovery_s": (2.0, 5.0),
}


@dataclass
class Built:
    """One instance, ready to write: its manifest line and its audio files."""

    record: dict
    files: dict[str, np.ndarray] = field(default_factory=dict)  # relative path -> samples


@dataclass(frozen=True)
class ClipOut:
    path: str
    samples: np.ndarray
    transcript: list[dict]
    speech: tuple[float, float]  # first and last placed phrase boundary, seconds

    @property
    def text(self) -> str:
        return " ".join(w["text"] for w in self.transcript)

    @property
    def speech_s(self) -> float:
        return self.speech[1] - self.speech[0]

    def entry(self) -> dict:
        return {"path": self.path, "transcript": self.transcript}


class _Problems:
    def __init__(self, src: Source, entry: Entry):
        self.where = f"{src.path} instance[{entry.index}] ({entry.id})"
        self.items: list[str] = []

    def need(self, ok: bool, fld: str, message: str) -> None:
        if not ok:
            self.items.append(f"{self.where} field '{fld}': {message}")


def build(src: Source, entry: Entry) -> tuple[Built, list[str]]:
    """Render one entry; returns it with the list of broken promises (empty when fine)."""
    probs = _Problems(src, entry)
    builder = _BUILDERS[entry.action]
    clips, ann, texts = builder(src, entry, probs)
    record = {
        "id": entry.id,
        "action": entry.action,
        "condition": entry.cond.id,
        "scenario": entry.scenario,
        "source": src.source,
        "audio": {role: clip.entry() for role, clip in clips.items()},
        "annotations": ann,
        "text": texts,
        "synthesis": _synthesis(src, entry),
    }
    files = {clip.path: clip.samples for clip in clips.values()}
    return Built(record, files), probs.items


def _synthesis(src: Source, e: Entry) -> dict:
    out = {"tts": tts.version(), "user_voice": e.voice, "user_speed": e.speed,
           "model_voice": src.voices.model, "model_speed": src.voices.model_speed}
    if _NOT_ADDRESSED.get(e.cond.id) is acoustics.background:
        out["background_voice"] = e.background_voice
    if e.talk is not None:
        out["talk"] = e.talk.id
    return out


# --- clips -----------------------------------------------------------------------------------

def _clip(path: str, track: Track, tail_s: float) -> ClipOut:
    samples, words = track.finish(tail_s)
    speech = (track.placed[0].start_s, track.placed[-1].end_s)
    return ClipOut(path, samples, words, speech)


def model_clip(src: Source, path: str, phrases) -> ClipOut:
    """The model's speech (reference, backchannel, recovery): one fixed voice, short gaps."""
    t = Track(MODEL_LEAD_S)
    for k, text in enumerate(phrases):
        if k:
            t.silence(MODEL_GAP_S)
        t.phrase(tts.render(text, src.voices.model, src.voices.model_speed), text)
    return _clip(path, t, MODEL_TAIL_S)


# The conditions (of ignore and hold_floor) whose distractor / cue is not addressed speech.
_NOT_ADDRESSED = {"other_directed_speech": acoustics.other_directed,
                  "background_speech": acoustics.background}


def _distractor(e: Entry, text: str) -> np.ndarray:
    """SPEC §8: other-directed = the user's own voice off-axis; background = another voice;
    anything else (a stop / recover / hold_floor cue) is the user, addressed."""
    process = _NOT_ADDRESSED.get(e.cond.id)
    if process is None:
        return tts.render(text, e.voice, e.speed)
    voice = e.background_voice if process is acoustics.background else e.voice
    return process(tts.render(text, voice, e.speed))


def user_turn(e: Entry, path: str) -> tuple[ClipOut, dict]:
    """Place the user items; returns the clip and the annotations on its clock."""
    t = Track(USER_LEAD_S)
    ann: dict[str, float] = {}
    owed = 0.0  # silence due before the next sounding item (0 after an explicit silence)
    for item in e.user:
        if item.kind == "target":
            ann["interrupt_target"] = t.placed[-1].end_s
        elif item.kind in ("pause", "gap", "backchannel"):  # a chosen silence
            start = t.now
            t.silence(item.seconds)
            owed = 0.0
            if item.kind == "pause":
                ann["pause_start"], ann["pause_end"] = start / SR, t.now_s
            elif item.kind == "backchannel":
                into = min(BACKCHANNEL_POINT_S, item.seconds / 2)
                ann["backchannel_point"] = (start + int(round(into * SR))) / SR
        elif item.kind == "ignored":
            t.silence(max(owed, DISTRACTOR_GAP_S) if owed else 0.0)
            p = t.phrase(_distractor(e, item.text), item.text)
            ann["other_start"], ann["other_end"] = p.start_s, p.end_s
            owed = DISTRACTOR_GAP_S
        else:
            t.silence(owed)
            t.phrase(tts.render(item.text, e.voice, e.speed), item.text)
            owed = USER_GAP_S
    clip = _clip(path, t, USER_TAIL_S)
    ann = {"user_start": clip.speech[0], "user_end": clip.speech[1], **ann}
    return clip, ann


def _cue_clip(e: Entry, path: str) -> tuple[ClipOut, dict]:
    t = Track(CUE_LEAD_S)
    p = t.phrase(_distractor(e, e.cue), e.cue)
    return _clip(path, t, CUE_TAIL_S), {"cue_start": p.start_s, "cue_end": p.end_s}


def _talk_clips(src: Source, talk: Talk) -> tuple[ClipOut, ClipOut]:
    """The shared lead-in (the user's request) and the model's long answer."""
    t = Track(USER_LEAD_S)
    for k, text in enumerate(talk.lead_in):
        if k:
            t.silence(USER_GAP_S)
        t.phrase(tts.render(text, talk.voice, talk.speed), text)
    lead = _clip(f"audio/talk-{talk.id}.lead_in.flac", t, USER_TAIL_S)
    ref = model_clip(src, f"audio/talk-{talk.id}.reference.flac", talk.reference)
    return lead, ref


def check_talk(src: Source, talk: Talk) -> list[str]:
    """A talk's promises, checked once however many instances share it."""
    lead, ref = _talk_clips(src, talk)
    where = f"{src.path} talk {talk.id!r}"
    lo, hi = LIMITS["lead_in_s"]
    out = []
    if not lo <= lead.speech_s <= hi:
        out.append(f"{where} field 'lead_in': lasts {lead.speech_s:.2f} s; must be {lo}-{hi} s")
    if ref.speech_s < LIMITS["long_reference_min_s"]:
        out.append(f"{where} field 'reference': lasts {ref.speech_s:.2f} s; needs >= "
                   f"{LIMITS['long_reference_min_s']} s so a cue lands mid-speech")
    return out


def _path(e: Entry, role: str) -> str:
    return f"audio/{e.id}.{role}.flac"


# --- per action ------------------------------------------------------------------------------

def _direct(src: Source, e: Entry, probs: _Problems):
    """wait / ignore / take_turn / backchannel / interrupt: a user turn and a reference."""
    user, ann = user_turn(e, _path(e, "user"))
    ref = model_clip(src, _path(e, "reference"), e.reference)
    clips = {"user": user, "reference": ref}
    texts = {"user": user.text, "reference": ref.text}
    L = LIMITS
    words = count_words(ref.text)
    if e.action == "interrupt":
        lo, hi = L["interrupt_reference_s"]
        probs.need(words >= L["interrupt_reference_min_words"], "reference",
                   f"an interruption needs >= {L['interrupt_reference_min_words']} words")
    else:
        lo, hi = L["wait_reference_s"] if e.action == "wait" else (0.0, float("inf"))
        probs.need(words >= L["response_min_words"], "reference",
                   f"a response needs >= {L['response_min_words']} words, has {words}")
    probs.need(lo <= ref.speech_s <= hi, "reference",
               f"speech lasts {ref.speech_s:.2f} s; must be {lo}-{hi} s")
    user_s = ann["user_end"] - ann["user_start"]
    if e.action == "wait":
        _check_wait(e, user, ann, probs)
    elif e.action == "ignore":
        texts["ignored"] = next(i.text for i in e.user if i.kind == "ignored")
    elif e.action == "backchannel":
        bc = model_clip(src, _path(e, "backchannel"), [e.backchannel])
        clips["backchannel"] = bc
        texts["backchannel"] = bc.text
        probs.need(count_words(bc.text) <= taxonomy.BACKCHANNEL_MAX_WORDS, "backchannel",
                   f"a backchannel has at most {taxonomy.BACKCHANNEL_MAX_WORDS} words")
        probs.need(user_s >= L["backchannel_user_min_s"], "user",
                   f"user speech lasts {user_s:.2f} s; needs >= {L['backchannel_user_min_s']}")
    elif e.action == "interrupt":
        probs.need(user_s >= L["interrupt_user_min_s"], "user",
                   f"user speech lasts {user_s:.2f} s; needs >= {L['interrupt_user_min_s']}")
        lead = ann["user_end"] - ann["interrupt_target"]
        probs.need(lead >= L["interrupt_target_before_end_s"], "user",
                   f"the target is {lead:.2f} s before the end; needs >= "
                   f"{L['interrupt_target_before_end_s']} s")
    return clips, ann, texts


def _check_wait(e: Entry, user: ClipOut, ann: dict, probs: _Problems) -> None:
    a, b = int(round(ann["user_start"] * SR)), int(round(ann["user_end"] * SR))
    limit = LIMITS["continuous_max_gap_s"]
    gaps = [(s / SR, t / SR) for s, t in tts.silent_runs(user.samples[a:b], limit)]
    if e.cond.id == "continuous_speech":
        probs.need(not gaps, "user", f"silences longer than {limit} s inside the turn: {gaps}")
        user_s = ann["user_end"] - ann["user_start"]
        probs.need(user_s >= LIMITS["continuous_min_s"], "user",
                   f"continuous speech lasts {user_s:.2f} s; needs >= "
                   f"{LIMITS['continuous_min_s']} s")
    else:
        probs.need(len(gaps) == 1, "user",
                   f"expected only the annotated pause to exceed {limit} s, found {len(gaps)}")


def _simulator(src: Source, e: Entry, probs: _Problems):
    """stop / hold_floor / recover: the shared talk, the instance's cue (and recovery)."""
    lead, ref = _talk_clips(src, e.talk)
    cue, ann = _cue_clip(e, _path(e, "cue"))
    clips = {"lead_in": lead, "reference": ref, "cue": cue}
    texts = {"cue": e.cue, "reference": ref.text}
    L = LIMITS
    cue_s = ann["cue_end"] - ann["cue_start"]
    lo, hi = L["cue_s"]
    probs.need(lo <= cue_s <= hi, "cue", f"cue lasts {cue_s:.2f} s; must be {lo}-{hi} s")
    if e.action == "recover":
        rec = model_clip(src, _path(e, "recovery"), e.recovery)
        clips["recovery"] = rec
        texts["recovery"] = rec.text
        lo, hi = L["recovery_s"]
        probs.need(count_words(rec.text) >= L["response_min_words"], "recovery",
                   f"a recovery needs >= {L['response_min_words']} words")
        probs.need(lo <= rec.speech_s <= hi, "recovery",
                   f"recovery lasts {rec.speech_s:.2f} s; must be {lo}-{hi} s")
    return clips, ann, texts


_BUILDERS = {
    "wait": _direct, "ignore": _direct, "take_turn": _direct, "backchannel": _direct,
    "interrupt": _direct, "stop": _simulator, "hold_floor": _simulator, "recover": _simulator,
}
assert set(_BUILDERS) == set(taxonomy.ACTIONS)
