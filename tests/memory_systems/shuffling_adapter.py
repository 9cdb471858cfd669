"""A test double of the memory-system *protocol* (external.py's JSON command adapter), not of any
library: it stores every written text per namespace (user_id) in a JSON file under argv[1] and
returns all of a namespace's texts on a read — with `shuffle`, in an order drawn from os.urandom
on every read (so two processes present the same memories in different orders: the
non-determinism that fails the cross-process identity gate); with `stable`, in written order."""

import json
import os
import random
import sys
from pathlib import Path

store, mode = Path(sys.argv[1]), sys.argv[2]
request = json.loads(sys.stdin.read())
path = store / f"{request['user_id']}.json"
items = json.loads(path.read_text()) if path.exists() else []
if request["op"] == "write":
    items += [{"id": e["event_id"], "text": e["text"]} for e in request["events"]]
    store.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(items))
    print(json.dumps({"items": [{"id": i["id"], "text": i["text"], "type": "double"} for i in items]}))
else:
    if mode == "shuffle":
        random.Random(os.urandom(16)).shuffle(items)
    print(json.dumps({"items": [{"id": i["id"], "text": i["text"], "type": "double"} for i in items]}))
