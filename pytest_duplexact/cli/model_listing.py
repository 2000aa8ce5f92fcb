"""``duplexact models``: every built-in model, what it needs, and whether that is here; then
the paper's 14 models, each with its route (in process, bridge, native server, hosted), what to
start on the model's machine, and whether this install can run it (models/catalogue/paper_models.py).

    duplexact models                         list all (packages, keys, checkpoint options)
    duplexact models moshi -o tokenizer=F …  check one model as it would be run: its
                                             requirements with these options, then its preflight
    duplexact models bridge -o url=ws://…    ... and for a server's model: whether it answers
                                             now (it connects once: READY, then CLOSE)
    duplexact models flm-audio               one of the paper's models: its routes

Reads the table of built-ins (models/catalogue/builtins.py); packages are found without importing them, keys are only
reported as set or missing (never printed). Exit status: 0, or 1 when a named model is not
ready.
"""

from __future__ import annotations

from importlib.metadata import entry_points

from ..data.suggest import did_you_mean
from ..models import ENTRY_POINT_GROUP, factory_for, preflight
from ..models.adapter import adapter_for
from ..models.catalogue.builtins import BUILTINS, RECORDED
from ..models.catalogue.paper_models import (
    NATIVE_TRANSCRIPT,
    OTHER_ROUTES,
    OTHERS,
    ROSTER,
    ROUTES,
    SIMULATOR,
    other_names,
    paper_names,
)
from ..models.catalogue.requirements import Builtin, file_problem

DOTS = 30


def _line(label: str, status: str) -> str:
    return f"    {label} {'.' * max(2, DOTS - len(label))} {status}"


def describe(name: str, req: Builtin, options: dict[str, str] | None) -> tuple[list[str],
                                                                                    str]:
    """The lines for one model and its state: ``ready``, ``not ready`` or ``needs options``
    (required checkpoint options not given: only a run, or ``-o``, can tell)."""
    lines = [f"{name}  ({req.kind}) {req.summary}"]
    hints = req.install_hints()
    missing = {m for mods in hints.values() for m in mods}
    for p in req.packages:
        lines.append(_line(f"package {p.module}", "missing" if p.module in missing
                           else "present"))
    lines += [_line("install", install) for install in hints]  # once, however many it brings
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
        req = BUILTINS.get(name)
        if req is None and name in (*paper_names(), *other_names()):
            out += paper_lines(name)
            all_ready &= any(r.missing() is None for r in _routes(name))
            continue
        if req is None:
            raise SystemExit(f"duplexact models: {name!r} is not a built-in model"
                             f"{did_you_mean(name, [*BUILTINS, *paper_names(), *other_names()])}"
                             "; built-ins: "
                             f"{', '.join(BUILTINS)}; the paper's: {', '.join(paper_names())}")
        lines, state = checked(name, req, options)
        if state == "ready":
            try:
                lines += _reached(name, options or {})
            except Exception as e:  # the client's own, user-facing message
                state = f"not ready: {e}"
        lines[0] += f"  [{state}]"
        all_ready &= state == "ready"
        out += lines
        if names and name in paper_names():  # a paper model by its own name: its routes too
            out += paper_lines(name)
            all_ready &= any(r.missing() is None for r in ROUTES.get(name, ()))
    if not names:
        out += [f"recorded:DIR  ({RECORDED.kind}) {RECORDED.summary}  [ready]"]
        for ep_name, value in _entry_point_names():
            out.append(f"{ep_name}  (entry point {value}) needs: see its package")
        out.append("Other models a built-in reaches (route: what to start on the model's "
                   "machine, then the plugin's model and options):")
        for name in other_names():
            out += ["  " + line for line in paper_lines(name)]
        out.append(f"The paper's {len(ROSTER)} models (route: what to start on the model's "
                   "machine, then the plugin's model and options):")
        for name in paper_names():
            out += ["  " + line for line in paper_lines(name)]
    return "\n".join(out) + "\n", all_ready or not names


def checked(name: str, req: Builtin, options: dict[str, str] | None
            ) -> tuple[list[str], str]:
    """``describe``, then the adapter's own preflight (a key read two ways, a server URL
    option) decides the rest: the list, one name and a paper model's route all say the
    same."""
    lines, state = describe(name, req, options)
    if state == "ready":
        try:
            preflight(name, **(options or {}))
        except Exception as e:  # the model's own, user-facing message
            state = f"not ready: {e}"
    return lines, state


def _reached(name: str, options: dict[str, str]) -> list[str]:
    """For a model behind a server (a factory with ``reach``): connect once, say what
    answered (raises with the client's message when nothing does)."""
    described = adapter_for(factory_for(name)).reach(**options)
    return [] if described is None else [_line("server", f"reachable: {described}")]


def _routes(name: str) -> tuple:
    return ROUTES.get(name) or OTHER_ROUTES.get(name, ())


def paper_lines(name: str) -> list[str]:
    """One of the paper's models (or another a built-in reaches, ``OTHERS``): its checkpoint,
    pipelines and every route with its state."""
    _, paper, checkpoint = next(r for r in (*ROSTER, *OTHERS) if r[0] == name)
    pipelines = "direct + simulator" if name in SIMULATOR else "direct"
    text = "; native transcript" if name in NATIVE_TRANSCRIPT else ""
    ran = f"the paper ran {pipelines}{text}" if name in paper_names() else "not in the paper"
    lines = [f"{name}  ({paper}, {checkpoint}; {ran})"]
    routes = _routes(name)
    if not routes:
        return lines + ["    no adapter in this install  [not runnable here]"]
    for r in routes:
        missing = r.missing()
        if missing is not None:
            lines.append(f"    {r.kind}: {missing} in this install  [not runnable here]")
            continue
        if r.kind in ("bridge", "native server", "serving engine"):  # on the model's machine
            _, state = describe(r.plugin, BUILTINS[r.plugin], None)
            state = "needs its server" if state == "ready" else state
        else:
            _, state = checked(r.plugin, BUILTINS[r.plugin], None)
        lines.append(f"    {r.kind}: {r.command()}  [{state}]")
        if r.start:
            lines.append(f"      start: {r.start}")
    return lines


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
        raise SystemExit("duplexact models: -o/--option/--duplexact-model-option needs exactly "
                         "one model name")
    text, ready = render(args.names or None, options if args.names else None)
    print(text, end="")
    return 0 if ready else 1
