"""Barge-in replay for interrupt (SPEC §7, paper App. C.2): the user holds the floor and the
model may intervene.

The user clip is streamed chunk by chunk while a takeover detector watches the model's
output. A takeover is model speech that is a real attempt to take the turn: a stretch of
continuous speech of at least ``TAKEOVER_MIN_SPEECH_S``, or more than
``taxonomy.BACKCHANNEL_MAX_WORDS`` words in the heard native transcript of the current
stretch. A backchannel or a filler is neither. On a takeover the rest of the user audio is
not sent (silence is pushed in its place, so the session keeps its length) and
``user_sent_until`` records where it stopped; without one it is the end of the user clip.
Observation: ``OBSERVATION_S`` after the user clip's end.

The detector only steers the interaction; immediate success is computed from the recorded
timeline by rules/interrupt.py.

Branches (our reading of the released data's ``branch_acknowledged`` / ``branch_ignored``
columns, docs/dataset-format.md): when the instance has them and ``branches`` is on, a
takeover (during the user clip or the ignored branch) stops the user audio and the
acknowledged branch is played from there (the user yields to the model); a user clip that
ends without a takeover continues with the ignored branch (the user keeps talking).
``--duplexact-bargein-branches=off`` keeps the plain replay above.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..data.annotations import Instance
from ..data.audio import SAMPLE_RATE, silence
from ..data.taxonomy import BACKCHANNEL_MAX_WORDS
from ..data.timeline import count_words
from .direct import CHUNK_S, prepare, push_in_chunks, read_clip
from .duplex import Duplex, Recording
from .simulator import SpeechTracker

TAKEOVER_MIN_SPEECH_S = 1.0
# Native words may be stamped a little before the energy detector's onset.
WORD_ONSET_SLACK_S = 0.25
OBSERVATION_S = 8.0


def is_takeover(tracker: SpeechTracker, duplex: Duplex,
                min_speech_s: float = TAKEOVER_MIN_SPEECH_S) -> bool:
    since = tracker.since
    if since is None:
        return False
    if tracker.gate.time - since >= min_speech_s:
        return True
    words = [w.text for w in duplex.transcript() if w.start >= since - WORD_ONSET_SLACK_S]
    return count_words(" ".join(words)) > BACKCHANNEL_MAX_WORDS


@dataclass(frozen=True)
class BargeInReplay:
    chunk_s: float = CHUNK_S
    takeover_min_speech_s: float = TAKEOVER_MIN_SPEECH_S
    observation_s: float = OBSERVATION_S
    branches: bool = True

    async def run(self, duplex: Duplex, instance: Instance) -> Recording:
        user = await read_clip(duplex, instance.clip("user"))
        acknowledged = instance.clips.get("branch_acknowledged") if self.branches else None
        ignored = instance.clips.get("branch_ignored") if self.branches else None
        tracker = SpeechTracker(duplex)
        step = max(1, int(round(self.chunk_s * SAMPLE_RATE)))
        sent_until: float | None = None

        async def stream(clip: np.ndarray) -> int | None:
            """Push ``clip`` until a takeover (the index after the last chunk sent) or its
            end (None)."""
            nonlocal sent_until
            await prepare(duplex, clip)  # pushed whole unless the model takes over
            for i in range(0, len(clip), step):
                await duplex.push(clip[i: i + step])
                tracker.update()
                if is_takeover(tracker, duplex, self.takeover_min_speech_s):
                    sent_until = duplex.now
                    duplex.event("takeover: user audio stopped")
                    return i + step
            return None

        stopped_at = await stream(user)
        took_over = stopped_at is not None
        if took_over and acknowledged is None:  # keep the session's length: silence instead
            for i in range(stopped_at, len(user), step):
                await duplex.push(np.zeros_like(user[i: i + step]))
        if not took_over and ignored is not None:
            duplex.event("branch_ignored: the user talks on")
            took_over = await stream(await read_clip(duplex, ignored)) is not None
        if not took_over:
            sent_until = duplex.now
            duplex.event("user_audio_end")
        elif acknowledged is not None:
            duplex.event("branch_acknowledged: the user yields")
            await push_in_chunks(duplex, await read_clip(duplex, acknowledged), self.chunk_s)
        await push_in_chunks(duplex, silence(self.observation_s), self.chunk_s)
        return replace(await duplex.close(), user_sent_until=sent_until)
