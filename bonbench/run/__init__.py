"""Layer 7, run: from a request to a finished run directory.

``request`` (RunRequest, Plan, RunResult, MergeResult: the records), ``resolve`` (the one path from
names to a task with its grader configured, a verifier, the sampled model, the sampler and a
RunConfig; the trainer and verifier training use it too), ``rules`` (metric companions, greedy
decoding, kl / winrate checks, the k-fits-the-samples rule), ``plan`` (a request into runs, imports
of foreign samples, shards), ``reopen`` (a plan for an existing run directory), ``execute`` (sample,
grade, verify, score a plan), ``merge`` (combine shards) and ``verifier_choice`` (the default
verifier and the line that says why).

It parses no flags and prints nothing itself (warnings go through ``warnings``; ``bonbench.apps.cli``
parses and prints); the stages, and the row files they write, are ``bonbench.pipeline``'s, and the
backends, graders and verifiers are plugins'. Importing the package loads none of its modules.
"""
