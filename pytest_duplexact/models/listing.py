"""``duplexact models``: every built-in model, what it needs, and whether that is here.

    duplexact models                         list all (packages, keys, checkpoint options)
    duplexact models moshi -o tokenizer=F …  check one model as it would be run: its
                                             requirements with these options, then its preflight

Reads ``requirements.REQUIREMENTS``; packages are found without importing them, keys are only
reported as set or missing (never printed). Exit status: 0, or 1 when a named model is not
ready.
"""

from __future__ import annotations

from importlib.metadata import entry_points

from . import BUILTINS, ENTRY_POINT_GROUP, preflight
from .requirements import RECORDED, REQUIREMENTS, Requirements, file_problem

DOTS = 30


def _line(label: str, status: str) -> str:
    return f"    {label} {'.' * max(2, DOTS - len(label))} {status}"


def describe(name: str, req: Requirements, options: dict[str, str] | None) -> tuple[list[str],
                                                                                    str]:
    """The lines for one model and its state: ``ready``, ``not ready`` or ``needs options``
    (required checkpoint options not given: only a run, or ``-o``, can tell)."""
    lines = [f"{name}  ({req.kind}) {req.summary}"]
    missing = {p.module for p in req.missing_packages()}
    for p in req.packages:
        lines.append(_line(f"package {p.module}", "missing: " + p.install if p.module in missing
                           else "present"))
    unset = set(req.missing_env())
    for key in req.env:
        lines.append(_line(f"env {key}", "missing" if key in unset else "set"))
    bad_files = False
    pending = False
    for f in req.files:
        label = f"option {f.option}"
        if options is None or not options.get(f.option):
            pending |= f.required
            lines.append(_line(label, f"{'required' if f.required else 'optional'}, a local "
                                      f"file: {f.what}"))
            continue
        problems = file_problem(f, options[f.option])
        bad_files |= bool(problems)
        lines.append(_line(label, "present" if not problems else problems[0]))
    if missing or unset or bad_files:
        state = "not ready"
    elif pending:
        state = "needs options"
    else:
        state = "ready"
    return lines, state


def _entry_point_names() -> list[tuple[str, str]]:
    return sorted({(ep.name, ep.value) for ep in entry_points(group=ENTRY_POINT_GROUP)
                   if ep.name not in BUILTINS})


def render(names: list[str] | None = None, options: dict[str, str] | None = None
           ) -> tuple[str, bool]:
    """The listing, and whether every model named in ``names`` is ready (True when listing
    all). Every model whose requirements are met runs its preflight (with ``options`` for one
    named model)."""
    out: list[str] = []
    all_ready = True
    wanted = names or list(BUILTINS)
    for name in wanted:
        req = REQUIREMENTS.get(name)
        if req is None:
            raise SystemExit(f"duplexact models: {name!r} is not a built-in model; built-ins: "
                             f"{', '.join(BUILTINS)}")
        lines, state = describe(name, req, options)
        # the adapter's own preflight (a key read two ways, a server URL option) decides the
        # rest, in the list as for one name, so both say the same
        if state == "ready":
            try:
                preflight(name, **(options or {}))
            except Exception as e:  # the model's own, user-facing message
                state = f"not ready: {e}"
        lines[0] += f"  [{state}]"
        all_ready &= state == "ready"
        out += lines
    if not names:
        out += [f"recorded:DIR  ({RECORDED.kind}) {RECORDED.summary}  [ready]"]
        for ep_name, value in _entry_point_names():
            out.append(f"{ep_name}  (entry point {value}) needs: see its package")
    return "\n".join(out) + "\n", all_ready or not names


def parse_options(pairs: list[str] | None) -> dict[str, str]:
    options = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"duplexact models: option {pair!r} is not KEY=VALUE")
        options[key.strip()] = value
    return options


def main(args) -> int:
    options = parse_options(args.option)
    if options and len(args.names) != 1:
        raise SystemExit("duplexact models: -o/--option needs exactly one model name")
    text, ready = render(args.names or None, options if args.names else None)
    print(text, end="")
    return 0 if ready else 1
