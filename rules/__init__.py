"""The rule catalogue: one module per rule, installed as ``gradlint.rules``.

Every ``Rule`` subclass defined in a module of this package is registered by
``gradlint.rule.registry()``; adding a rule means adding a module here and its fixture in
``fixtures/``.
"""
