"""Layer 1, core: what every layer stands on (errors, records, run settings and their hash, the store,
atomic outputs, data and model paths, the generic registry); imports no other bonbench layer."""
