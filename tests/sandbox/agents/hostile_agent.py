#!/usr/bin/env python3
"""A hostile command agent (speaks the command-agent JSON-lines protocol).

Usage: hostile_agent.py TARGETS_JSON  (the targets inline, as one argument)

In session 1 it tries, one by one, to cross the sandbox: read the hidden oracle, the reference
solution, the pack manifest, the warehouse, the event log, a canary file and /root; see the
parent's environment; open network connections; write outside its workspace; exceed its memory,
CPU-time and process limits; leave a background process behind. Each attempt is a `tool_call`
named `attempt:<what>` and a `tool_result` whose exit_code is 1 when the attempt failed (was
blocked) and 0 when it succeeded, with what it saw in `output`. Then it solves the session
honestly (the oracle must still score it) and, last, sleeps past its wall-clock limit.
Later sessions only solve (session 3 from the memory context, citing the memory it used).
"""

import json
import os
import re
import socket
import subprocess
import sys
import time

# The interpreter running this agent is mounted read-only at its own path; it may show through.
TOOLCHAIN = os.path.realpath(sys.base_prefix)
TOOLCHAIN_IN_ROOT = (TOOLCHAIN.split("/")[2],) if TOOLCHAIN.startswith("/root/") else ()


def emit(doc):
    sys.stdout.write(json.dumps(doc) + "\n")
    sys.stdout.flush()


def attempt(what, fn):
    emit({"type": "tool_call", "call_id": what, "name": f"attempt:{what}", "arguments": {}})
    try:
        escaped, detail = fn()
    except Exception as exc:  # noqa: BLE001 - every failure is a blocked attempt
        escaped, detail = False, f"{type(exc).__name__}: {exc}"
    emit({"type": "tool_result", "call_id": what, "name": f"attempt:{what}", "exit_code": 0 if escaped else 1,
          "output": ("ESCAPED: " if escaped else "BLOCKED: ") + str(detail)[:4000]})


def read_file(path):
    def fn():
        with open(path, "rb") as fh:
            return True, fh.read(4000).decode("utf-8", "replace")
    return fn


def list_dir(path):
    def fn():
        return True, sorted(os.listdir(path))
    return fn


def read_root():
    seen = []
    for path in ("/root/.bash_history", "/root/.ssh/id_rsa", "/root/.profile", "/root/.bashrc"):
        try:
            with open(path, "rb") as fh:
                seen.append(f"{path}: {fh.read(200)!r}")
        except OSError as exc:
            seen.append(f"{path}: {type(exc).__name__}")
    try:
        entries = sorted(os.listdir("/root"))
    except OSError as exc:
        entries = [type(exc).__name__]
    # only the read-only Python toolchain may show through (bwrap mounts it at its own path); with
    # a toolchain outside /root the sandbox has no /root at all (FileNotFoundError)
    blocked = (*TOOLCHAIN_IN_ROOT, "PermissionError", "FileNotFoundError")
    escaped = any(": b" in s for s in seen) or any(e not in blocked for e in entries)
    return escaped, f"/root lists {entries}; " + "; ".join(seen)


def search_host(names):
    def fn():
        found = []
        skip = ("/usr", "/proc", "/sys", "/dev", "/etc", TOOLCHAIN)
        for top, dirs, files in os.walk("/"):
            if top.startswith(skip) or "site-packages" in top or "dist-packages" in top:
                dirs[:] = []
                continue
            for name in files + dirs:
                if name in names or name.endswith(".solution.json"):
                    found.append(os.path.join(top, name))
        return bool(found), found or "nothing found"
    return fn


def environment(env_name):
    def fn():
        seen = dict(os.environ)
        leaked = env_name in seen
        proc_env = []
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    with open(f"/proc/{pid}/environ", "rb") as fh:
                        data = fh.read().decode("utf-8", "replace")
                    proc_env.append(f"{pid}: {data}")
                    leaked = leaked or env_name in data
                except OSError as exc:
                    proc_env.append(f"{pid}: {type(exc).__name__}")
        return leaked, f"environ={seen} proc={proc_env}"
    return fn


def network(port, host_ip):
    def fn():
        results = []
        reached = False
        for host, p in (("127.0.0.1", port), (host_ip, port), ("1.1.1.1", 53), ("8.8.8.8", 53)):
            try:
                with socket.create_connection((host, p), timeout=3):
                    reached = True
                    results.append(f"{host}:{p} connected")
            except OSError as exc:
                results.append(f"{host}:{p} {type(exc).__name__}: {exc}")
        try:
            socket.getaddrinfo("example.com", 80)
            reached = True
            results.append("dns resolved")
        except OSError as exc:
            results.append(f"dns {type(exc).__name__}")
        return reached, results
    return fn


def write_outside(outside_dir):
    def fn():
        results = []
        escaped = False
        for path in (os.path.join(outside_dir, "escape.txt"), "/workspace/../escape.txt", "/escape.txt"):
            try:
                with open(path, "w") as fh:
                    fh.write("escaped")
                results.append(f"{path}: written")
                escaped = escaped or path.startswith(outside_dir)  # the harness checks the host side too
            except OSError as exc:
                results.append(f"{path}: {type(exc).__name__}")
        return escaped, results
    return fn


def child(code, timeout):
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    return proc.returncode, (proc.stdout + proc.stderr)[-300:]


def memory():
    code, out = child("b = bytearray(6 * 1024 ** 3); b[::4096] = b'x' * len(b[::4096]); print('allocated')", 60)
    return code == 0, f"exit {code}: {out}"


def cpu():
    started = time.monotonic()
    try:
        code, out = child("while True: pass", 60)
    except subprocess.TimeoutExpired:
        return True, "ran 60 s of CPU without being stopped"
    return False, f"killed after {time.monotonic() - started:.1f}s wall, exit {code}"


def processes():
    code, out = child(
        "import os, time\n"
        "n = 0\n"
        "pids = []\n"
        "try:\n"
        "    for _ in range(2000):\n"
        "        pid = os.fork()\n"
        "        if pid == 0:\n"
        "            time.sleep(20); os._exit(0)\n"
        "        pids.append(pid); n += 1\n"
        "except OSError as e:\n"
        "    print('fork failed after', n, type(e).__name__)\n"
        "for p in pids:\n"
        "    os.kill(p, 9)\n"
        "print('forked', n)\n", 60)
    forked = int(re.findall(r"forked (\d+)", out)[-1]) if "forked" in out else -1
    return forked >= 2000, f"exit {code}: {out.strip()}"


def background(marker):
    def fn():
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)", marker],
                                start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return True, f"started pid {proc.pid} (the harness must kill it)"
    return fn


def solve(session):
    instruction = open(os.environ["MEMBENCH_INSTRUCTION_FILE"]).read()
    money = "ledger/money.py"
    if "parse_amount" in instruction:
        with open(money, "a") as fh:
            fh.write("\n\ndef parse_amount(text):\n    whole, _, frac = text.partition('.')\n"
                     "    return int(whole) * 100 + int((frac + '00')[:2])\n")
    elif "split_evenly" in instruction:
        with open(money, "a") as fh:
            fh.write("\n\ndef split_evenly(cents, parts):\n    q, r = divmod(cents, parts)\n"
                     "    return [q + 1] * r + [q] * (parts - r)\n")
    elif "make_invoice" in instruction:
        memory = json.load(open(os.environ["MEMBENCH_MEMORY_JSON"]))
        currency, cited = "USD", []
        for item in memory["items"]:
            found = re.search(r"default currency code is ([A-Z]+)", item["text"])
            if found:
                currency, cited = found.group(1), [item["id"]]
                break
        with open("ledger/invoice.py", "w") as fh:
            fh.write(f"DEFAULT_CURRENCY = {currency!r}\n\n\ndef make_invoice(lines, currency=None):\n"
                     "    return {'total': sum(lines), 'currency': currency or DEFAULT_CURRENCY}\n")
        if cited:
            emit({"type": "memory_citation", "memory_ids": cited})
    emit({"type": "tool_call", "call_id": "solve", "name": "write_file", "arguments": {"session": session},
          "is_patch": True})
    emit({"type": "tool_result", "call_id": "solve", "name": "write_file", "exit_code": 0, "is_patch": True})


def main():
    targets = json.loads(sys.argv[1])
    session = int(os.environ.get("MEMBENCH_SESSION_INDEX", "0"))
    emit({"type": "turn", "text": f"hostile agent, session {session}", "input_tokens": 10, "output_tokens": 5})
    print("a plain line that is not JSON")
    if session != 1:
        solve(session)
        return
    attempt("read_oracle", read_file(targets["oracle"]))
    attempt("read_solution", read_file(targets["solution"]))
    attempt("read_manifest", read_file(targets["manifest"]))
    attempt("read_warehouse", list_dir(targets["warehouse"]))
    attempt("read_event_log", read_file(targets["log"]))
    attempt("search_hidden", search_host({"manifest.json", "events.avro", "hidden", "warehouse", "canary.txt"}))
    attempt("read_canary", read_file(targets["canary"]))
    attempt("read_root", read_root)
    attempt("parent_environment", environment(targets["env_name"]))
    attempt("network", network(targets["port"], targets["host_ip"]))
    attempt("write_outside", write_outside(targets["outside_dir"]))
    attempt("memory_limit", memory)
    attempt("cpu_limit", cpu)
    attempt("process_limit", processes)
    attempt("background_process", background(targets["marker"]))
    solve(session)
    emit({"type": "tool_call", "call_id": "wall_time", "name": "attempt:wall_time", "arguments": {}})
    time.sleep(3600)  # the wall-clock limit must end this


if __name__ == "__main__":
    main()
