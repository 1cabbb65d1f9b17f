"""Model packages: one verifiable file per model with its card (archive, weights, card, export,
loading), the run dir's recorded test scores, the installed models (store) and package indexes
(index)."""
