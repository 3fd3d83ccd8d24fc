"""Layer 6, the pipeline: the stages of one run (sample, grade, score), comparisons, shards, readers of foreign sample files and the metrics report."""
