"""Settings precedence, clear errors, and the generated reference in configs/default.yaml."""

from __future__ import annotations

from pathlib import Path

import pytest

from reme_agent.config import Settings, load_settings, reference_yaml
from reme_agent.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def test_precedence_is_override_then_env_then_files_then_vault(tmp_path: Path) -> None:
    (tmp_path / ".reme").mkdir()
    (tmp_path / ".reme" / "config.yaml").write_text("search: {vector_weight: 0.1, rrf_k: 10}\n")
    file = tmp_path / "c.yaml"
    file.write_text("search: {vector_weight: 0.2, candidates: 20}\n")
    env = {"REME_SEARCH__VECTOR_WEIGHT": "0.4", "REME_EMBEDDER__NAME": "hash"}
    s = load_settings([file], vault=tmp_path, environ=env, overrides={"search": {"top_chunks_per_path": 3}})
    assert s.search.rrf_k == 10            # vault file
    assert s.search.candidates == 20       # --config file beats vault file
    assert s.search.vector_weight == 0.4   # env beats files
    assert s.embedder.name == "hash"
    assert s.search.top_chunks_per_path == 3
    s2 = load_settings([file], vault=tmp_path, environ=env, overrides={"search": {"vector_weight": 0.9}})
    assert s2.search.vector_weight == 0.9  # explicit override beats env


def test_unknown_keys_and_bad_values_name_the_key(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("search: {vector_wieght: 0.5}\n")
    with pytest.raises(ConfigError, match="search.vector_wieght"):
        load_settings([bad], environ={})
    bad.write_text("embedder: {name: bert}\n")
    with pytest.raises(ConfigError, match="embedder.name"):
        load_settings([bad], environ={})
    bad.write_text("- a list\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_settings([bad], environ={})


def test_the_committed_reference_matches_the_model() -> None:
    committed = (ROOT / "configs" / "default.yaml").read_text(encoding="utf-8")
    assert committed == reference_yaml(), "run: reme-agent config --reference > configs/default.yaml"
    import yaml

    assert Settings.model_validate(yaml.safe_load(committed)) == Settings()


def test_cas_redos_are_capped_at_three_as_design_says() -> None:
    assert Settings(jobs={"max_cas_redos": 3}).jobs.max_cas_redos == 3
    with pytest.raises(ValueError, match="max_cas_redos"):
        Settings(jobs={"max_cas_redos": 5})


def test_a_typo_names_the_key_it_was_meant_to_be(tmp_path: Path) -> None:
    bad = tmp_path / "model.yaml"
    bad.write_text("model:\n  provider: openai\n  modle: gpt-4.1-mini\n")
    with pytest.raises(ConfigError) as got:
        load_settings([bad], environ={})
    assert str(got.value).startswith("Unknown config key 'model.modle'. Did you mean "
                                     "'model.model'? Keys in model: provider, model,")
    with pytest.raises(ConfigError, match="Did you mean 'model.provider'"):
        load_settings([], environ={"REME_MODEL__PROVIDR": "openai"})
    with pytest.raises(ConfigError, match="^Unknown config key 'modle'. Did you mean 'model'"):
        load_settings([], environ={"REME_MODLE__PROVIDER": "openai"})
    with pytest.raises(ConfigError, match=r"^Bad config value at model.provider: .* Did you "
                                          r"mean 'openai'\?$"):
        load_settings([], environ={"REME_MODEL__PROVIDER": "openia"})


def test_a_yaml_syntax_error_is_one_line_with_its_place(tmp_path: Path) -> None:
    bad = tmp_path / "model.yaml"
    bad.write_text("model:\n  provider: [openai\n")
    with pytest.raises(ConfigError) as got:
        load_settings([bad], environ={})
    message = str(got.value)
    assert "\n" not in message and "YAML syntax error at line 3, column 1" in message
