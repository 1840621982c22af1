"""Runs the Python client's tests: `python3 run_tests.py [--binary PATH]
[unittest args]`. PATH is the llmlimitd to test against (default
build/llmlimitd, or $LLMLIMITD)."""

import os
import sys
import unittest

import support

if __name__ == "__main__":
    os.environ["LLMLIMITD"] = support.harness.binary_from_argv(support.binary())
    names = sys.argv[1:]
    loader = unittest.defaultTestLoader
    if names:
        suite = loader.loadTestsFromNames(names)
    else:
        suite = loader.discover(support.HERE, pattern="test_*.py", top_level_dir=support.HERE)
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    sys.exit(0 if result.wasSuccessful() else 1)
