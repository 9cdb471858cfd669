"""Runners: plan a grid of (pack, sequence, condition, seed) units, run each session in a sandbox
with an agent and a memory system, and emit every step as an event on the bus."""
