"""The estimated cost: billed usage times a price table that is data, never a guess."""

from __future__ import annotations

import pytest

from pytest_duplexact.report import cost, markdown
from tests.report.helpers import mixed_report

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
    assert s["model"]["unpriced"] == ["audio_in_s", "input_tokens"]
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


def test_a_rescore_from_the_cache_costs_nothing():
    cached = {"text_judge": {"model": "gpt-4o", "requests": 12, "calls": 0, "cache_hits": 12}}
    est = cost.estimate(cached, cost.load_prices())
    assert est["total"] == 0 and est["complete"]


def test_markdown_shows_the_cost():
    rep = mixed_report()
    rep["cost"] = cost.estimate(USAGE, cost.load_prices())
    text = markdown.render(rep)
    assert "### Cost" in text and "Estimated cost: 0.0700 USD + unpriced services" in text
