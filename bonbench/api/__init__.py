"""Layer 3, the plugin API: the Task, Grader, Verifier, Sampler, RewardModel and Objective contracts and their register_* decorators; the one page a plugin author reads."""
