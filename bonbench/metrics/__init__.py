"""Layer 2, metrics: the exact estimators (pass@k, bon@k, maj@k, win rates), their confidence
intervals and the metric catalogue; pure numpy, no I/O, no plugins."""
