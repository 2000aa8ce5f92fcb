"""The estimated cost: billed usage times a price table that is data, never a guess."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from pytest_duplexact.report.views import markdown
from pytest_duplexact.spend import cost
from tests.report.helpers import mixed_report, parsed

USAGE = {
    "model": {"model": "gpt-realtime", "sessions": 3, "responses": 4, "audio_in_s": 47.3,
              "input_token_details.audio_tokens": 1000, "output_token_details.audio_tokens": 500,
              "input_tokens": 1200},
    "text_judge": {"model": "gpt-5.4", "requests": 12, "calls": 12, "cache_hits": 0,
                   "input_tokens": 5000, "output_tokens": 600},
    "transcriber": {"model": "whisper-1", "calls": 3, "audio_s": 60.0},
    "simulator": {"model": "rule"},
}


def test_known_prices_are_summed_and_unknown_models_say_so():
    est = cost.estimate(USAGE, cost.load_prices())
    s = est["services"]
    assert s["model"]["cost"] == pytest.approx(1000 * 32e-6 + 500 * 64e-6)
    # audio seconds are priced through the audio tokens, input_tokens is their sum (price 0)
    assert "unpriced" not in s["model"]
    assert s["transcriber"]["cost"] == pytest.approx(0.006)  # one minute of whisper-1
    assert s["text_judge"]["cost"] is None and "no price for 'gpt-5.4'" in s["text_judge"]["note"]
    assert s["simulator"] == {"model": "rule", "cost": 0.0, "note": "nothing billed"}
    assert est["complete"] is False
    assert est["total"] == pytest.approx(0.064 + 0.006)


def test_a_user_table_adds_and_replaces_entries(tmp_path):
    p = tmp_path / "prices.toml"
    p.write_text('[models."gpt-5.4"]\ninput_tokens = 1e-6\noutput_tokens = 8e-6\n'
                 '[models."whisper-1"]\naudio_s = 0.0002\n')
    est = cost.estimate(USAGE, cost.load_prices(p))
    assert est["services"]["text_judge"]["cost"] == pytest.approx(5000e-6 + 600 * 8e-6)
    assert est["services"]["transcriber"]["cost"] == pytest.approx(0.012)
    assert est["complete"] and est["source"] == str(p)


@pytest.mark.parametrize("text,field", [("[models.x]\ninput_tokens = 'free'\n", "models.x"),
                                        ("models = 3\n", "models"), ("[oops\n", "TOML")])
def test_a_bad_table_names_file_and_field(tmp_path, text, field):
    p = tmp_path / "p.toml"
    p.write_text(text)
    with pytest.raises(cost.PriceError, match=field):
        cost.load_prices(p)


@pytest.mark.parametrize("text,says", [
    # the newcomer's [model."x"] was ignored, then the budget asked for the price it held
    ('[model."my-local-llm"]\ninput_tokens = 1e-6\n',
     "field 'model': unknown table (did you mean 'models'?); known: currency, as_of, models, "
     "audio_rates"),
    ('as_off = "2026-01"\n', "field 'as_off': unknown key (did you mean 'as_of'?)"),
    ('currency = "EUR"\n', "field 'currency': 'EUR', but the bundled prices are in USD"),
    ('as_of = 2026-01-01\n', "field 'as_of': expected the date of the prices as a string"),
    ('[models]\ninput_tokens = 1e-6\n',
     "field 'models.input_tokens': expected a table of prices per usage counter"),
    ('[models.x]\nt = 1e-6\n[audio_rates.x]\nt = { audio = "in", per_s = 1, per_sec = 1 }\n',
     "field 'audio_rates.x.t.per_sec': unknown key (did you mean 'per_s'?)"),
    ('[models.x]\ninput_tokens = 1e-6\n[audio_rates.x]\n'
     'input_token = { audio = "in", per_s = 10 }\n',
     "field 'audio_rates.x.input_token': 'x' has no price for 'input_token' (did you mean "
     "'input_tokens'?); add it under [models.\"x\"]"),
])
def test_a_table_or_key_the_layout_has_not_is_refused_never_ignored(tmp_path, text, says):
    p = tmp_path / "p.toml"
    p.write_text(text)
    with pytest.raises(cost.PriceError) as e:
        cost.load_prices(p)
    assert str(e.value).startswith(f"{p}: {says}")
    assert "\n" not in str(e.value)


def test_the_bundled_table_and_the_docs_examples_load_as_a_user_file(tmp_path):
    bundled = Path(str(resources.files("pytest_duplexact.spend").joinpath("prices.toml")))
    assert cost.load_prices(bundled)["models"] == cost.load_prices()["models"]
    root = Path(__file__).resolve().parents[2]
    docs = (root / "docs" / "judges.md").read_text()
    example = docs.split("## Cost", 1)[1].split("```toml\n", 1)[1].split("```", 1)[0]
    p = tmp_path / "p.toml"
    p.write_text(example)
    assert "gpt-5.4" in cost.load_prices(p)["models"]
    p.write_text('as_of = "2026-01"\n[models.x]\nt = 1e-6\n'
                 '[audio_rates.x]\nt = { audio = "in", per_s = 10 }\n')
    table = cost.load_prices(p)  # its own date is the one shown beside its name
    assert table["as_of"] == "2026-01" and table["audio_rates"]["x"]["t"]["per_s"] == 10


def test_a_rescore_from_the_cache_costs_nothing():
    cached = {"text_judge": {"model": "gpt-4o", "requests": 12, "calls": 0, "cache_hits": 12}}
    est = cost.estimate(cached, cost.load_prices())
    assert est["total"] == 0 and est["complete"]


def test_markdown_shows_the_cost():
    rep = mixed_report()
    rep["cost"] = cost.estimate(USAGE, cost.load_prices())
    text = markdown.render(parsed(rep))
    assert "### Cost" in text and "Estimated cost: 0.0700 USD + unpriced services" in text


# what a realtime session reports: OpenAI's response.usage, flattened (models/openai_realtime.py)
FULL_REALTIME = {"model": "gpt-realtime", "sessions": 1, "responses": 2, "audio_in_s": 10.0,
                 "audio_out_s": 4.0, "total_tokens": 300, "input_tokens": 200,
                 "output_tokens": 100, "input_token_details.text_tokens": 20,
                 "input_token_details.audio_tokens": 180,
                 "input_token_details.cached_tokens": 50,
                 "input_token_details.cached_tokens_details.text_tokens": 10,
                 "input_token_details.cached_tokens_details.audio_tokens": 40,
                 "output_token_details.text_tokens": 20, "output_token_details.audio_tokens": 80}


def test_a_realtime_session_with_its_token_usage_is_priced_completely():
    est = cost.estimate({"model": FULL_REALTIME}, cost.load_prices())
    assert est["complete"] and "unpriced" not in est["services"]["model"]
    assert est["total"] == pytest.approx(20 * 4e-6 + 180 * 32e-6 + 20 * 16e-6 + 80 * 64e-6)


def test_a_server_that_reports_no_tokens_is_priced_from_its_audio_seconds():
    """Issue 32 item 14: the spend was 0 (the tokens were absent), so a budget never stopped;
    now the seconds are priced through [audio_rates], as the estimate prices them."""
    from pytest_duplexact.spend.budget import Budget

    usage = {"model": {"model": "gpt-realtime", "sessions": 1, "responses": 2,
                       "audio_in_s": 10.0, "audio_out_s": 4.0}}
    est = cost.estimate(usage, cost.load_prices())
    s = est["services"]["model"]
    assert s["cost"] == pytest.approx(10 * 10 * 32e-6 + 4 * 20 * 64e-6)
    assert s["from_audio"] == ["input_token_details.audio_tokens",
                               "output_token_details.audio_tokens"]
    assert est["complete"] is False  # an estimate from seconds, not the bill
    assert "from audio seconds: no token usage reported" in cost.describe(est)[1]
    assert cost.describe(est)[0].startswith(f"Estimated cost: {est['total']:.4f} USD (partly "
                                            "from audio seconds)")
    budget = Budget(0.005, None, cost.load_prices())
    budget.record(usage, finished=1)
    assert budget.spent == pytest.approx(s["cost"]) and not budget.admits(0)


def test_complete_is_false_while_any_billed_counter_is_unpriced():
    usage = {"model": {**FULL_REALTIME, "output_token_details.music_tokens": 5}}
    est = cost.estimate(usage, cost.load_prices())
    assert est["services"]["model"]["unpriced"] == ["output_token_details.music_tokens"]
    assert est["complete"] is False
    assert cost.describe(est)[0].endswith("+ unpriced services (prices: bundled, as of 2025-08)")


def test_a_direction_without_tokens_is_priced_from_its_own_seconds():
    """Input tokens reported, output tokens not: the output is priced from its seconds (it
    was priced at 0, 0.32 USD instead of about 1.60, and called complete)."""
    usage = {"model": {"model": "gpt-realtime", "sessions": 1, "audio_in_s": 1000.0,
                       "audio_out_s": 1000.0, "input_token_details.audio_tokens": 10_000}}
    est = cost.estimate(usage, cost.load_prices())
    s = est["services"]["model"]
    assert s["from_audio"] == ["output_token_details.audio_tokens"]
    assert est["total"] == pytest.approx(10_000 * 32e-6 + 1000 * 20 * 64e-6)  # 1.60
    assert est["complete"] is False
    line = cost.describe(est)[1]
    assert "output_token_details.audio_tokens from audio seconds" in line
    assert "input_token_details" not in line
