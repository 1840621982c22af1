"""Every path of this repository named in its docs and comments exists, and none names a
document outside it.

Reads every tracked text file (docs, sources, tests, scripts) for words that look like paths
in the repository (`src/...`, `docs/...`, `tests/...`, ...) and fails naming each one that is
not there, so a renamed or removed file cannot leave a pointer behind. A path is looked for
from the top of the repository and from each folder above the file naming it (the Python and
Node clients name their own `examples/...` and `src/...`); a Markdown link to a file is looked
for from the page's folder. Paths with placeholders
(`<harness>`, `{name}`, `*`, `${VAR}`) are not checked; nor is the estimate's text corpus,
which is other projects' prose.
Usage: test_paths.py --source-dir DIR
"""
import argparse
import os
import re
import subprocess
import sys

TOP_FOLDERS = ("src", "tests", "bench", "docs", "clients", "include", "scripts", "examples")
PATH = re.compile(r"(?<![\w./$-])((?:%s)/[A-Za-z0-9_./-]*[A-Za-z0-9_])" % "|".join(TOP_FOLDERS))
TEXT = re.compile(r"\.(c|h|md|py|sh|js|mjs|cjs|ts|txt|cmake|lua|html|css|in|json)$|(^|/)Makefile$")
NOT_CHECKED = ("bench/gateway_estimate/corpus/",)
# A document outside the repository, which its reader cannot open (written in two parts so that
# this file does not name one itself).
OUTSIDE = re.compile(r"\b" + "SPEC" + r"(\.md\b| [0-9]+)|\.\./" + "shared/")
# A Markdown link to a file of this repository, relative to the page: `[text](semantics.md#x)`.
LINK = re.compile(r"\]\(([A-Za-z0-9_./-]+)(?:#[^)]*)?\)")


def tracked_files(root):
    listed = subprocess.run(["git", "-C", root, "ls-files", "-z"], capture_output=True,
                            check=True).stdout.decode()
    return [f for f in listed.split("\0") if f and TEXT.search(f)
            and not f.startswith(NOT_CHECKED) and not f.endswith("package-lock.json")]


def exists_from(root, naming_file, path):
    folder = os.path.dirname(naming_file)
    while True:
        if os.path.exists(os.path.join(root, folder, path)):
            return True
        if not folder:
            return False
        folder = os.path.dirname(folder)


def missing_paths(root):
    missing = []
    for name in tracked_files(root):
        try:
            with open(os.path.join(root, name), encoding="utf-8") as f:
                lines = f.read().split("\n")
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        for number, line in enumerate(lines, 1):
            for match in PATH.finditer(line):
                path = match.group(1)
                after = line[match.end():match.end() + 1]
                if after in ("$", "{", "<", "*", "-") or path.endswith("/"):
                    continue
                if not exists_from(root, name, path):
                    missing.append("%s:%d: %s" % (name, number, path))
            if OUTSIDE.search(line):
                missing.append("%s:%d: a document outside the repository" % (name, number))
            if name.endswith(".md"):
                for match in LINK.finditer(line):
                    target = os.path.join(os.path.dirname(name), match.group(1))
                    if not os.path.exists(os.path.join(root, target)):
                        missing.append("%s:%d: link %s" % (name, number, match.group(1)))
    return missing


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--source-dir", required=True)
    args = parser.parse_args()
    if subprocess.run(["git", "-C", args.source_dir, "rev-parse"], capture_output=True).returncode:
        print("SKIP: the source folder is not a git checkout, so its files cannot be listed")
        return 77
    missing = missing_paths(args.source_dir)
    for line in missing:
        print("names what a reader of the repository cannot open:", line)
    print("%d missing" % len(missing))
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
