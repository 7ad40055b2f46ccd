"""AgentScope 2.x memory middleware (DESIGN §1 L1/L2, §9; seed "Loaded Memory" slot).

Add it to an app's `Agent(middlewares=[MemoryMiddleware(vault)])`:

- **before a reply** (`on_reply`): search the vault with the user's message and keep the
  hits for this reply; `on_system_prompt` appends them as a `## Loaded Memory` section on
  every reasoning step of that reply, as a delimited block of data that says it is not
  instructions (`recall/memory_block.py`: a recalled note cannot forge a heading, a result
  or a command). Why the system prompt and not the context:
  the notes steer this reply without piling up in `agent.state.context` turn after turn.
- **after a reply**: the turn (the user's message and the agent's messages of this reply)
  goes to the synchronizer: "llm" mode when a model is given or configured, else the
  no-model "transcript" mode, so an app with no memory model still keeps a log. Each
  message gets the turn id a hook or `reme-agent sync` would give it for the whole
  conversation (`jobs/turns.py`): the middleware keeps how often each turn came before in
  `agent.state.middle_context` (it survives context compression and a saved state), so a
  `session_end` hook re-sending the conversation records nothing twice.

Memory never breaks the app: a failed search or sync is logged and the reply goes on.
The search runs on the event loop's thread (the vault's index handles are not shared
across threads); set `background=True` to run the sync as a task (`await mw.flush()`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Callable
from typing import TYPE_CHECKING, Any, Literal

from agentscope.middleware import MiddlewareBase

from reme_agent.jobs.synchronizer import (
    arun_synchronizer,
    choose_mode,
    coerce_messages,
    transcript_slug,
)
from reme_agent.jobs.turns import base_key

if TYPE_CHECKING:
    from reme_agent.jobs.guard import JobResult
    from reme_agent.vault import Vault

log = logging.getLogger("reme_agent.middleware")
TURN_COUNTS = "reme_agent.turn_counts"
"""`agent.state.middle_context` key: {Turn.base: times seen} for stable turn ids."""

SECTION = "## Loaded Memory"


class MemoryMiddleware(MiddlewareBase):
    """Recall before a reply ("Loaded Memory" in the system prompt), sync after it."""

    def __init__(self, vault: Vault, *, limit: int = 5, recall: bool = True,
                 sync: bool = True, sync_mode: Literal["auto", "llm", "transcript"] = "auto",
                 model: Any | None = None, prefix: str | None = None,
                 background: bool = False, min_query_chars: int = 2) -> None:
        self.vault = vault
        self.limit = limit
        self.recall = recall
        self.sync = sync
        self.sync_mode = sync_mode
        self.model = model
        self.prefix = prefix
        self.background = background
        self.min_query_chars = min_query_chars
        self.loaded: dict[str, str] = {}          # session -> rendered notes of the reply
        self.last_sync: JobResult | None = None
        self.last_error: str | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- hooks -------------------------------------------------------------------------
    async def on_reply(self, agent: Any, input_kwargs: dict[str, Any],
                       next_handler: Callable[..., AsyncGenerator[Any, None]]
                       ) -> AsyncGenerator[Any, None]:
        sid = _session_of(agent)
        query = user_text(input_kwargs.get("inputs"))
        if self.recall and len(query.strip()) >= self.min_query_chars:
            text = self.recall_text(query, sid)
            if text:
                self.loaded[sid] = text
        before = {m.id for m in agent.state.context}
        seen = self._turn_counts(agent)
        finished = False
        try:
            async for item in next_handler(**input_kwargs):
                yield item
            finished = True
        finally:
            self.loaded.pop(sid, None)
            turn = [m for m in agent.state.context if m.id not in before]
            self._count_turns(agent, turn)  # a failed reply's messages count too
        if not finished:
            return
        if self.sync and query.strip():
            if self.background:
                task = asyncio.create_task(self._sync(turn, sid, seen))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            else:
                await self._sync(turn, sid, seen)

    async def on_system_prompt(self, agent: Any, current_prompt: str) -> str:
        text = self.loaded.get(_session_of(agent))
        if not text:
            return current_prompt
        return f"{current_prompt}\n\n{SECTION}\n\n{text}"

    # -- parts -------------------------------------------------------------------------
    def recall_text(self, query: str, session_id: str | None = None) -> str | None:
        """The recalled notes for `query` as a delimited data block (`recall.memory_block`:
        a note cannot forge headings, results or instructions), or None when nothing
        matches or search fails."""
        from reme_agent.recall.memory_block import render_memory
        from reme_agent.recall.search import search

        own = f"/{transcript_slug(session_id)}/" if session_id else None
        try:
            response = search(self.vault, query, limit=self.limit, prefix=self.prefix)
        except Exception as exc:  # recall must never break the app's reply
            log.warning("memory recall failed: %s", exc)
            return None
        # Weak results are below the relevance floor: no memory beats unrelated memory.
        hits = [n for n in response.results if not n.weak and not (own and own in n.path)]
        return render_memory(hits) if hits else None

    def _turn_counts(self, agent: Any) -> dict[str, int]:
        """How often each turn (`Turn.base`) came before this reply in the conversation.

        Kept in `middle_context`; a state that has none yet (the middleware added to a
        running conversation) starts from the messages in its context.
        """
        store = agent.state.middle_context
        counts = store.get(TURN_COUNTS)
        if not isinstance(counts, dict):
            counts = {}
            for t in coerce_messages(agent.state.context):
                b = base_key(t["role"], t["text"])
                counts[b] = counts.get(b, 0) + 1
            store[TURN_COUNTS] = counts
        return dict(counts)

    def _count_turns(self, agent: Any, messages: list[Any]) -> None:
        counts = agent.state.middle_context.setdefault(TURN_COUNTS, {})
        for t in coerce_messages(messages):
            b = base_key(t["role"], t["text"])
            counts[b] = counts.get(b, 0) + 1

    async def _sync(self, turn: list[Any], session_id: str | None,
                    seen: dict[str, int] | None = None) -> None:
        mode = choose_mode(self.vault, self.sync_mode, self.model)
        try:
            self.last_sync = await arun_synchronizer(self.vault, turn, mode=mode,
                                                     model=self.model, session_id=session_id,
                                                     seen=seen)
            self.last_error = self.last_sync.error
        except Exception as exc:  # the reply already happened; a failed log must not undo it
            log.warning("memory sync failed: %s", exc)
            self.last_error = f"{type(exc).__name__}: {exc}"

    async def flush(self) -> None:
        """Wait for background syncs (with `background=True`)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)


def _session_of(agent: Any) -> str:
    return str(getattr(getattr(agent, "state", None), "session_id", None) or "default")


def user_text(inputs: Any) -> str:
    """The text of the user's message(s) among a reply's inputs ('' for events)."""
    msgs = inputs if isinstance(inputs, list) else [inputs]
    parts = []
    for msg in msgs:
        if getattr(msg, "role", None) != "user":
            continue
        getter = getattr(msg, "get_text_content", None)
        text = getter() if callable(getter) else None
        if text:
            parts.append(text)
    return "\n".join(parts)
