"""Layer 5, the tasks (imported as ``bonbench_tasks``): one module per benchmark, each a decorated
factory of an ``api.Task`` (problems, prompt, grader, family), and ``common``, what several tasks
share; a task may use any plugin kind and ``common`` but never another task, and nothing below the
pipeline imports a task."""
