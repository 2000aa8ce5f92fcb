"""Every action has all its pieces, and they agree (docs/architecture.md, "Adding an action").

An action is its rule (rules/<action>.py) and its record (taxonomy.ActionRecord in
data/taxonomy.py), plus the pieces other files hold for it: its prompt text in
judges/prompts.py, its config and audio columns in released/mapping.toml, its suite and its
bundled fixtures. ``problems`` names every missing or inconsistent piece; the broken records at
the end show that it does.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

import pytest_duplexact
from pytest_duplexact.data import taxonomy
from pytest_duplexact.data.annotations import Requirements
from pytest_duplexact.data.instance import (
    ANNOTATION_FIELDS,
    CLIP_ROLES,
    MANIFEST,
    MODEL_CLIP_ROLES,
    TEXT_FIELDS,
    bundled_root,
)
from pytest_duplexact.fixturegen import build as fixture_build
from pytest_duplexact.fixturegen import source as fixture_source
from pytest_duplexact.judges import prompts
from pytest_duplexact.report.sections import paper_comparison as paper
from pytest_duplexact.rules import RULES
from pytest_duplexact.rules.action_rule import Rule

PACKAGE = Path(pytest_duplexact.__file__).resolve().parent
MAPPING = tomllib.loads((PACKAGE / "released" / "mapping.toml").read_text(encoding="utf-8"))
FIXTURE_CONDITIONS = {f"{o['action']}.{o['condition']}" for o in map(
    json.loads, (bundled_root() / MANIFEST).read_text(encoding="utf-8").splitlines())}


def _overrides(rule, method: str) -> bool:
    return getattr(type(rule), method) is not getattr(Rule, method)


def problems(rec: taxonomy.ActionRecord, rule) -> list[str]:
    """What ``rec`` (with its rule, None when there is none) lacks or contradicts."""
    a, out = rec.action, []
    if not rec.label:
        out.append(f"{a}: no label")
    # conditions: this action's, unique, in the taxonomy, with both judge texts or neither
    if not rec.conditions:
        out.append(f"{a}: no conditions")
    ids = [c.id for c in rec.conditions]
    if len(set(ids)) != len(ids):
        out.append(f"{a}: a condition id twice in {ids}")
    for c in rec.conditions:
        if c.action != a:
            out.append(f"{a}: condition {c.key} belongs to another action")
        elif taxonomy.CONDITIONS_BY_KEY.get(c.key) != c:
            out.append(f"{a}: condition {c.key} is not the taxonomy's")
        if not c.label or not isinstance(c.pipeline, taxonomy.Pipeline):
            out.append(f"{a}: condition {c.id} lacks a label or a pipeline")
        if (c.judge_key is None) != (c.judge_context is None):
            out.append(f"{a}: condition {c.id} has a judge key or a judge context, not both")
    simulated = {c.pipeline is taxonomy.Pipeline.SIMULATOR for c in rec.conditions}
    if len(simulated) > 1:
        out.append(f"{a}: Simulator Replay for some conditions only")
    # the rule, and what it requires of each condition
    if rule is None:
        out.append(f"{a}: no rule (rules/{a}.py, RULES)")
    else:
        if rule.action != a:
            out.append(f"{a}: its rule is {rule.action!r}'s")
        for c in rec.conditions:
            need = rule.requires(c.id)
            if not isinstance(need, Requirements):
                out.append(f"{a}: requires({c.id!r}) is no Requirements")
                continue
            names = {n for f, last, _ in need.within_user for n in (f, last)}
            for kind, given, known in (("clip", need.clips, CLIP_ROLES),
                                       ("annotation", need.annotations, ANNOTATION_FIELDS),
                                       ("text", need.texts, TEXT_FIELDS),
                                       ("within_user annotation", names, need.annotations)):
                out += [f"{a}: requires({c.id!r}) names unknown {kind} {n!r}"
                        for n in sorted(set(given) - set(known))]
    # timing: the record names it exactly when the rule computes it
    if rec.timing is not None and not (rec.timing.diagnostic and rec.timing.title):
        out.append(f"{a}: a timing without its diagnostic name or chart title")
    if rule is not None and (rec.timing is not None) != _overrides(rule, "timing"):
        out.append(f"{a}: the record's timing and the rule's timing() disagree")
    # S: a prompt in the catalogue that the rule fills, or a rule that decides S alone
    if rec.prompt is not None and rec.prompt not in prompts.CATALOGUE:
        out.append(f"{a}: prompt {rec.prompt!r} is not in judges/prompts.py (CATALOGUE)")
    if rule is not None:
        if (rec.prompt is not None) != _overrides(rule, "judge_fields"):
            out.append(f"{a}: the record's prompt and the rule's judge_fields() disagree")
        if rec.prompt is None and not _overrides(rule, "subsequent"):
            out.append(f"{a}: no prompt and no rule-decided subsequent(): nothing decides S")
    # the oracle's clips and the LLM simulator's cue purpose
    if not rec.oracle_clips:
        out.append(f"{a}: no oracle clips")
    out += [f"{a}: oracle clip {r!r} is not a model-side clip role"
            for r in rec.oracle_clips if r not in MODEL_CLIP_ROLES]
    if rec.cue_purpose and simulated != {True}:
        out.append(f"{a}: a cue purpose, but its conditions are not Simulator Replay")
    if not rec.cue_purpose and simulated == {True}:
        out.append(f"{a}: no cue purpose (Simulator Replay shows it to the LLM simulator)")
    # the released data (if it has the action): its config and audio columns in
    # mapping.toml, its item count
    if (rec.released_config is None) != (rec.released_items is None):
        out.append(f"{a}: a released config without an item count, or the reverse")
    if rec.released_config is not None:
        if MAPPING["configs"].get(rec.released_config) != a:
            out.append(f"{a}: config {rec.released_config!r} does not map to {a} in "
                       "released/mapping.toml [configs]")
        roles = set(MAPPING["audio"].get(a, {}))
        wanted = set(rec.oracle_clips).union(*(rule.requires(c.id).clips
                                               for c in rec.conditions) if rule else ())
        out += [f"{a}: released/mapping.toml [audio.{a}] has no {r!r}"
                for r in sorted(wanted - roles)]
    if rec.released_items is not None and rec.released_items <= 0:
        out.append(f"{a}: released item count {rec.released_items}")
    # its suite and its fixtures
    suite = PACKAGE / "suites" / f"test_{a}.py"
    if not suite.is_file() or f'action_test("{a}")' not in suite.read_text(encoding="utf-8"):
        out.append(f"{a}: no suite (suites/test_{a}.py calling action_test({a!r}))")
    # what the fixture generator needs to render it: a builder, the source fields it reads
    if a not in fixture_build._BUILDERS:
        out.append(f"{a}: no fixture builder (fixturegen/build.py _BUILDERS)")
    if a not in fixture_source._FIELDS:
        out.append(f"{a}: no fixture source fields (fixturegen/source.py _FIELDS)")
    out += [f"{a}: no bundled fixture of {c.key}" for c in rec.conditions
            if c.key not in FIXTURE_CONDITIONS]
    return out


@pytest.mark.parametrize("action", taxonomy.ACTIONS)
def test_every_action_has_every_piece(action):
    rule = RULES.get(action)
    assert problems(taxonomy.RECORDS[action], rule) == []
    assert rule.record is taxonomy.RECORDS[action]


def test_the_tables_are_views_of_the_records():
    assert tuple(RULES) == taxonomy.ACTIONS == tuple(taxonomy.RECORDS)
    assert taxonomy.CONDITIONS == tuple(c for r in taxonomy.RECORDS.values()
                                        for c in r.conditions)
    assert set(prompts.SUBSEQUENT) == {a for a, r in taxonomy.RECORDS.items() if r.prompt}
    assert sum(paper.RELEASED_PER_ACTION.values()) == paper.RELEASED_ITEMS


def test_a_record_with_every_piece_wrong_is_named_piece_by_piece():
    rec = taxonomy.RECORDS["recover"]
    broken = replace(rec, label="", prompt="recovery", timing=None, cue_purpose=None,
                     oracle_clips=("lead_in",), released_config="recovery", released_items=0,
                     conditions=rec.conditions[:1] + taxonomy.RECORDS["stop"].conditions)
    assert problems(broken, RULES["recover"]) == [
        "recover: no label",
        "recover: condition stop.direct_interruption belongs to another action",
        "recover: the record's timing and the rule's timing() disagree",
        "recover: prompt 'recovery' is not in judges/prompts.py (CATALOGUE)",
        "recover: oracle clip 'lead_in' is not a model-side clip role",
        "recover: no cue purpose (Simulator Replay shows it to the LLM simulator)",
        "recover: config 'recovery' does not map to recover in released/mapping.toml [configs]",
        "recover: released item count 0",
    ]


def test_a_ninth_action_with_only_its_record_lacks_the_other_pieces():
    rec = taxonomy.RECORDS["take_turn"]
    ninth = replace(rec, action="repair", released_config="repair", cue_purpose="A repair.",
                    conditions=tuple(replace(c, action="repair") for c in rec.conditions[:1]))
    assert problems(ninth, None) == [
        "repair: condition repair.immediate is not the taxonomy's",
        "repair: no rule (rules/repair.py, RULES)",
        "repair: a cue purpose, but its conditions are not Simulator Replay",
        "repair: config 'repair' does not map to repair in released/mapping.toml [configs]",
        "repair: released/mapping.toml [audio.repair] has no 'reference'",
        "repair: no suite (suites/test_repair.py calling action_test('repair'))",
        "repair: no fixture builder (fixturegen/build.py _BUILDERS)",
        "repair: no fixture source fields (fixturegen/source.py _FIELDS)",
        "repair: no bundled fixture of repair.immediate",
    ]
    # not in the released data: no mapping to check, but both pieces or neither
    assert not any("mapping.toml" in p for p in problems(
        replace(ninth, released_config=None, released_items=None), None))
    assert "repair: a released config without an item count, or the reverse" in problems(
        replace(ninth, released_items=None), None)
    # its rule present but filling a prompt its record does not name
    assert "repair: the record's prompt and the rule's judge_fields() disagree" in problems(
        replace(ninth, prompt=None), replace_action(RULES["take_turn"], "repair"))


def replace_action(rule, action: str):
    """The same rule object under another action name (its class, its methods)."""
    clone = object.__new__(type(rule))
    clone.__dict__.update(vars(rule))
    clone.action = action
    return clone
