"""Start-up time of the ``bonbench`` command: ``bonbench --help`` and ``bonbench run --help`` against
bare Python, in one run.

Each command is a fresh process of this interpreter; the commands take turns (``--repeats`` rounds,
default 20) so that load from other processes hits them alike, and each is summarised by its median
and its best wall time. The ratios divide medians by the named baseline's median: ``python -c pass``
(the interpreter's own start-up, which no change to bonbench can remove) and ``python -c "import
argparse"`` (the least any argparse command pays). The bonbench commands run as the installed
``bonbench`` script does (``from bonbench.apps.cli import main``), with this interpreter.

It also lists the modules each command imports that a help text should not need (the heavy
libraries of tests/layer_rules.py HEAVY, the sandbox's execution code, the pipeline's readers):
a name there is where the start-up went.

Usage: python benchmarks/bench_startup.py [--repeats 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

SCRIPT = "import sys; from bonbench.apps.cli import main; sys.argv[0] = 'bonbench'; sys.exit(main())"
BASELINES = {"python -c pass": ["-c", "pass"], 'python -c "import argparse"': ["-c", "import argparse"]}
COMMANDS = {"bonbench --help": ["--help"], "bonbench run --help": ["run", "--help"]}
# what a help text should not import; any of these in the list below is start-up time to find
UNWANTED = ("numpy", "rich", "torch", "scipy", "datasets", "transformers", "asyncio", "importlib.metadata",
            "urllib.request", "sqlite3", "bonbench_sandbox.execution", "bonbench.pipeline.readers",
            "bonbench.metrics.estimators", "bonbench.run.resolve")
PROBE = ("import sys, json\nfrom bonbench.apps.cli import main\ntry:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
         "print(json.dumps(sorted(m for m in {unwanted!r} if m in sys.modules)), file=sys.stderr)")


def wall(args: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def unwanted_imports(argv: list[str]) -> list[str]:
    res = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv, unwanted=UNWANTED)], capture_output=True,
                         text=True, check=True)
    return list(json.loads(res.stderr.strip().splitlines()[-1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20, help="rounds of every command (default 20)")
    opts = parser.parse_args()
    runs = {**{name: args for name, args in BASELINES.items()},
            **{name: ["-c", SCRIPT, *argv] for name, argv in COMMANDS.items()}}
    for args in runs.values():  # warm the file cache and bytecode before timing
        wall(args)
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(opts.repeats):
        for name, args in runs.items():
            times[name].append(wall(args))
    median = {name: statistics.median(t) for name, t in times.items()}
    print(f"{'command':<30} {'median':>9} {'best':>9}   " + "   ".join(f"x {b}" for b in BASELINES))
    for name, t in times.items():
        ratios = "   ".join(f"{median[name] / median[b]:>{len(b) + 2}.2f}" for b in BASELINES)
        print(f"{name:<30} {median[name] * 1e3:>6.1f} ms {min(t) * 1e3:>6.1f} ms   {ratios}")
    print(f"({opts.repeats} rounds, {sys.executable}, Python {sys.version.split()[0]})")
    for name, argv in COMMANDS.items():
        found = unwanted_imports(argv)
        print(f"{name}: imports {', '.join(found) if found else 'none'} of {len(UNWANTED)} modules a help text "
              "should not need")
    return 0


if __name__ == "__main__":
    sys.exit(main())
