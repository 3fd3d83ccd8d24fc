"""``bonbench train-verifier``: a learned verifier from grader-labelled samples that bonbench drew.

Steps, each resumable:

1. **Data.** Every ``--samples-from`` run directory is reopened (its task rebuilt from config.json);
   its samples and the grades of the task's current grader are joined by (problem_id, sample_idx).
   A sample without a grade, a reward-judged task, runs of different task families or of different
   policies are refused with a one-line error.
2. **Evaluation problems excluded, checked.** The problems of the family's evaluation sets (MATH
   test and MATH-500 for math; MBPP test and HumanEval for code) are loaded and compared with
   the training problems by id and by a normalised problem-text hash; any overlap is an error.
3. **Features.** The frozen backbone's feature of every sample (``verifier_model``), computed in
   chunks appended to ``features/`` so a killed run resumes where it stopped.
4. **Head.** Logistic regression (scikit-learn ``LogisticRegressionCV``, the L2 strength chosen by
   AUROC with folds grouped by problem, so one problem's samples never sit on both sides) on the
   standardised features, copied into the torch head.
5. **LoRA** (``--method lora``): the backbone's adapters and the head fine-tuned together with
   binary cross-entropy on the problems not held out, starting from the head fit on those same
   problems; training state saved every ``--save-every`` steps (atomically) and resumed.
6. **Manifest**, written last: a folder with ``bonbench_verifier.json`` is a finished verifier.

Held-out quality (AUROC on problems of the training runs that the head, or the adapters, did not
see) is reported in the manifest; evaluation on other runs is ``bonbench eval-verifier``
(``bonbench.apps.analysis.verifier_eval``).

Modules: ``request`` (the flags as a value), ``training_data`` (steps 1-2), ``features`` (3), ``fit`` (4),
``lora`` (5), ``train`` (the driver, 6). This package trains and writes the verifier folder; it
does not sample (``bonbench run`` does). Importing the package loads none of its modules (the CLI
reads ``request.TrainVerifierRequest``'s flags for ``bonbench --help`` without torch).
"""
