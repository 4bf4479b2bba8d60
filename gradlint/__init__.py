"""gradlint: find PyTorch autograd misuse before a training run wastes hours on it.

Static mode never imports torch; see ``gradlint.cli``.
"""

__version__ = "0.1.0"


def __getattr__(name: str):  # type: ignore[no-untyped-def]
    """``gradlint.monitor`` (the runtime monitor) is imported on first use: importing gradlint
    must not import torch."""
    if name == "monitor":
        from gradlint.runtime import monitor

        return monitor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
