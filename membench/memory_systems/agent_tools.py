"""The condition's memory system as tools during a session: `search_memory` and `get_memory`.

Agents call them through the MCP server inside the sandbox (membench/agents/inside/mcp_memory.py)
or the built-in loop's `search_memory` tool; both reach this object over the session's gateway
channel (`POST /membench/memory/search`, `/membench/memory/get`). Every call is a `MemoryRead`
event with what was returned, so the contract evidence sees in-session reads like the one before
the session.

`get_memory(id)` returns an item this session has already been shown (in the context before the
session or by a search): a memory system is asked by query, not by id, and an agent cannot fetch
what it was never offered. An unknown id returns nothing, recorded as a read that admitted none.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Callable

from membench.memory_systems.base import MemoryContext, MemoryItem, count_tokens
from membench.schemas.events import bounded_text

if TYPE_CHECKING:  # annotations only (docs/design.md §3, typed payloads)
    from membench.schemas.payloads import Emit


class SessionMemoryTools:
    def __init__(self, search: Callable[[str], MemoryContext], shown: MemoryContext, token_budget: int):
        self._search = search
        self._budget = token_budget
        self._shown: dict[str, MemoryItem] = {item.memory_id: item for item in shown.items}
        self._lock = threading.Lock()  # an agent may call tools in parallel; a memory system is not thread-safe
        self.emit: Emit[Any] | None = None  # set by the channel's owner: emit(kind, payload, visibility)

    def call(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            return self._call(tool, args)

    def _call(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        if tool == "search":
            query = args.get("query")
            if not isinstance(query, str) or not query.strip():
                raise ValueError("search_memory: 'query' must be a non-empty string")
            context = self._search(query)
            for item in context.items:
                self._shown[item.memory_id] = item
            self._record(f"search_memory: {query}", context.candidates, context.items)
            return {"items": [_item(i) for i in context.items]}
        if tool == "get":
            memory_id = args.get("id")
            if not isinstance(memory_id, str) or not memory_id:
                raise ValueError("get_memory: 'id' must be a non-empty string")
            shown = self._shown.get(memory_id)
            self._record(f"get_memory: {memory_id}", (memory_id,), (shown,) if shown else ())
            return {"items": [_item(shown)] if shown else []}
        raise KeyError(f"no memory tool '{tool}' (search, get)")

    def _record(self, query: str, candidates, items) -> None:
        if self.emit is None:
            return
        context = "\n".join(f"[{i.memory_id}] {i.text}" for i in items)
        self.emit("MemoryRead", {
            "query": bounded_text(query), "candidates": list(candidates),
            "admitted_ids": [i.memory_id for i in items], "tokens_admitted": sum(count_tokens(i.text) for i in items),
            "token_budget": self._budget, "context": bounded_text(context)}, "agent")


def _item(item: MemoryItem) -> dict[str, Any]:
    return {"id": item.memory_id, "type": item.memory_type, "text": item.text}
