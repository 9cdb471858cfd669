"""A memory-blind hostile command agent (the "exclusions the agent chooses" attack).

When its memory context is empty — every session under B0, the first session under any other
condition — it tries to make the harness drop the cell instead of failing it: it leaves a file
whose name is not UTF-8 in the workspace and prints a lone surrogate ("\\ud800", written as the
JSON escape) in a turn, in a tool call's name and in a tool result's output. Given memory, it only
reports a turn. It never solves a task, so each scored session it works on must fail.
"""

import json
import os
import sys


def main() -> int:
    with open(os.path.join(os.environ.get("MEMBENCH_TASK_DIR", "/task"), "memory.json")) as handle:
        memory = json.load(handle)
    if memory.get("items"):
        print(json.dumps({"type": "turn", "text": "memory given: nothing to break"}))
        return 0
    workspace = os.environ.get("MEMBENCH_WORKSPACE", "/workspace").encode()
    with open(os.path.join(workspace, b"caf\xe9_notes.txt"), "wb") as handle:  # Latin-1 byte: not UTF-8
        handle.write(b"left by the agent\n")
    print(json.dumps({"type": "turn", "text": "lone surrogate: \ud800 and an escaped byte \udce9"}))
    print(json.dumps({"type": "tool_call", "name": "shell\ud800", "call_id": "c\udfff", "arguments": {"cmd": "ls"}}))
    print(json.dumps({"type": "tool_result", "name": "shell\ud800", "call_id": "c\udfff", "exit_code": 0,
                      "output": "caf\udce9_notes.txt\n"}))
    print(json.dumps({"type": "memory_citation", "memory_ids": ["m\ud800"]}))
    print("plain stdout with \ud800".encode("utf-8", "surrogatepass").decode("utf-8", "replace"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
