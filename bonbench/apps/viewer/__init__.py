"""``bonbench view``: the runs, their problems and every sample, on 127.0.0.1 or as a static bundle."""
