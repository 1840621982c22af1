"""The architecture as docs/architecture.md draws it, checked on the built
objects: which file calls which is read from their symbols (nm), so nothing
is taken on trust.

- Folders call down the picture only: server over wire, http, wait and the
  gateway; those over the backends; the backends over the TigerBeetle client;
  everything over util and core. A call from a lower folder to a higher one
  fails the test, naming the symbol.
- Inside each folder of src/ no file calls in a circle (a file calling
  another that calls it back, directly or round a longer loop), but for the
  circles KNOWN_CIRCLES lists, each waiting for its fix: a new circle, or a
  known one that grew, shrank or went, fails the test.
- Inside each folder of src/ no module includes in a circle either (read
  from the #include lines: a module is foo.c with foo.h and foo_internal.h),
  but for the circles KNOWN_INCLUDE_CIRCLES lists, the same way.
- Every folder of src/ with C files has its layer.
- Every file of src/ has its room in docs/architecture.md: each .c is named
  there, and each .h that has no .c of its own name.
- src/server names no dialect of the gateway: its code (comments aside)
  holds no provider's name, no dialect's endpoint or api constant and no
  gateway path; those live in the dialects' table (src/gateway/gw_dialect*.c),
  whose route paths docs/api.md names.
- src/server/exchange.h, the exchange every handler answers through, names
  no type of the gateway's nor of the data path's: a handler keeps its own
  state behind the exchange's handler_state.

Usage: test_layers.py BUILD_DIR"""

import collections
import glob
import os
import re
import subprocess
import sys
import unittest

BUILD = os.path.abspath(sys.argv.pop(1) if len(sys.argv) > 1 else "build")
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src")

# Higher calls lower; equal layers may not call each other.
LAYERS = {
    "core": 0, "util": 1, "tbclient": 2, "client": 2, "loadgen": 2, "backend": 3,
    "wait": 4, "gateway": 4, "http": 4, "control": 4,
    "wire": 5,
    "server": 6, "cli": 6,
}
# Files that are a library of their own below their folder: the limit definitions' decoder
# (llwire_limits), which the gateway links for its templates' defaults.
UNIT_LAYERS = {"wire/decode_limits": 3.5}
# The call circles inside a folder that wait for their fix, each as its files. Strike one here
# when it is broken (the test says so).
KNOWN_CIRCLES = []
# The include circles between modules inside a folder that wait for their fix, each as its
# modules. Strike one here when it is broken (the test says so).
KNOWN_INCLUDE_CIRCLES = [
    # struct sq_backend (sq_backend.h) embeds the types of the modules that work on it
    ["backend/sqlite/sq_admin", "backend/sqlite/sq_backend", "backend/sqlite/sq_console",
     "backend/sqlite/sq_json", "backend/sqlite/sq_leases", "backend/sqlite/sq_ledger",
     "backend/sqlite/sq_mirror", "backend/sqlite/sq_queue", "backend/sqlite/sq_schema",
     "backend/sqlite/sq_sync", "backend/sqlite/sqlite"],
    # the dialects' table (gw_dialect.h) includes the headers of the formats whose files
    # read it (struct gw_surface, gw_dialect_of)
    ["gateway/gw_answer", "gateway/gw_dialect", "gateway/gw_endpoint", "gateway/gw_error",
     "gateway/gw_estimate", "gateway/gw_gemini", "gateway/gw_request", "gateway/gw_sse",
     "gateway/gw_usage"],
]


def folder_of(unit):
    return unit.split("/", 1)[0]


def layer_of(unit):
    """The unit's layer: its own when it has one, else its folder's; None outside the picture."""
    return UNIT_LAYERS.get(unit, LAYERS.get(folder_of(unit)))


def read_symbols():
    """Each object file of src/ as "folder[/sub]/file": what it defines, what it uses."""
    defined, used = {}, collections.defaultdict(set)
    objects = glob.glob(os.path.join(BUILD, "src", "**", "CMakeFiles", "*.dir", "*.c.o"),
                        recursive=True)
    for path in objects:
        relative = os.path.relpath(path, os.path.join(BUILD, "src"))
        folder = relative.split("/CMakeFiles/")[0]
        name = os.path.basename(path)[:-len(".c.o")]
        if not os.path.exists(os.path.join(SOURCE, folder, name + ".c")):
            continue  # generated (the console's assets), or left from a file since moved
        unit = folder + "/" + name
        out = subprocess.run(["nm", path], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in "TDBR":
                defined[parts[2]] = unit
            elif len(parts) == 2 and parts[0] == "U":
                used[unit].add(parts[1])
    return defined, used


def calls():
    """unit -> {unit it calls: a symbol it uses there}."""
    defined, used = read_symbols()
    edges = collections.defaultdict(dict)
    for unit, symbols in used.items():
        for symbol in sorted(symbols):
            target = defined.get(symbol)
            if target is not None and target != unit:
                edges[unit].setdefault(target, symbol)
    return edges


def circles(edges, units):
    """Strongly connected groups of more than one unit among units."""
    index, low, stack, on, found = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in units:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(units):
        if v not in index:
            visit(v)
    return found


def module_of(relative):
    """"server/gateway" of server/gateway.c, gateway.h and gateway_internal.h."""
    stem = os.path.splitext(relative)[0]
    return stem[:-len("_internal")] if stem.endswith("_internal") else stem


def includes():
    """module -> {module it includes: the header as written}, from the sources of src/."""
    edges = collections.defaultdict(dict)
    for path in glob.glob(os.path.join(SOURCE, "**", "*.[ch]"), recursive=True):
        relative = os.path.relpath(path, SOURCE)
        module = module_of(relative)
        with open(path, encoding="utf-8") as f:
            headers = re.findall(r'^#include "([^"]+)"', f.read(), re.MULTILINE)
        for header in headers:
            local = os.path.normpath(os.path.join(os.path.dirname(relative), header))
            target = module_of(local if os.path.exists(os.path.join(SOURCE, local)) else header)
            if target != module:
                edges[module].setdefault(target, header)
    return edges


class Includes(unittest.TestCase):
    def test_no_module_includes_in_a_circle(self):
        """Inside each folder of src/, no circle of #include between modules but the known
        ones."""
        edges = includes()
        every = {u for u in set(edges) | {t for ts in edges.values() for t in ts}
                 if os.path.exists(os.path.join(SOURCE, folder_of(u)))}
        found = []
        for folder in sorted({folder_of(u) for u in every}):
            found += circles(edges, {u for u in every if folder_of(u) == folder})
        self.assertEqual(sorted(found), sorted(KNOWN_INCLUDE_CIRCLES),
                         "include circles inside a folder (a new one, or a known one changed)")

    def test_every_folder_has_its_layer(self):
        """Each folder of src/ that holds C is in LAYERS (docs/architecture.md's picture)."""
        folders = {os.path.relpath(p, SOURCE).split(os.sep)[0]
                   for p in glob.glob(os.path.join(SOURCE, "**", "*.c"), recursive=True)}
        self.assertEqual(sorted(f for f in folders if f not in LAYERS), [])


class Layers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.edges = calls()
        if not cls.edges:
            raise unittest.SkipTest("no object files under %s/src (build first)" % BUILD)

    def test_folders_call_down_only(self):
        """No call from a folder to one at its layer or above (docs/architecture.md)."""
        upward = []
        for unit, targets in sorted(self.edges.items()):
            a = layer_of(unit)
            for target, symbol in sorted(targets.items()):
                b = layer_of(target)
                if folder_of(unit) == folder_of(target) or a is None or b is None:
                    continue
                if a <= b:
                    upward.append("%s -> %s (%s)" % (unit, target, symbol))
        self.assertEqual(upward, [], "calls that go up or across the picture")

    def test_no_file_calls_in_a_circle(self):
        """Inside each folder of src/, no circle between files but the known ones."""
        every = set(self.edges) | {t for ts in self.edges.values() for t in ts}
        found = []
        for folder in sorted({folder_of(u) for u in every}):
            found += circles(self.edges, {u for u in every if folder_of(u) == folder})
        self.assertEqual(sorted(found), sorted(KNOWN_CIRCLES),
                         "call circles inside a folder (a new one, or a known one changed)")

    def test_the_check_sees_a_circle(self):
        """The circle finder sees a loop of three and a pair, and no circle in a chain."""
        edges = {"g/a": {"g/b": "f"}, "g/b": {"g/c": "f"}, "g/c": {"g/a": "f"},
                 "g/d": {"g/e": "f"}, "g/e": {"g/d": "f", "g/a": "f"}, "g/x": {"g/a": "f"}}
        self.assertEqual(sorted(circles(edges, set(edges) | {"g/a"})),
                         [["g/a", "g/b", "g/c"], ["g/d", "g/e"]])


class Documented(unittest.TestCase):
    def test_every_file_is_in_the_architecture(self):
        """Each source file of src/ is named in docs/architecture.md."""
        with open(os.path.join(SOURCE, "..", "docs", "architecture.md"), encoding="utf-8") as f:
            doc = f.read()
        missing = []
        for root, _, names in os.walk(SOURCE):
            for name in sorted(names):
                stem, ext = os.path.splitext(name)
                if ext not in (".c", ".h") or name.startswith("console_assets.c"):
                    continue
                if ext == ".h" and stem + ".c" in names:
                    continue  # goes with its .c
                if name not in doc:
                    missing.append(os.path.relpath(os.path.join(root, name), SOURCE))
        self.assertEqual(missing, [], "files docs/architecture.md does not place")


# What names a dialect in code: a provider's or dialect's name (any case, inside identifiers
# and strings too), a dialect's api or endpoint constant, a gateway route's path. The MCP
# route's endpoint is its own module's (src/server/gateway_mcp*.c, docs/mcp.md).
DIALECT_WORDS = re.compile(r"openai|anthropic|gemini|google|responses", re.IGNORECASE)
DIALECT_CONSTANTS = re.compile(
    r"\bGW_API_[A-Z]|\bGW_ENDPOINT_(?!MCP\b|LAST\b)[A-Z]|\bROUTE_ERROR_(OPENAI|ANTHROPIC|GEMINI|MCP)")
DIALECT_PATHS = re.compile(r'"/v1beta|"/v1/(chat|completions|embeddings|messages|responses|models)')


def code_of(text):
    """text without its comments (strings kept: a path or header name is code)."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(" " + "\n" * text.count("\n", i, end))  # line numbers kept
            i = end
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text[i] in "\"'":
            quote, j = text[i], i + 1
            while j < n and text[j] != quote:
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def dialect_names(folder):
    """Each line of code under folder that names a dialect: "file:line: text"."""
    found = []
    for path in sorted(glob.glob(os.path.join(folder, "*.[ch]"))):
        with open(path, encoding="utf-8") as f:
            code = code_of(f.read())
        for number, line in enumerate(code.splitlines(), 1):
            if DIALECT_WORDS.search(line) or DIALECT_CONSTANTS.search(line) or \
                    DIALECT_PATHS.search(line):
                found.append("%s:%d: %s" % (os.path.basename(path), number, line.strip()))
    return found


class Dialects(unittest.TestCase):
    def test_server_names_no_dialect(self):
        """No file of src/server names a dialect: the gateway's dialects' table does."""
        self.assertEqual(dialect_names(os.path.join(SOURCE, "server")), [],
                         "src/server names a dialect (move it into src/gateway/gw_dialect_*.c)")

    def test_the_check_sees_a_dialect(self):
        """The check above finds what it looks for (and skips comments)."""
        self.assertTrue(DIALECT_WORDS.search(code_of('x = "anthropic-version"; /* c */')))
        self.assertFalse(DIALECT_WORDS.search(code_of("x = 1; /* Anthropic's */")))
        self.assertTrue(DIALECT_CONSTANTS.search(code_of("if (api == GW_API_GEMINI)")))
        self.assertFalse(DIALECT_CONSTANTS.search(code_of("if (e == GW_ENDPOINT_MCP)")))
        self.assertTrue(DIALECT_PATHS.search(code_of('{"x", "/v1/messages", 1}')))

    def test_docs_name_every_gateway_route(self):
        """Each route of the dialects' table is named in docs/api.md."""
        with open(os.path.join(SOURCE, "..", "docs", "api.md"), encoding="utf-8") as f:
            doc = f.read()
        rows = []
        for path in glob.glob(os.path.join(SOURCE, "gateway", "gw_dialect_*.c")):
            with open(path, encoding="utf-8") as f:
                rows += re.findall(r'\{"(gateway_\w+)", "(/[^"]*)"', f.read())
        self.assertGreaterEqual(len(rows), 10, "the route rows of the dialects' files")
        missing = [name for name, route in rows if route.rstrip("/") not in doc]
        self.assertEqual(missing, [], "gateway routes docs/api.md does not name")


# What names a handler's own type in code: the gateway's (a gateway call, gw_* types, their
# headers) and the data path's (its requests, results, entries, batches, the wait layer's
# ticket, and the headers that define them).
HANDLER_TYPES = re.compile(
    r"\bgateway\w*|\bgw_\w+|\bstruct\s+(reserve|complete|release|usage|requirement|actual|batch"
    r"|wait)\w*|#include\s+\"(backend|wait|gateway|wire)/")


def handler_types(path):
    """Each line of code in path that names a handler's own type: "file:line: text"."""
    with open(path, encoding="utf-8") as f:
        code = code_of(f.read())
    return ["%s:%d: %s" % (os.path.basename(path), number, line.strip())
            for number, line in enumerate(code.splitlines(), 1) if HANDLER_TYPES.search(line)]


class Exchange(unittest.TestCase):
    def test_exchange_names_no_handler_type(self):
        """exchange.h names no type of the gateway's or the data path's (handler_state)."""
        self.assertEqual(handler_types(os.path.join(SOURCE, "server", "exchange.h")), [],
                         "src/server/exchange.h names a handler's own type")

    def test_the_check_sees_a_handler_type(self):
        """The check above finds what it looks for (and skips comments)."""
        self.assertTrue(HANDLER_TYPES.search(code_of("struct gateway_call *call;")))
        self.assertTrue(HANDLER_TYPES.search(code_of("    struct reserve_request request;")))
        self.assertTrue(HANDLER_TYPES.search(code_of("struct wait_ticket ticket;")))
        self.assertTrue(HANDLER_TYPES.search(code_of('#include "backend/backend.h"')))
        self.assertFalse(HANDLER_TYPES.search(code_of("void *handler_state; /* gateway_call */")))
        self.assertFalse(HANDLER_TYPES.search(code_of("int exchange_call_backend(void);")))


if __name__ == "__main__":
    unittest.main()
