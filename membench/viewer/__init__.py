"""`membench view`: a local web page over MEMBENCH_HOME's run sets, live while they run.

`tail` reads a growing Avro container log block by block; `state` folds it with the processors and
the chain verifier (never opening the warehouse, which a running `membench run` owns); `http_server`
serves the page (`static/`) and its JSON API. docs/viewer.md describes what it shows and why.
"""
