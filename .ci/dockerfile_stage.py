"""Read the final (runtime) stage of a Dockerfile, so that .ci/check-container tests
what the image really installs and runs instead of a hand-kept copy of it.

    python3 .ci/dockerfile_stage.py Dockerfile packages      # name=version per line (apt-get install args)
    python3 .ci/dockerfile_stage.py Dockerfile install-run   # the RUN command holding that apt-get install
    python3 .ci/dockerfile_stage.py Dockerfile env           # NAME=VALUE per line (ENV)
    python3 .ci/dockerfile_stage.py Dockerfile user|workdir  # USER / WORKDIR (last one wins)
    python3 .ci/dockerfile_stage.py Dockerfile entrypoint|healthcheck   # exec form, one argument per line

Handles line continuations, comments, parser-directive-free Dockerfiles, ARG defaults
(`${NAME}` / `$NAME` in the stage), and both ENV forms. Standard library only.
"""
from __future__ import annotations

import json
import re
import shlex
import sys


def instructions(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    buf = ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if not buf and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if buf and line.lstrip().startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        word, _, rest = buf.strip().partition(" ")
        out.append((word.upper(), rest.strip()))
        buf = ""
    if buf.strip():
        word, _, rest = buf.strip().partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def final_stage(instrs: list[tuple[str, str]]) -> tuple[dict[str, str], list[tuple[str, str]]]:
    global_args: dict[str, str] = {}
    stages: list[list[tuple[str, str]]] = []
    for word, rest in instrs:
        if word == "FROM":
            stages.append([])
        elif not stages:
            if word == "ARG":
                name, _, default = rest.partition("=")
                global_args[name.strip()] = default.strip().strip('"')
        else:
            stages[-1].append((word, rest))
    if not stages:
        sys.exit("error: no FROM in the Dockerfile")
    return global_args, stages[-1]


def substitute(value: str, args: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m.group(1) or m.group(2), m.group(0)), value)


def main() -> int:
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    path, what = sys.argv[1], sys.argv[2]
    with open(path, encoding="utf-8") as f:
        global_args, stage = final_stage(instructions(f.read()))
    args = dict(global_args)
    result: list[str] = []
    install_runs: list[str] = []
    env: dict[str, str] = {}
    user = workdir = ""
    entrypoint: list[str] = []
    healthcheck: list[str] = []
    for word, rest in stage:
        rest = substitute(rest, args)
        if word == "ARG":
            name, _, default = rest.partition("=")
            args[name.strip()] = default.strip().strip('"') or args.get(name.strip(), "")
        elif word == "RUN" and re.search(r"\bapt-get\s+(?:\S+\s+)*install\b", rest):
            install_runs.append(rest)
        elif word == "ENV":
            parts = shlex.split(rest)
            if parts and "=" not in parts[0]:
                env[parts[0]] = " ".join(parts[1:])
            else:
                for p in parts:
                    k, _, v = p.partition("=")
                    env[k] = v
        elif word == "USER":
            user = rest
        elif word == "WORKDIR":
            workdir = rest
        elif word == "ENTRYPOINT":
            entrypoint = json.loads(rest)
        elif word == "HEALTHCHECK":
            m = re.search(r"\bCMD\s+(\[.*\])\s*$", rest)
            healthcheck = json.loads(m.group(1)) if m else []
    if what == "packages":
        for run in install_runs:
            for cmd in re.split(r"&&|;|\|\|", run):
                words = shlex.split(cmd)
                if "apt-get" not in words or "install" not in words:
                    continue
                for w in words[words.index("install") + 1:]:
                    if not w.startswith("-"):
                        result.append(w)
        if not result:
            sys.exit("error: no apt-get install in the Dockerfile's final stage")
    elif what == "install-run":
        if len(install_runs) != 1:
            sys.exit(f"error: expected one RUN with apt-get install in the final stage, found {len(install_runs)}")
        result.append(install_runs[0])
    elif what == "env":
        result += [f"{k}={v}" for k, v in env.items()]
    elif what == "user":
        result.append(user or "0:0")
    elif what == "workdir":
        result.append(workdir or "/")
    elif what == "entrypoint":
        result += entrypoint
    elif what == "healthcheck":
        result += healthcheck
    else:
        sys.exit(f"error: unknown query {what!r}")
    print("\n".join(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
