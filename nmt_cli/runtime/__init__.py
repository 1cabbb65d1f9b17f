"""How an `nmt` process runs: errors, signals, start-up, devices, cores, memory, files."""
