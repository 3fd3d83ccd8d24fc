"""Test code with its expected values taken out, for the process that runs untrusted code.

The recording run of a function-call test (``bonbench.plugins.graders.replay``) only needs the test to
*call* the candidate; the trusted replay, which sees the whole test, decides. ``blind_asserts``
rewrites every ``assert`` of the test so that the recording process evaluates only the candidate
calls inside it, in the order Python would, and never sees the rest of the assertion (the expected
value, the tolerance, the message). A candidate that walks up to its caller's frame, reads the
program's source or disassembles ``check`` then finds calls and inputs, not answers.

What it does not hide: expected values computed outside an ``assert`` (an assignment, a helper
function), and an ``assert`` whose candidate calls sit inside a lambda, a comprehension or a
short-circuiting ``and`` / ``or`` / ``if`` expression, which is kept as written (moving such a call
out of its scope or past its short-circuit would change which calls are made). ``blinded_fraction``
says how much of a test was hidden. This module only transforms text; it runs nothing.
"""

from __future__ import annotations

import ast
from collections.abc import Collection
from typing import TypeGuard

# Nodes whose inner expressions may not run, or run in their own scope, when the enclosing one does.
_OPAQUE = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.BoolOp, ast.IfExp)


def _is_call_to(node: ast.AST, callees: Collection[str]) -> TypeGuard[ast.Call]:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in callees


def _outer_calls(node: ast.AST, callees: Collection[str]) -> list[ast.Call] | None:
    """The outermost calls to ``callees`` under ``node`` in evaluation order, or None when one of
    them sits where it may not run (or not in this scope)."""
    if _is_call_to(node, callees):
        return [node]
    if isinstance(node, _OPAQUE):
        return None if any(_is_call_to(n, callees) for n in ast.walk(node)) else []
    calls: list[ast.Call] = []
    for child in ast.iter_child_nodes(node):  # fields in source order: Python's evaluation order here
        inner = _outer_calls(child, callees)
        if inner is None:
            return None
        calls.extend(inner)
    return calls


class _Blind(ast.NodeTransformer):
    def __init__(self, callees: Collection[str]) -> None:
        self.callees = callees
        self.asserts = 0
        self.blinded = 0

    def visit_Assert(self, node: ast.Assert) -> ast.stmt:
        self.asserts += 1
        calls = _outer_calls(node.test, self.callees)
        if calls is None:
            return node
        self.blinded += 1
        if not calls:
            return ast.copy_location(ast.Pass(), node)
        return ast.copy_location(ast.Expr(ast.Tuple(elts=list(calls), ctx=ast.Load())), node)


def blind_asserts(tests: str, callees: Collection[str]) -> tuple[str, float] | None:
    """``tests`` with each ``assert`` reduced to its calls of ``callees``, and the fraction of
    asserts that were hidden; None when the code does not parse (the caller keeps it as it is)."""
    try:
        tree = ast.parse(tests)
    except (SyntaxError, ValueError):
        return None
    blind = _Blind(frozenset(callees))
    tree = ast.fix_missing_locations(blind.visit(tree))
    return ast.unparse(tree) + "\n", (blind.blinded / blind.asserts if blind.asserts else 1.0)
