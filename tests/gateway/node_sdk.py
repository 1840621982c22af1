"""The official openai SDK for Node that the SDK tests drive: where node is,
and whether the SDK is installed (tests/gateway/node)."""
import os
import shutil
import sys

NODE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "node")


def node_from_argv():
    """--node PATH (ctest passes it; PATH may be empty or missing), else node on PATH."""
    if "--node" not in sys.argv:
        return shutil.which("node")
    i = sys.argv.index("--node")
    value = sys.argv[i + 1] if i + 1 < len(sys.argv) else ""
    del sys.argv[i:i + 2]
    return value or shutil.which("node")


def missing_prerequisite(node):
    """Why the SDK tests cannot run here, or None."""
    if not node:
        return "node not found"
    if not os.path.isdir(os.path.join(NODE_DIR, "node_modules", "openai")):
        return "the openai SDK is not installed (npm ci --prefix tests/gateway/node)"
    return None
