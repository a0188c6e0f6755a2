"""Fails when schemathesis warned that an operation got only 401/403 answers, unless that
operation is listed, with its reason, in auth_only.txt beside this file.

    python3 auth_only.py ST_OUTPUT [LIST]

Reads the warning block of schemathesis's output ("Authentication failed: ..." or "Missing
authentication: ..."): the `  - METHOD /path` lines up to its hint (a line starting with 💡).
"""

import os
import sys


def auth_only(lines):
    ops, inside = [], False
    for line in lines:
        text = line.rstrip("\n")
        if text.startswith(("Authentication failed:", "Missing authentication:")):
            inside = True
        elif inside and text.startswith("💡"):
            inside = False
        elif inside and text.startswith("  - "):
            ops.append(text[4:].strip())
    return ops


def listed(path):
    out = {}
    for line in open(path, encoding="utf-8"):
        if line.strip() and not line.startswith("#"):
            op, _, reason = line.rstrip("\n").partition("\t")
            out[op.strip()] = reason.strip()
    return out


def main():
    log = sys.argv[1]
    allow = listed(sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "auth_only.txt"))
    ops = auth_only(open(log, encoding="utf-8", errors="replace"))
    bad = [op for op in ops if not allow.get(op)]
    for op in ops:
        if op not in bad:
            print(f"schemathesis: {op} got only 401/403, as listed: {allow[op]}")
    if bad:
        print(f"schemathesis: {len(bad)} operation(s) got only 401/403 answers and are not listed "
              f"with a reason in auth_only.txt: {', '.join(bad)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
