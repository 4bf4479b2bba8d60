"""Speed and memory measurements (not tests): ``python -m bench.run [DIR ...]``."""
