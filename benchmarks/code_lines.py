"""Lines of code of the library and commands (t2t_lite/, bin/, problems/, hparams/), without blank lines,
comments and docstrings: the measure issue 55 asks not to grow.

  python benchmarks/code_lines.py [CHECKOUT]   # default: this checkout
"""
import ast
import io
import pathlib
import sys
import tokenize


def code_lines(source: str) -> int:
    """The lines of `source` holding code: not blank, not only a comment, not in a docstring."""
    tree = ast.parse(source)
    doc_lines = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                doc_lines.update(range(first.lineno, first.end_lineno + 1))
    lines = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                        tokenize.ENDMARKER):
            continue
        for line in range(tok.start[0], tok.end[0] + 1):
            if line not in doc_lines:
                lines.add(line)
    return len(lines)

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
total = 0
for d in ("t2t_lite", "bin", "problems", "hparams"):
    for p in (root / d).rglob("*.py"):
        total += code_lines(p.read_text(encoding="utf-8"))
print(total)
