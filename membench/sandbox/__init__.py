"""Isolated workspaces for agents and oracles (docs/design.md §6). Fail closed: when a backend cannot
isolate, callers get `IsolationUnavailable` and record `isolation_unavailable`; nothing runs
unjailed."""

from membench.sandbox.base import IsolationUnavailable, Sandbox, SandboxResult, SandboxSpec

__all__ = ["IsolationUnavailable", "Sandbox", "SandboxResult", "SandboxSpec"]
