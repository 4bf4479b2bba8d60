"""gradlint: find PyTorch autograd misuse before a training run wastes hours on it.

Static mode never imports torch; see ``gradlint.cli``.
"""

__version__ = "0.1.0"
