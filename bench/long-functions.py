#!/usr/bin/env python3
"""Lists the workspace's non-test Rust functions longer than a limit (default 60 lines).

Usage: python3 bench/long-functions.py [LIMIT]   (from the repository's root)

STYLE.md asks for functions of about 60 lines at most; issue 26 counted them with this. A
function's length is from its `fn` line to the line of its closing brace. Test code is left
out: files under a `tests` folder, files named `tests.rs`, and everything after a file's first
top-level `#[cfg(test)]`. Braces inside comments, strings (raw ones too) and character literals
do not count, so `starts_with(['{', '['])` is not a block. Prints `LINES PATH NAME`, longest
first, then a count; exits 0 (it measures, it does not judge).
"""

import os
import re
import sys

FN = re.compile(r"\s*(pub(\([^)]*\))?\s+)?(async\s+)?(const\s+)?(unsafe\s+)?fn\s+(\w+)")
CHAR = re.compile(r"'(\\(x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]+\}|.)|[^\\'\n])'")
RAW = re.compile(r'b?r(#*)"')


def blank(text):
    """`text` with comments, strings and character literals as spaces (newlines kept)."""
    out = []
    i, n = 0, len(text)

    def skip_to(end):
        nonlocal i
        out.append("".join("\n" if c == "\n" else " " for c in text[i:end]))
        i = end

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            end = text.find("\n", i)
            skip_to(n if end < 0 else end)
        elif text.startswith("/*", i):
            depth, j = 0, i
            while j < n:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                    if depth == 0:
                        break
                else:
                    j += 1
            skip_to(j)
        elif (m := RAW.match(text, i)) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = text.find('"' + m.group(1), m.end())
            skip_to(n if end < 0 else end + 1 + len(m.group(1)))
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            skip_to(min(j + 1, n))
        elif c == "'" and (m := CHAR.match(text, i)):
            skip_to(m.end())
        else:
            out.append(c)
            i += 1
    return "".join(out)


def long_functions(path, limit):
    with open(path, encoding="utf-8") as file:
        lines = blank(file.read()).split("\n")
    # An inline test module ends what counts; `#[cfg(test)] mod tests;` (a file of its own,
    # often at the top) does not.
    for at, line in enumerate(lines):
        following = lines[at + 1].strip() if at + 1 < len(lines) else ""
        if line.startswith("#[cfg(test)]") and following.endswith("{"):
            lines = lines[:at]
            break
    found, i = [], 0
    while i < len(lines):
        m = FN.match(lines[i])
        if not m:
            i += 1
            continue
        j, depth, started = i, 0, False
        while j < len(lines):
            for ch in lines[j]:
                if ch == "{":
                    depth, started = depth + 1, True
                elif ch == "}":
                    depth -= 1
            if started and depth == 0:
                break
            if not started and lines[j].rstrip().endswith(";"):
                break
            j += 1
        if started and j - i + 1 > limit:
            found.append((j - i + 1, path, m.group(6)))
        i = j + 1 if started else i + 1
    return found


def main():
    limit = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    found = []
    for root, dirs, files in os.walk("."):
        dirs[:] = [d for d in dirs if d not in ("target", ".git", "tests", "node_modules")]
        for name in files:
            if name.endswith(".rs") and name != "tests.rs":
                found += long_functions(os.path.join(root, name)[2:], limit)
    for lines, path, name in sorted(found, reverse=True):
        print(lines, path, name)
    print(f"{len(found)} functions over {limit} lines")


if __name__ == "__main__":
    main()
