"""Build a Triton ``ASTSource`` for compiling a kernel for a target we are not running on."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def ast_source(kernel: Any, runtime_types: Sequence[str] | Mapping[str, str],
               constexprs: Mapping[str, Any]) -> Any:
    """``kernel`` (a ``@triton.jit`` function, or the interpreter's stand-in for one) specialized
    with ``constexprs``; runtime argument types given in parameter order, or by name."""
    from triton.compiler import ASTSource
    from triton.runtime.jit import JITFunction

    jit = JITFunction(kernel.fn)  # compilable even where the interpreter is on
    if isinstance(runtime_types, Mapping):
        signature = dict(runtime_types)
    else:
        signature = dict(zip(jit.arg_names, runtime_types, strict=False))
    signature.update({name: "constexpr" for name in constexprs})
    return ASTSource(jit, signature, dict(constexprs))
