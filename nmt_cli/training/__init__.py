"""The training loop, its run state, checkpoints, validation and log."""
