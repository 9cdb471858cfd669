"""What runs a unit: the grid's plan, a unit's sessions (memory read, agent, scoring, memory
write), the unit orders of the Kafka runners, the scoring pre-flight, predictions files scored as
runs."""
