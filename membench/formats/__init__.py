"""The files a user writes and membench reads: the pack format (manifest, traps, oracles) and the
transfer study's, their models and loaders, and the typed-field reader every JSON loader shares
(file, field and row in every error). Imports nothing of the project."""
