"""Regions of unfinished lines that a capture already holds (the class body or block their error landed in).

    python benchmarks/zen4/unfinished_in_captures/between_members.py
"""

from nestling.daemon.context import syntax
from nestling.daemon.context.languages import language_table
from nestling.daemon.context.syntax import SyntaxDocument

syntax.TYPED_REPARSES_BUDGET_S = syntax.NAMED_REPARSES_BUDGET_S = 60.0  # (regions, not time: no deadline)
STACK = "class Stack:\n    def push(self, x):\n        self.items.append(x)\n\n    {}\n\n    def pop(self):\n        return 1\n"
CASES = [
    ("python", STACK.format("def <|>")), ("python", STACK.format("async def <|>")), ("python", STACK.format("@<|>")),
    ("python", "def f():\n    from <|>\n    return 1\n"), ("python", "def f(x):\n    if x > <|>\n    return 1\n"),
    ("python", "def f(x):\n    y = g(x, <|>\n    return y\n"),
    ("javascript", "class A {\n  foo() { return 1; }\n  async <|>\n  bar() { return 2; }\n}\n"),
    ("javascript", "class A {\n  foo() { return 1; }\n  static <|>\n  bar() { return 2; }\n}\n"),
    ("javascript", "function f(a) {\n  const b = g(a, <|>\n  return b;\n}\n"),
    ("typescript", "class A {\n  foo(): number { return 1; }\n  private <|>\n  bar(): number { return 2; }\n}\n"),
    ("rust", "impl S {\n    fn a(&self) -> i32 { 1 }\n    pub fn <|>\n    fn b(&self) -> i32 { 2 }\n}\n"),
    ("go", "package main\n\nfunc a() int { return 1 }\n\nfunc (s *S) <|>\n\nfunc b() int { return 2 }\n"),
    ("java", "class A {\n  int a() { return 1; }\n  public <|>\n  int b() { return 2; }\n}\n"),
    ("cpp", "class A {\n public:\n  int a() { return 1; }\n  virtual <|>\n  int b() { return 2; }\n};\n"),
]
for language, snippet in CASES:
    offset = snippet.index("<|>")
    line = snippet[snippet.rfind("\n", 0, offset) + 1: offset + 3]
    region = SyntaxDocument(snippet.replace("<|>", ""), language_table()[language]).region_at(offset)
    print(f"{language:<11} {line!r:<22} {region.value}")
