"""Checks around the libcst parse, by regular expressions and Python's own parser: where
libcst's parser error really is, texts that Python's parser must see first (brackets nested too
deep, very long lines), Python's own syntax errors, and chains of operators long enough to make
libcst's native parser take quadratic time. Used by the engine before and after it parses."""

from __future__ import annotations

import ast
import re
import warnings
from typing import Any, Optional, Tuple


_AT = re.compile(r"^(?:parser error: )?error at (\d+):(\d+): ")


def parser_position(exc: Any) -> Tuple[int, int, str]:
    """libcst's native parser puts the accurate position in its message ("error at L:C")."""
    message = str(exc.message)
    m = _AT.match(message)
    if m:
        return int(m.group(1)), int(m.group(2)), message[m.end():]
    return exc.raw_line, exc.raw_column + 1, message


_NON_BRACKET = re.compile(r"[^()\[\]{}]+")
_BRACKET_PAIR = re.compile(r"\(\)|\[\]|\{\}")
# anchored at line starts: unanchored, the search tried every position of every line (a
# quadratic scan: 0.32 s on pytorch-image-models against 0.07 s)
_LONGISH_LINE = re.compile(r"^[^\n]{2000}", re.M)
MAX_CHEAP_DEPTH = 100


def python_parse_first(text: str) -> bool:
    """Must Python's parser see the text before libcst's? True when brackets may nest
    MAX_CHEAP_DEPTH deep or more (counted on the brackets alone, those in strings and comments
    included, so the count errs high) or a line is 2,000 characters or longer (deep chains of
    operators without brackets, which Python's parser rejects as too complex). Regular
    expressions only: about 2% of an ``ast.parse``."""
    if _LONGISH_LINE.search(text) is not None:
        return True
    s = _NON_BRACKET.sub("", text)
    depth = 0
    while s:
        shorter = _BRACKET_PAIR.sub("", s)
        if len(shorter) == len(s):
            return False
        s, depth = shorter, depth + 1
        if depth >= MAX_CHEAP_DEPTH:
            return True
    return False


def compile_error(text: str) -> Optional[Tuple[int, int, str]]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
    except SyntaxError as exc:
        return (exc.lineno or 1, max(exc.offset or 1, 1), f"syntax error: {exc.msg}")
    except RecursionError:
        return (1, 1, "syntax error: too deeply nested for Python's parser")
    except (ValueError, MemoryError):
        return None
    return None


_LONG_LINE = re.compile(r"^[^\n]{20000}", re.M)
MAX_OPERANDS = 2000


def long_chain(text: str) -> Optional[Tuple[int, int]]:
    """``(line, operands)`` of a chain of binary operators (``a + b + c ...``) longer than
    MAX_OPERANDS, which libcst's native parser takes quadratic time on (a 5,000-term sum: 18 s;
    no signal can interrupt it). Checked only in files with a line of 20,000 characters or more
    (one regular-expression scan); None otherwise."""
    m = _LONG_LINE.search(text)
    if m is None:
        return None
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp):
            n, cur = 1, node
            while isinstance(cur, ast.BinOp):
                n += 1
                cur = cur.left
            if n > MAX_OPERANDS:
                return node.lineno, n
        elif isinstance(node, (ast.BoolOp, ast.Compare)):
            n = len(node.values) if isinstance(node, ast.BoolOp) else len(node.comparators) + 1
            if n > MAX_OPERANDS:
                return node.lineno, n
    return None


def line_text(text: str, line: int) -> str:
    lines = text.splitlines()
    return lines[line - 1] if 0 < line <= len(lines) else ""
