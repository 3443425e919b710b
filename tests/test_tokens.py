"""Token counting: the model's tokenizer where it can be loaded, words as a labelled fallback."""

from __future__ import annotations

import importlib.util
import json

import pytest

from mas.library.inject import role_block
from mas.models import tokens
from mas.models.endpoint import Adapted
from mas.models.fake import FakeClient
from mas.models.limiter import Limited
from mas.models.tokens import resolve, spec_for_model, spec_of, tokenizer
from mas.team.scenario import load_scenario
from mas.testing import train_on_fake
from mas.types.lessons import Budget, Lesson, Provenance, Version

MIXED = "Call solver/0042 with 1234567.89 and 98765, then ñandú 東京 naïve."


@pytest.fixture(autouse=True)
def fresh():
    tokenizer.cache_clear()
    yield
    tokenizer.cache_clear()


def test_words_count_words_and_punctuation():
    assert tokenizer("words").count("Check 12,345 units.") == 6
    assert not tokenizer("words").fallback


def test_a_tokenizer_that_cannot_load_falls_back_to_words_and_says_why(monkeypatch, caplog):
    def offline(encoding):
        raise ConnectionError("Failed to resolve host")

    monkeypatch.setattr(tokens, "_tiktoken", offline)
    tok = tokenizer("tiktoken:o200k_base")
    assert tok.fallback
    assert tok.label.startswith("words (fallback: tiktoken:o200k_base unavailable: ConnectionError")
    assert tok.count(MIXED) == tokenizer("words").count(MIXED)
    assert "counting tokens as words" in caplog.text


def test_an_unknown_or_unresolved_spec_counts_words_labelled():
    assert tokenizer("sentencepiece:x").fallback
    model = tokenizer("model")
    assert model.fallback and "no model named" in model.label


def test_tiktoken_here_is_either_real_or_a_labelled_fallback():
    tok = tokenizer("tiktoken:o200k_base")
    if tok.fallback:  # no network for its encoding file, or tiktoken not installed
        assert tok.count("hello world") == 2 and "unavailable" in tok.label
    else:
        assert tok.label == "tiktoken o200k_base"
        assert tok.count(MIXED) > tokenizer("words").count(MIXED)


@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="needs the `local` extra")
def test_the_embedded_models_vocabulary_counts_real_tokens():
    tok = tokenizer("embedded")
    assert not tok.fallback and "GGUF" in tok.label
    assert tok.count("") == 0
    assert len(tok.encode(MIXED)) == tok.count(MIXED)
    # numbers, ids and non-English text take many more tokens than words
    assert tok.count(MIXED) > 1.5 * tokenizer("words").count(MIXED)


@pytest.mark.parametrize(
    "model, spec",
    [
        ("local", "embedded"),
        ("openai:gpt-4o-mini", "tiktoken:o200k_base"),
        ("openai:gpt-4", "tiktoken:cl100k_base"),
        ("openai:deepseek-chat", "words"),
        ("openai:bench", "words"),
        ("fake", "words"),
    ],
)
def test_spec_for_model(model, spec):
    assert spec_for_model(model) == spec


def test_the_tokenizer_of_a_client_is_found_through_its_wrappers():
    endpoint = Adapted(
        FakeClient(), schema_in_format=False, text_tools=False, name="m", tokenizer="tiktoken:o200k_base"
    )
    assert spec_of(Limited(endpoint, 2)) == "tiktoken:o200k_base"
    assert spec_of(FakeClient()) == "words"
    assert resolve("model", Limited(endpoint, 2)) == "tiktoken:o200k_base"
    assert resolve("embedded", FakeClient()) == "embedded"


def test_injection_stays_within_the_budget_in_the_budgets_tokenizer(monkeypatch):
    """A tokenizer that counts every character: the budget holds in its counts, not in words."""
    monkeypatch.setattr(tokens, "_gguf", lambda path: (len, list))
    lessons = [Lesson(id=f"solver/{i:04d}", text=f"When step {i} has 12345 in it, check it.") for i in range(1, 40)]
    heads = {"solver": Version(library="solver", number=1, lessons=lessons, next_id=40)}
    budget = Budget(inject_tokens=120, tokenizer="gguf:chars")
    block = role_block(heads, "solver", task="step 12345", budget=budget)
    shown = [l.text for l in lessons if l.id in block.shown]
    assert shown and sum(map(len, shown)) <= 120
    words = role_block(heads, "solver", task="step 12345", budget=budget.model_copy(update={"tokenizer": "words"}))
    assert len(words.shown) > len(block.shown)  # words undercount: more lessons would have gone in


def test_a_library_trained_before_tokenizers_were_named_counted_words():
    old = Provenance.model_validate({"run": "r", "epoch": 0, "step": 0, "budget": {"inject_tokens": 300}})
    assert old.budget.tokenizer == "words"
    assert Provenance(run="r", epoch=0, step=0, budget=Budget()).budget.tokenizer == "model"


def test_a_run_records_the_tokenizer_it_counted_with(tmp_path):
    result, _, _ = train_on_fake(load_scenario("maths"), tmp_path, tasks=2, batch_size=2, group_size=2)
    config = json.loads((tmp_path / "run" / "run.json").read_text())["config"]
    assert config["budget"]["tokenizer"] == "words"
    assert result.steps[0].tokens_counted == "words and punctuation marks"
