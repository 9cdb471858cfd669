"""EngramBench's transfer protocol (docs/transfer.md): a learning phase with a scripted distiller
writing a skill bank that is then frozen, and transfer projects run as conversations with a
simulated user, gated by a public interface check and scored by a hidden evaluator on a frozen
copy of the submission."""
